package cassandra

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeJava writes a java stand-in: `-version` reports Java 17, anything
// else prints its arguments and exits 3 (a JVM that dies at startup).
func fakeJava(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "java")
	script := "#!/bin/sh\n" +
		"if [ \"$1\" = \"-version\" ]; then echo 'openjdk version \"17.0.1\" 2021-10-19' >&2; exit 0; fi\n" +
		"echo \"fake jvm: $*\"\nexit 3\n"
	require.NoError(t, os.WriteFile(p, []byte(script), 0o755))
	return p
}

// fakeOptions are Options whose tools and jar cache need no Java and no
// network.
func fakeOptions(t *testing.T) Options {
	t.Helper()
	o := Options{Java: fakeJava(t), CacheDir: t.TempDir(), StartTimeout: 10 * time.Second}
	o.EnsureDefaults()
	lib := libDir(o)
	require.NoError(t, os.MkdirAll(lib, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(lib, "jamm-0.4.0.jar"), nil, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(lib, ".complete"), []byte(o.Version+"\n"), 0o644))
	return o
}

// fakeInstance makes a run directory as Start leaves it (no process) and
// returns an Instance for it.
func fakeInstance(t *testing.T) *Instance {
	t.Helper()
	dir, err := os.MkdirTemp(t.TempDir(), "cqlseq-cassandra-")
	require.NoError(t, err)
	ports, err := freePorts(2)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "logs"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cassandra.yaml"), []byte(cassandraYAML(dir, ports[0], ports[1], true)), 0o644))
	return &Instance{Dir: dir, Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])), Version: DefaultVersion, CrashSafe: true}
}

func TestRestartRefusesBadArguments(t *testing.T) {
	o := fakeOptions(t)
	good := fakeInstance(t)
	noYAML := *good
	noYAML.Dir, _ = os.MkdirTemp(t.TempDir(), "cqlseq-cassandra-")
	otherPort := *good
	otherPort.Host = "127.0.0.1:1"
	otherVersion := *good
	otherVersion.Version = "4.1.0"
	notOurs := *good
	notOurs.Dir = t.TempDir()
	for _, tt := range []struct {
		name  string
		inst  *Instance
		down  time.Duration
		wants []string
	}{
		{"nil", nil, 0, []string{"invalid instance: nil"}},
		{"no yaml", &noYAML, 0, []string{"cassandra.yaml"}},
		{"other port", &otherPort, 0, []string{`host "127.0.0.1:1" does not match native_transport_port`}},
		{"other version", &otherVersion, 0, []string{`runs Cassandra "4.1.0"`}},
		{"not a run dir, negative down", &notOurs, -time.Second, []string{"not a run directory made by Start", "down time -1s is negative"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var before Instance
			if tt.inst != nil {
				before = *tt.inst
			}
			err := Restart(context.Background(), tt.inst, o, tt.down)
			require.Error(t, err)
			require.True(t, errors.Is(err, ErrInvalidInstance) || errors.Is(err, ErrInvalidOptions), "%v", err)
			for _, w := range tt.wants {
				require.Contains(t, err.Error(), w)
			}
			if tt.inst != nil {
				require.Equal(t, before, *tt.inst, "a refused restart leaves the instance alone")
				_, err := os.Stat(filepath.Join(tt.inst.Dir, "logs", "stdout.log"))
				require.ErrorIs(t, err, os.ErrNotExist, "nothing was started")
			}
		})
	}
	err := Restart(context.Background(), good, Options{Java: o.Java, CacheDir: o.CacheDir, StartTimeout: -time.Second}, 0)
	require.ErrorIs(t, err, ErrInvalidOptions)
	require.Contains(t, err.Error(), "StartTimeout -1s is not positive")
}

