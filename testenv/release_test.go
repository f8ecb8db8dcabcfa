package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReleaseRefuses runs scripts/release.sh in a throwaway repository:
// each refusal that comes before the build, with its reason.
func TestReleaseRefuses(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	script, err := filepath.Abs(filepath.Join("..", "scripts", "release.sh"))
	require.NoError(t, err)
	dir := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	write := func(s string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "CHANGELOG.md"), []byte(s), 0o644))
	}
	release := func(args ...string) string {
		cmd := exec.Command("bash", append([]string{script}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.Error(t, err, "release.sh %v succeeded: %s", args, out)
		return string(out)
	}
	git("init", "-q")
	write("# Changelog\n\n## [Unreleased]\n\n- a thing\n")
	git("add", ".")
	git("commit", "-qm", "one")

	require.Contains(t, release("0.1.0"), "want vMAJOR.MINOR.PATCH")
	require.Contains(t, release("v0.1"), "want vMAJOR.MINOR.PATCH")
	require.Contains(t, release("v0.1.0"), "no '## [0.1.0] - YYYY-MM-DD' section")

	write("# Changelog\n\n## [0.1.0] - 2026-11-29\n\n- a thing\n\n## [Unreleased]\n")
	require.Contains(t, release("v0.1.0"), "the work tree has changes")
	git("commit", "-qam", "two")
	require.Contains(t, release("v0.1.0"), "'## [Unreleased]' must come before '## [0.1.0]'")

	write("# Changelog\n\n## [Unreleased]\n\n## [0.1.0] - 2026-11-29\n\nnothing listed\n")
	git("commit", "-qam", "three")
	require.Contains(t, release("v0.1.0"), "section has no entry")

	git("tag", "v0.1.0")
	require.Contains(t, release("v0.1.0"), "tag v0.1.0 exists already")
}

// TestChangelogKeepsAChangelog: CHANGELOG.md has the Unreleased section
// first and every release heading in the form make release checks.
func TestChangelogKeepsAChangelog(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "CHANGELOG.md"))
	require.NoError(t, err)
	var heads []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "## ") {
			heads = append(heads, l)
		}
	}
	require.NotEmpty(t, heads)
	require.Equal(t, "## [Unreleased]", heads[0])
	release := regexp.MustCompile(`^## \[\d+\.\d+\.\d+\] - \d{4}-\d{2}-\d{2}$`)
	for _, h := range heads[1:] {
		require.Regexp(t, release, h)
	}
	lic, err := os.ReadFile(filepath.Join("..", "LICENSE"))
	require.NoError(t, err)
	require.Contains(t, string(lic), "Apache License\n                           Version 2.0, January 2004")
}
