package cassandra

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gocql/gocql"

	"github.com/cqlseq/cqlseq/storage/cql"
)

// launch starts CassandraDaemon on the configuration in inst.Dir and waits
// until CQL answers on inst.Host; then it sets inst's PID, ReleaseInfo and
// StartupTime. On failure the process it started has ended and inst is
// unchanged.
func launch(ctx context.Context, o Options, lib string, inst *Instance) error {
	dir := inst.Dir
	jamm, err := findJar(lib, "jamm-")
	if err != nil {
		return fmt.Errorf("cassandra: %w", err)
	}
	raiseNoFile()

	// Appended to: a restart's output follows the crashed run's.
	logFile, err := os.OpenFile(filepath.Join(dir, "logs", "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("cassandra: %w", err)
	}
	defer logFile.Close()
	args := jvmArgs(o, lib, jamm, dir)
	cmd := exec.Command(o.Java, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Stdin = nil
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	began := time.Now()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("cassandra: starting %s: %w", o.Java, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	pid := cmd.Process.Pid
	o.Log("started Cassandra %s pid %d in %s, waiting for CQL on %s", o.Version, pid, dir, inst.Host)

	waitCtx, cancel := context.WithTimeout(ctx, o.StartTimeout)
	defer cancel()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		if rel, err := probeInstance(inst); err == nil {
			inst.PID = pid
			inst.ReleaseInfo = rel
			inst.StartupTime = time.Since(began)
			// The child keeps running after this process exits; the
			// goroutine waiting on it is abandoned only then.
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("cassandra: the JVM exited before CQL answered (%v); log tail:\n%s", err, LogTail(dir, 60))
		case <-waitCtx.Done():
			_ = killGroup(pid, 10*time.Second)
			return fmt.Errorf("cassandra: no CQL answer on %s within %v (%w); log tail:\n%s", inst.Host, o.StartTimeout, waitCtx.Err(), LogTail(dir, 60))
		case <-tick.C:
		}
	}
}

func probe(host string) (string, error) { return probeInstance(&Instance{Host: host}) }

// probeInstance reads the node's release version, as the superuser over
// TLS on a Secure node. A Secure node answers only once its default
// superuser exists.
func probeInstance(inst *Instance) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	s, err := connect(ctx, inst, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer s.Close()
	var rel string
	if err := s.Query("SELECT release_version FROM system.local").Scan(&rel); err != nil {
		return "", err
	}
	return rel, nil
}

// connect opens a session to the one node inst through storage/cql
// (cqlseq's one way to a session), as the superuser over TLS on a Secure
// node, its queries bounded by timeout.
func connect(ctx context.Context, inst *Instance, timeout time.Duration) (*gocql.Session, error) {
	o := cql.Options{
		Hosts:                    []string{inst.Host},
		DisableInitialHostLookup: true,
		Timeout:                  timeout,
		ConnectTimeout:           timeout,
		Logger:                   slog.New(slog.DiscardHandler),
	}
	if inst.Secure {
		pool, err := caPool(inst.CAFile)
		if err != nil {
			return nil, err
		}
		o.TLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		o.Username, o.Password = Superuser, SuperuserPassword
	}
	return cql.Connect(ctx, o)
}

func freePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("cassandra: finding a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func raiseNoFile() {
	var r syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r) == nil && r.Cur < 100000 {
		if r.Max < 100000 {
			r.Cur = r.Max
		} else {
			r.Cur = 100000
		}
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r)
	}
}

// Stop ends the instance's process group (SIGTERM, then SIGKILL after 20 s)
// after checking the PID still belongs to a CassandraDaemon started in
// inst.Dir, reports the process's peak resident set, and removes inst.Dir.
func Stop(inst *Instance) (peakRSSKiB int64, err error) {
	if inst.PID > 0 && isOurs(inst) {
		peakRSSKiB = peakRSS(inst.PID)
		if err := killGroup(inst.PID, 20*time.Second); err != nil {
			return peakRSSKiB, err
		}
	}
	if inst.Dir != "" && strings.Contains(filepath.Base(inst.Dir), "cqlseq-cassandra-") {
		if err := os.RemoveAll(inst.Dir); err != nil {
			return peakRSSKiB, fmt.Errorf("cassandra: removing %s: %w", inst.Dir, err)
		}
	}
	return peakRSSKiB, nil
}

// Running reports whether the instance's process is alive and is the
// CassandraDaemon this launcher started in inst.Dir (a stale state file left
// by a killed session names a dead or reused pid).
func (inst *Instance) Running() bool { return alive(inst.PID) && isOurs(inst) }

func isOurs(inst *Instance) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", inst.PID))
	if err != nil {
		return false
	}
	cmd := string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
	return strings.Contains(cmd, "CassandraDaemon") && strings.Contains(cmd, filepath.Clean(inst.Dir)+"/")
}

func peakRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				n, _ := strconv.ParseInt(f[1], 10, 64)
				return n
			}
		}
	}
	return 0
}

func killGroup(pid int, grace time.Duration) error {
	_ = syscall.Kill(-pid, syscall.SIGCONT) // a paused node cannot act on SIGTERM
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if !alive(pid) {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	for range 50 {
		if !alive(pid) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("cassandra: pid %d did not exit after SIGKILL", pid)
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) S ...
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// LogTail returns the last n lines of the run's logs (stdout and system.log).
func LogTail(dir string, n int) string {
	var sb strings.Builder
	for _, f := range []string{"logs/stdout.log", "logs/system.log"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			continue
		}
		fmt.Fprintf(&sb, "--- %s\n%s\n", f, tail(string(b), n))
	}
	return sb.String()
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
