package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHelpSaysWhatIsTrue is issue 28's items 6 and 8 on the help texts:
// verify --help called it safe on a store in use (a bbolt file a bench
// holds is locked); --mode never named fenced; a paragraph was glued to
// the previous sentence; --hosts showed two defaults; verify offered
// --no-sync.
func TestHelpSaysWhatIsTrue(t *testing.T) {
	t.Setenv("CQLSEQ_CQL_HOSTS", "10.0.0.1:9042") // the default in effect must not show as a second one
	// A sentence glued to the next: "ends.Next", but not an identifier
	// such as plog.Writer or sys.Corrupted.
	glued := regexp.MustCompile(`([A-Za-z]+|\))\.[A-Z]`)
	identifier := map[string]bool{"sys": true, "galloc": true, "plog": true, "schema": true, "apppart": true, "storage": true, "isequencer": true}
	help := map[string]string{}
	for _, cmd := range []string{"actualize", "alloc", "bench", "demo", "inspect", "migrate", "verify"} {
		r := runCLI(t, cmd, "--help")
		require.Equal(t, ExitOK, r.code, "%s --help: %s", cmd, r.stderr)
		help[cmd] = r.stdout
		for _, m := range glued.FindAllStringSubmatch(r.stdout, -1) {
			assert.True(t, identifier[m[1]], "%s --help: a sentence glued to the next: %q", cmd, m[0])
		}
		for _, line := range strings.Split(r.stdout, "\n") {
			if strings.Contains(line, "--hosts ") {
				assert.Equal(t, 1, strings.Count(line, "default"), "%s --help: one default for --hosts: %q", cmd, line)
				assert.NotContains(t, line, "10.0.0.1", "%s --help", cmd)
			}
		}
	}
	for _, cmd := range []string{"bench", "demo"} {
		assert.Regexp(t, `--mode .*fenced`, help[cmd], "%s --help names every mode", cmd)
	}
	for _, cmd := range []string{"verify", "inspect"} {
		assert.NotContains(t, help[cmd], "--no-sync", "%s only reads", cmd)
	}
	assert.Contains(t, help["verify"], "a bbolt file is locked by the process")
}

// TestErrorsPointAtSectionsThatExist is issue 28's item 8: an error sent
// the user to "the README, Partitions", which did not exist.
func TestErrorsPointAtSectionsThatExist(t *testing.T) {
	root := filepath.Join("..", "..", "..", "..")
	docs := map[string]string{}
	for _, name := range []string{"README.md", "docs/design.md"} {
		b, err := os.ReadFile(filepath.Join(root, name))
		require.NoError(t, err)
		docs[name] = string(b)
	}
	srcs, err := filepath.Glob("*.go")
	require.NoError(t, err)
	ref := regexp.MustCompile(`\((README|docs/design\.md), ([A-Z][A-Za-z ]+)\)`)
	found := 0
	for _, src := range srcs {
		if strings.HasSuffix(src, "_test.go") {
			continue
		}
		b, err := os.ReadFile(src)
		require.NoError(t, err)
		for _, m := range ref.FindAllStringSubmatch(string(b), -1) {
			doc := m[1]
			if doc == "README" {
				doc = "README.md"
			}
			found++
			assert.Regexp(t, `(?m)^##+ `+regexp.QuoteMeta(m[2]), docs[doc], "%s: %s names a section %s lacks", src, m[0], doc)
		}
	}
	assert.Positive(t, found, "the references this test checks")
}
