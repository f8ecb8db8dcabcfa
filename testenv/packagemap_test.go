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

const module = "github.com/cqlseq/cqlseq"

// TestPackageMapIsTrue reads docs/design.md's package map and checks it
// against go list: every package of the module is in it, and imports only
// packages of its own row or of rows above it. Test-only packages (their
// names end in "test") are not checked as importers.
func TestPackageMapIsTrue(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the module")
	}
	b, err := os.ReadFile(filepath.Join("..", "docs", "design.md"))
	require.NoError(t, err)
	rows := packageMapRows(t, string(b))
	out, err := exec.Command("go", "list", "-C", "..", "-f", "{{.ImportPath}} {{.Name}} {{join .Imports \" \"}}", "./...").Output()
	require.NoError(t, err)
	var problems []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		p, name := strings.TrimPrefix(strings.TrimPrefix(f[0], module), "/"), f[1]
		row := rowOf(rows, p)
		if row < 0 {
			problems = append(problems, p+": not in the package map")
			continue
		}
		if strings.HasSuffix(name, "test") {
			continue
		}
		for _, imp := range f[2:] {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			q := strings.TrimPrefix(imp, module+"/")
			if r := rowOf(rows, q); r > row {
				problems = append(problems, p+" (row "+rows[row][0]+") imports "+q+", listed below it")
			}
		}
	}
	require.Empty(t, problems)
}

// packageMapRows returns the package paths of each row of the table under
// "## Package map", in order.
func packageMapRows(t *testing.T, doc string) [][]string {
	_, after, ok := strings.Cut(doc, "\n## Package map\n")
	require.True(t, ok, "docs/design.md has no Package map section")
	code := regexp.MustCompile("`([^`]+)`")
	var rows [][]string
	for _, l := range strings.Split(after, "\n") {
		if strings.HasPrefix(l, "## ") {
			break
		}
		if !strings.HasPrefix(l, "| `") {
			continue
		}
		first := strings.Split(l, "|")[1]
		var paths []string
		for _, m := range code.FindAllStringSubmatch(first, -1) {
			paths = append(paths, strings.TrimSuffix(strings.TrimSuffix(m[1], "/..."), "/"))
		}
		rows = append(rows, paths)
	}
	require.NotEmpty(t, rows)
	return rows
}

// rowOf returns the row whose path is the longest that is p or a parent
// of p, or -1.
func rowOf(rows [][]string, p string) int {
	best, n := -1, -1
	for i, r := range rows {
		for _, l := range r {
			if (p == l || strings.HasPrefix(p, l+"/")) && len(l) > n {
				best, n = i, len(l)
			}
		}
	}
	return best
}
