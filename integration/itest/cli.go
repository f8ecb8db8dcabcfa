package itest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// CLITimeout bounds one run of the binary (ExecCLI, RunCLI): a run it ends
// fails the test.
const CLITimeout = 5 * time.Minute

// cli is the binary CLI builds once per test binary.
var cli struct {
	once sync.Once
	dir  string // removed by removeCLI
	bin  string
	err  error
}

// CLI returns the path of the cqlseq binary built from this checkout's
// cmd/cqlseq. The first call of a test binary builds it; every later call,
// from any test, returns the same binary (or fails with the same build
// error). Main or MainLocal removes it when the tests have run.
func CLI(tb testing.TB) string {
	tb.Helper()
	cli.once.Do(func() { cli.dir, cli.bin, cli.err = buildCLI() })
	if cli.err != nil {
		tb.Fatal(cli.err)
	}
	return cli.bin
}

// buildCLI builds cmd/cqlseq into a new temporary directory.
func buildCLI() (dir, bin string, err error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", "", fmt.Errorf("the go tool builds the binary under test: %w", err)
	}
	// The test packages of this module are one level below it, which is
	// one level below the checkout's root.
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return "", "", err
	}
	if dir, err = os.MkdirTemp("", "cqlseq-itest-"); err != nil {
		return "", "", err
	}
	bin = filepath.Join(dir, "cqlseq")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, "build", "-o", bin, "./cmd/cqlseq")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return dir, "", fmt.Errorf("go build ./cmd/cqlseq: %w: %s", err, out)
	}
	return dir, bin, nil
}

// removeCLI removes the binary CLI built, if it built one.
func removeCLI() {
	if cli.dir != "" {
		_ = os.RemoveAll(cli.dir)
	}
}

// MainLocal runs m without the shared test cluster, for a package that
// starts its own nodes, and removes what the harness built for it (CLI).
// It returns the exit code:
//
//	func TestMain(m *testing.M) { os.Exit(itest.MainLocal(m)) }
func MainLocal(m *testing.M) int {
	defer removeCLI()
	return m.Run()
}

// CLIResult is the outcome of one run of the binary.
type CLIResult struct {
	Code           int // exit code
	Stdout, Stderr string
}

// Output returns stdout followed by stderr.
func (r CLIResult) Output() string { return r.Stdout + r.Stderr }

// ExecCLI runs the binary (CLI) with args and returns its exit code and
// output; it logs nothing. A run that cannot start, or that CLITimeout
// ends, fails tb; the failure names the first of args only (the others
// may hold secrets).
func ExecCLI(tb testing.TB, args ...string) CLIResult {
	tb.Helper()
	bin := CLI(tb)
	ctx, cancel := context.WithTimeout(context.Background(), CLITimeout)
	defer cancel()
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	name := "cqlseq"
	if len(args) > 0 {
		name += " " + args[0]
	}
	if ctx.Err() != nil {
		tb.Fatalf("%s: still running after %v", name, CLITimeout)
	}
	r := CLIResult{Stdout: out.String(), Stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.Code = ee.ExitCode()
	default:
		tb.Fatalf("running %s: %v", name, err)
	}
	return r
}

// RunCLI is ExecCLI that logs the command line, the exit code and the
// output.
func RunCLI(tb testing.TB, args ...string) CLIResult {
	tb.Helper()
	r := ExecCLI(tb, args...)
	tb.Logf("cqlseq %s -> %d\n%s%s", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
	return r
}
