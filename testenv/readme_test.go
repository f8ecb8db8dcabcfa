package testenv

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestREADMESaysWhatMakeTestInstalls is issue 28's item 7: the README said
// make test never installs anything, while it creates .venv with cqlsh
// from PyPI and the launcher fetches Cassandra's jars on a first run.
func TestREADMESaysWhatMakeTestInstalls(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", name))
		require.NoError(t, err)
		return string(b)
	}
	mk, readme := read("Makefile"), read("README.md")
	require.Regexp(t, `(?m)^test-integration:.*\bcqlsh-venv\b`, mk, "the claim below follows the Makefile")
	require.Regexp(t, `(?m)^\$\(CQLSH\):[\s\S]*?pip install`, mk)
	assert.NotRegexp(t, regexp.MustCompile(`(?i)make test[^.]*(never installs|installs nothing)`), readme)
	assert.Contains(t, readme, "it creates `.venv` (cqlsh from PyPI)")
	assert.Contains(t, readme, "fetches Cassandra's jars")
}
