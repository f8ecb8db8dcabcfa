// Package readme runs the README's command blocks as a user would type them
// (issue 28): the Quick start, command line, Global sequences, ID service
// and Operations sections, in one bash shell, in a copy of this checkout,
// against the test cluster. Only "$(make -s cassandra-up)" is replaced, by
// the cluster's hosts; "make test" is not run (this test is part of it).
// A command that exits non-zero, or whose output no longer shows one of
// its "#>" lines, fails the test. The ID service's Python snippet needs
// requests: when the python3 on PATH lacks it, the test installs it with
// pip into a virtual environment of its own, first on the README's PATH.
package readme

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/integration/itest"
)

func TestMain(m *testing.M) { os.Exit(itest.Main(m)) }

// sections are the README sections whose blocks run.
var sections = []string{"Quick start", "The command line", "Global sequences", "The ID service", "Operations"}

// hostCommand is what the README runs to get a cluster; the test puts the
// cluster's hosts in its place.
const hostCommand = "$(make -s cassandra-up)"

// notRun are commands the README shows that this test does not run, and why.
var notRun = map[string]string{
	"make test": "this test is part of it",
}

// scriptTimeout bounds the whole README (a 10 s bench twice, make build, make demo).
const scriptTimeout = 15 * time.Minute

func TestTheREADMERunsAsWritten(t *testing.T) {
	for _, tool := range []string{"bash", "make", "go", "git", "curl", "python3"} {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "the README's blocks need %s on PATH (README, Requirements)", tool)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	text, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	all, err := parseCommands(string(text), sections)
	require.NoError(t, err)

	hosts := strings.Join(itest.Hosts(), ",")
	var cmds []command
	substituted := 0
	for _, c := range all {
		if why, skip := notRun[bareCommand(c.text)]; skip {
			t.Logf("README line %d: not run: %s (%s)", c.line, c.text, why)
			continue
		}
		substituted += strings.Count(c.text, hostCommand)
		c.text = strings.ReplaceAll(c.text, hostCommand, hosts)
		cmds = append(cmds, c)
	}
	require.NotEmpty(t, cmds)
	require.Positive(t, substituted, "the README no longer says how to get a cluster (%s)", hostCommand)

	work := copyCheckout(t, root)
	outDir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
	defer cancel()
	sh := exec.CommandContext(ctx, "bash", "-c", script(cmds, outDir))
	sh.Dir = work
	sh.Env = withBuf(t, root, withRequests(t, userEnv()))
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a timeout stops the whole group
	sh.Cancel = func() error { return syscall.Kill(-sh.Process.Pid, syscall.SIGKILL) }
	sh.WaitDelay = 10 * time.Second
	var shOut strings.Builder
	sh.Stdout, sh.Stderr = &shOut, &shOut
	began := time.Now()
	runErr := sh.Run()
	// A command left running in the background (the script stopped at a
	// failure before its wait) goes with the group.
	if err := syscall.Kill(-sh.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		t.Errorf("stopping the README's processes: %v", err)
	}
	t.Logf("the README's %d commands ran in %.1f s", len(cmds), time.Since(began).Seconds())
	if runErr != nil {
		t.Errorf("bash: %v (%s)", runErr, shOut.String())
	}

	for i, c := range cmds {
		out, _ := os.ReadFile(filepath.Join(outDir, fmt.Sprintf("%d.out", i)))
		rcText, err := os.ReadFile(filepath.Join(outDir, fmt.Sprintf("%d.rc", i)))
		if errors.Is(err, os.ErrNotExist) {
			if out != nil {
				t.Errorf("README line %d (%s): %s: did not end within %v; its output:\n%s", c.line, c.section, c.text, scriptTimeout, tail(out))
			}
			break // an earlier command failed, or this one never ended
		}
		require.NoError(t, err)
		rc, err := strconv.Atoi(strings.TrimSpace(string(rcText)))
		require.NoError(t, err)
		if rc != 0 {
			t.Errorf("README line %d (%s): %s\nexited %d; its output:\n%s", c.line, c.section, c.text, rc, tail(out))
			break
		}
		for _, e := range c.expect {
			assert.True(t, e.matches(string(out)), "README line %d: %s\nno longer shows its #> line %d %q; its output:\n%s",
				c.line, c.text, e.line, e.String(), tail(out))
		}
		t.Logf("README line %d: ok (%d #> lines): %s", c.line, len(c.expect), firstLine(c.text))
	}
}

