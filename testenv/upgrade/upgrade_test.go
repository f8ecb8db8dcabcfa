// Package upgrade tests upgrades and rollbacks of cqlseq between the
// layouts it has written: owners built from an older commit and from this
// tree take turns on one store under load (cqlseq bench with --ack-log),
// and verify --acks judges every acknowledgement at the end.
package upgrade

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// preRanges is the last commit before version ranges (75a32f5): its epoch
// row is 8 bytes; the first open by a later version converts it to 16,
// after which this version refuses to open the partition.
const preRanges = "e3a5ec258a0de8a73774865c2f59e3429b7f0c3b"

// TestUpgradeFromBeforeVersionRangesAndRollback: owners of the older
// layout (preRanges) run in trust0 and fenced; this tree's owners take
// over (converting the epoch rows); an owner of the older layout is then
// refused cleanly (exit 1, the row's size named, nothing acknowledged);
// this tree's owners go on in every mode; verify --acks finds every
// acknowledged command, none twice. On a bbolt file, and on a CQL
// keyspace when CQLSEQ_CQL_HOSTS names a cluster (the keyspace is created
// by the older version's migrate).
func TestUpgradeFromBeforeVersionRangesAndRollback(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an older cqlseq")
	}
	root := repoRoot(t)
	if err := exec.Command("git", "-C", root, "cat-file", "-e", preRanges+"^{commit}").Run(); err != nil {
		t.Skipf("the repository has no commit %s (a shallow clone?): %v", preRanges, err)
	}
	dir := t.TempDir()
	old := build(t, root, preRanges, filepath.Join(dir, "cqlseq-old"))
	head := build(t, root, "", filepath.Join(dir, "cqlseq-head"))
	t.Run("bbolt", func(t *testing.T) {
		upgradeAndRollback(t, old, head, []string{"--file", filepath.Join(t.TempDir(), "cqlseq.db")})
	})
	t.Run("cql", func(t *testing.T) {
		hosts := os.Getenv("CQLSEQ_CQL_HOSTS")
		if hosts == "" {
			t.Skip("CQLSEQ_CQL_HOSTS is not set")
		}
		store := []string{"--store", "cql", "--hosts", hosts, "--keyspace", fmt.Sprintf("upgrade_%d", time.Now().UnixNano())}
		if b, err := exec.Command(old, append([]string{"migrate"}, store[2:]...)...).CombinedOutput(); err != nil {
			t.Fatalf("the older version's migrate: %v\n%s", err, b)
		}
		upgradeAndRollback(t, old, head, store)
	})
}

// upgradeAndRollback runs the owners of TestUpgradeFromBeforeVersionRanges
// AndRollback on the store that the bench and verify flags store name.
func upgradeAndRollback(t *testing.T, old, head string, store []string) {
	acks := filepath.Join(t.TempDir(), "acks.log")
	bench := owner(store, acks)
	mustRun := func(who, bin, mode string) {
		t.Helper()
		before := lines(t, acks)
		if out, err := bench(bin, mode); err != nil {
			t.Fatalf("%s owner in %s: %v\n%s", who, mode, err, out)
		}
		t.Logf("%s owner in %s: %d commands acknowledged", who, mode, lines(t, acks)-before)
	}

	mustRun("older", old, "trust0")
	mustRun("older", old, "fenced")
	mustRun("this tree's", head, "fenced")

	// The rollback: an owner of the older layout is refused.
	before := lines(t, acks)
	out, err := bench(old, "fenced")
	var ee *exec.ExitError
	if err == nil {
		t.Fatalf("the older layout's owner ran after this tree's (the rollback was not refused):\n%s", out)
	}
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(out, "value is 16 bytes, want 8") {
		t.Fatalf("the rollback was refused, but not cleanly (want exit 1 naming the epoch row's size): %v\n%s", err, out)
	}
	if n := lines(t, acks) - before; n != 0 {
		t.Fatalf("the refused owner acknowledged %d commands", n)
	}
	t.Logf("older owner after this tree's: refused, exit 1: %s", lastLine(out))

	for _, mode := range []string{"trust0", "trust1", "trust2", "fenced", "trust0"} {
		mustRun("this tree's", head, mode)
	}
	v, err := exec.Command(head, append(append([]string{"verify"}, store...), "--acks", acks)...).CombinedOutput()
	if err != nil {
		t.Fatalf("verify --acks: %v\n%s", err, v)
	}
	t.Logf("verify: %s", lastLine(string(v)))
}

// owner returns a runner of one owner: cqlseq bench of bin in mode for 1 s
// on store, appending its acknowledgements to acks; it returns bench's
// stderr and its error.
func owner(store []string, acks string) func(bin, mode string) (string, error) {
	return func(bin, mode string) (string, error) {
		args := append(append([]string{"bench"}, store...), "--mode", mode, "--duration", "1s", "--partitions", "2",
			"--workspaces", "50", "--concurrency", "4", "--ack-log", acks)
		cmd := exec.Command(bin, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		return stderr.String(), err
	}
}

func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not in a git work tree: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// build builds cmd/cqlseq of commit (a worktree of it; "" is the work
// tree itself) into out.
func build(t *testing.T, root, commit, out string) string {
	t.Helper()
	src := root
	if commit != "" {
		src = filepath.Join(t.TempDir(), "src")
		if b, err := exec.Command("git", "-C", root, "worktree", "add", "--detach", src, commit).CombinedOutput(); err != nil {
			t.Fatalf("git worktree add %s: %v\n%s", commit, err, b)
		}
		t.Cleanup(func() { _ = exec.Command("git", "-C", root, "worktree", "remove", "--force", src).Run() })
	}
	cmd := exec.Command("go", "build", "-o", out, "./cmd/cqlseq")
	cmd.Dir = src
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building cqlseq at %q: %v\n%s", commit, err, b)
	}
	return out
}

// lines counts the acknowledgements of an ack log (its lines that are not
// comments); 0 if it does not exist yet.
func lines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			n++
		}
	}
	return n
}

func lastLine(s string) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	return ls[len(ls)-1]
}
