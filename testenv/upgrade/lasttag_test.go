package upgrade

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestHeadReadsAndWritesWhatTheLastTagWrote (issue 50): from the first
// release on, owners built from the last release tag reachable from HEAD
// and from this tree take turns on one bbolt file under load, in both
// directions: the tag's trust0 and fenced owners, this tree's fenced and
// trust2, the tag's fenced again (a rollback), this tree's trust0; verify
// --acks finds every acknowledged command, none twice. When the changelog's
// Unreleased "Layout" entries say a rollback is impossible ("no
// rollback"), the tag's owner after this tree's must instead be refused
// cleanly: exit 1, nothing acknowledged. Without a release tag the test is
// skipped, naming why.
func TestHeadReadsAndWritesWhatTheLastTagWrote(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the last release")
	}
	root := repoRoot(t)
	out, err := exec.Command("git", "-C", root, "describe", "--tags", "--abbrev=0", "--match", "v[0-9]*", "HEAD").CombinedOutput()
	if err != nil {
		t.Skipf("no release tag reachable from HEAD (CHANGELOG.md: none released yet): %s", strings.TrimSpace(string(out)))
	}
	tag := strings.TrimSpace(string(out))
	changelog, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	rollback := !strings.Contains(unreleasedLayout(string(changelog)), "no rollback")
	t.Logf("last release %s; the changelog allows a rollback to it: %v", tag, rollback)

	dir := t.TempDir()
	old := build(t, root, tag, filepath.Join(dir, "cqlseq-"+tag))
	head := build(t, root, "", filepath.Join(dir, "cqlseq-head"))
	store := []string{"--file", filepath.Join(dir, "cqlseq.db")}
	acks := filepath.Join(dir, "acks.log")
	bench := owner(store, acks)
	mustRun := func(who, bin, mode string) {
		t.Helper()
		before := lines(t, acks)
		if out, err := bench(bin, mode); err != nil {
			t.Fatalf("%s owner in %s: %v\n%s", who, mode, err, out)
		}
		n := lines(t, acks) - before
		if n == 0 {
			t.Fatalf("%s owner in %s acknowledged nothing", who, mode)
		}
		t.Logf("%s owner in %s: %d commands acknowledged", who, mode, n)
	}

	mustRun(tag+"'s", old, "trust0")
	mustRun(tag+"'s", old, "fenced")
	mustRun("this tree's", head, "fenced")
	mustRun("this tree's", head, "trust2")
	if rollback {
		mustRun(tag+"'s (rollback)", old, "fenced")
	} else {
		before := lines(t, acks)
		out, err := bench(old, "fenced")
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("the changelog says no rollback to %s, but its owner was not refused cleanly (exit 1): %v\n%s", tag, err, out)
		}
		if n := lines(t, acks) - before; n != 0 {
			t.Fatalf("the refused %s owner acknowledged %d commands", tag, n)
		}
		t.Logf("%s's owner after this tree's: refused, exit 1: %s", tag, lastLine(out))
	}
	mustRun("this tree's", head, "trust0")
	v, err := exec.Command(head, append(append([]string{"verify"}, store...), "--acks", acks)...).CombinedOutput()
	if err != nil {
		t.Fatalf("verify --acks: %v\n%s", err, v)
	}
	t.Logf("verify: %s", lastLine(string(v)))
}

// unreleasedLayout returns the "### Layout" entries of the changelog's
// Unreleased section ("" if none).
func unreleasedLayout(changelog string) string {
	_, rest, ok := strings.Cut(changelog, "## [Unreleased]")
	if !ok {
		return ""
	}
	if i := strings.Index(rest, "\n## ["); i >= 0 {
		rest = rest[:i]
	}
	_, layout, ok := strings.Cut(rest, "### Layout")
	if !ok {
		return ""
	}
	if i := strings.Index(layout, "\n### "); i >= 0 {
		layout = layout[:i]
	}
	return layout
}