// bareCommand is a command without its trailing comment and spaces.
func bareCommand(text string) string {
	if i := strings.Index(text, " #"); i >= 0 {
		text = text[:i]
	}
	return strings.TrimSpace(text)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// tail is the end of a command's output, enough to see why it failed.
func tail(out []byte) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > 40 {
		lines = append([]string{"[...]"}, lines[len(lines)-40:]...)
	}
	return strings.Join(lines, "\n")
}

// userEnv is this process's environment as a user's shell would have it:
// without the harness's CQLSEQ_* variables (CQLSEQ_CQL_HOSTS would select
// the CQL store where the README means the embedded one) and without the
// enclosing make's variables.
func userEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, "CQLSEQ_"):
		case name == "MAKEFLAGS", name == "MAKELEVEL", name == "MFLAGS", name == "MAKEOVERRIDES":
		default:
			env = append(env, kv)
		}
	}
	return env
}

// withBuf returns env with buf (the README's gRPC call) on its PATH: env
// itself when it has one, else env with the checkout's .cache/tools first,
// where make builds buf (the version make proto uses) if it is missing.
func withBuf(t *testing.T, root string, env []string) []string {
	t.Helper()
	var path string
	for _, kv := range env {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = p
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if fi, err := os.Stat(filepath.Join(dir, "buf")); err == nil && fi.Mode()&0o111 != 0 {
			return env
		}
	}
	tools := filepath.Join(root, ".cache", "tools")
	buf := filepath.Join(tools, "buf")
	if _, err := os.Stat(buf); err != nil {
		began := time.Now()
		cmd := exec.Command("make", "-C", root, buf)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "the README's gRPC call needs buf (README, Requirements): make %s:\n%s", buf, out)
		t.Logf("no buf on PATH: built %s in %v", buf, time.Since(began).Round(time.Second))
	}
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, "PATH=") {
			out = append(out, kv)
		}
	}
	return append(out, "PATH="+tools+string(os.PathListSeparator)+path)
}

// requestsVersion is the requests the test installs when the python3 on
// PATH lacks it.
const requestsVersion = "2.34.2"

// withRequests returns env with a python3 that imports requests first on
// its PATH: env itself when its python3 does, else env with a new virtual
// environment's bin directory (python3 -m venv, pip install requests; pip
// uses the user's index, as make cqlsh-venv does).
func withRequests(t *testing.T, env []string) []string {
	t.Helper()
	check := exec.Command("python3", "-c", "import requests")
	check.Env = env
	if check.Run() == nil {
		return env
	}
	venv := filepath.Join(t.TempDir(), "venv")
	bin := filepath.Join(venv, "bin")
	for _, args := range [][]string{
		{"python3", "-m", "venv", venv},
		{filepath.Join(bin, "pip"), "install", "-q", "requests==" + requestsVersion},
	} {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "the README's Python snippet needs requests, which the python3 on PATH lacks (README, Requirements): %s:\n%s",
			strings.Join(args, " "), out)
	}
	t.Logf("the python3 on PATH lacks requests: installed requests %s into %s, first on the README's PATH", requestsVersion, venv)
	out := make([]string, 0, len(env)+1)
	path := "PATH=" + bin
	for _, kv := range env {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			path += string(os.PathListSeparator) + p
			continue
		}
		out = append(out, kv)
	}
	return append(out, path)
}

// copyCheckout copies the checkout's files (tracked, and untracked ones git
// does not ignore: what a clone with these edits would hold) into a new
// directory, so the README's commands write their files there.
func copyCheckout(t *testing.T, root string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "cqlseq")
	ls := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	ls.Dir = root
	list, err := ls.Output()
	require.NoError(t, err, "git ls-files in %s", root)
	copied := 0
	for _, name := range strings.Split(strings.TrimRight(string(list), "\x00"), "\x00") {
		src := filepath.Join(root, name)
		fi, err := os.Lstat(src)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the working tree
		}
		require.NoError(t, err)
		if !fi.Mode().IsRegular() {
			continue
		}
		require.NoError(t, copyFile(src, filepath.Join(dst, name), fi.Mode().Perm()))
		copied++
	}
	t.Logf("the checkout copied to %s (%d files)", dst, copied)
	return dst
}

func copyFile(src, dst string, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
}