// TestRestartCrashesAndRelaunches: a process posing as the instance's
// CassandraDaemon is killed with its group, and the JVM is started again in
// the same directory on the same cassandra.yaml (the fake JVM then exits,
// which Restart reports with the log tail).
func TestRestartCrashesAndRelaunches(t *testing.T) {
	o := fakeOptions(t)
	inst := fakeInstance(t)
	log := filepath.Join(inst.Dir, "logs", "stdout.log")
	require.NoError(t, os.WriteFile(log, []byte("first run\n"), 0o644))

	// "sleep; true" keeps sh from exec'ing sleep: the cmdline stays the
	// one isOurs recognises, and the sleep child is in the group.
	node := exec.Command("/bin/sh", "-c", "sleep 300; true", "CassandraDaemon", filepath.Join(inst.Dir, "cassandra.yaml"))
	node.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, node.Start())
	exited := make(chan struct{})
	var werr error
	go func() { werr = node.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-node.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	inst.PID = node.Process.Pid
	// Until the child has exec'd, its cmdline is this test binary's.
	require.Eventually(t, inst.Running, 10*time.Second, 10*time.Millisecond)

	began := time.Now()
	err := Restart(context.Background(), inst, o, 200*time.Millisecond)
	require.Error(t, err)
	require.Contains(t, err.Error(), "the JVM exited before CQL answered")
	require.GreaterOrEqual(t, time.Since(began), 200*time.Millisecond, "the node stays down for the down time")

	select {
	case <-exited:
		var ee *exec.ExitError
		require.ErrorAs(t, werr, &ee)
		ws, ok := ee.Sys().(syscall.WaitStatus)
		require.True(t, ok)
		require.Equal(t, syscall.SIGKILL, ws.Signal(), "crashed, not shut down")
	case <-time.After(10 * time.Second):
		t.Fatal("the old process was not killed")
	}
	require.Equal(t, node.Process.Pid, inst.PID, "a failed start keeps the old pid")

	b, err := os.ReadFile(log)
	require.NoError(t, err)
	out := string(b)
	require.True(t, strings.HasPrefix(out, "first run\n"), "the restart appends to the run's log: %q", out)
	require.Contains(t, out, "fake jvm: ")
	require.Contains(t, out, "-Dcassandra.config=file://"+filepath.Join(inst.Dir, "cassandra.yaml"))
	require.Contains(t, out, "org.apache.cassandra.service.CassandraDaemon")
}

func TestRestartHonoursContextWhileDown(t *testing.T) {
	o := fakeOptions(t)
	inst := fakeInstance(t) // no process: only started
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	began := time.Now()
	err := Restart(ctx, inst, o, time.Minute)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(began), 10*time.Second)
	_, err = os.Stat(filepath.Join(inst.Dir, "logs", "stdout.log"))
	require.ErrorIs(t, err, os.ErrNotExist, "nothing was started")
}

func TestRestartReportsPortInUse(t *testing.T) {
	o := fakeOptions(t)
	inst := fakeInstance(t)
	l, err := net.Listen("tcp", inst.Host)
	require.NoError(t, err)
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err = Restart(ctx, inst, o, 0)
	require.Error(t, err)
	_, port, _ := net.SplitHostPort(inst.Host)
	require.Contains(t, err.Error(), "port "+port+" of the instance is in use")
}

func TestConfiguredPorts(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "cassandra.yaml")
	require.NoError(t, os.WriteFile(p, []byte(cassandraYAML(dir, 19042, 17000, false)), 0o644))
	n, s, err := configuredPorts(p)
	require.NoError(t, err)
	require.Equal(t, 19042, n)
	require.Equal(t, 17000, s)

	require.NoError(t, os.WriteFile(p, []byte("storage_port: 17000\n"), 0o644))
	_, _, err = configuredPorts(p)
	require.ErrorContains(t, err, "missing")
	require.NoError(t, os.WriteFile(p, []byte("storage_port: x\nnative_transport_port: 1\n"), 0o644))
	_, _, err = configuredPorts(p)
	require.ErrorContains(t, err, `storage_port "x" is not a port`)
}
