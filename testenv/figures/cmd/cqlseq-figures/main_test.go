package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBenchMetricTakesTheNamedBenchmarksUnit(t *testing.T) {
	out := []byte(`goos: linux
BenchmarkSequencer/workspaces=1-2         	 6207012	       181.0 ns/op	         0 reads/op	       0 B/op	       0 allocs/op
BenchmarkSequencer/workspaces=10000-2     	 1000000	      1020 ns/op
BenchmarkRecovery/unflushed=1000000/workspaces=10000-2 	       4	 290000000 ns/op	 283000000 ns/recovery
BenchmarkSequencer/workspaces=1-2         	 6207012	       179.0 ns/op	         0 reads/op
`)
	assert.Equal(t, []float64{181, 179}, benchMetric(out, "BenchmarkSequencer/workspaces=1-", "ns/op"))
	assert.Equal(t, []float64{283000000}, benchMetric(out, "BenchmarkRecovery/unflushed=", "ns/recovery"))
	assert.Empty(t, benchMetric(out, "BenchmarkCacheHeap", "ns/op"))
}

func TestRecoveryAndGrayLinesParse(t *testing.T) {
	medians := "cqlseq   open       this build   wall   2.61 s  peak RSS   19 MiB\nvoedger  actualize  after        wall   3.50 s  peak RSS   98 MiB\n"
	m := recoveryMedian.FindAllStringSubmatch(medians, -1)
	assert.Equal(t, [][]string{
		{"cqlseq   open       this build   wall   2.61 s", "cqlseq", "open", "2.61"},
		{"voedger  actualize  after        wall   3.50 s", "voedger", "actualize", "3.50"},
	}, m)
	g := grayRatio.FindStringSubmatch("gray-check fenced: 522.3 acks/s in the 10s before, 808.5 acks/s during the 10.0 s pause of node 2: ratio 1.55 (need >= 0.2): ok; verify: 0 lost")
	assert.Equal(t, "1.55", g[1])
}

func TestShellLineQuotesWhatTheShellWouldInterpret(t *testing.T) {
	assert.Equal(t, `go test -run '^$' -bench 'A/b=1$|C' ./x/`, shellLine("go", []string{"test", "-run", "^$", "-bench", "A/b=1$|C", "./x/"}))
	assert.Equal(t, `x --r "{'a': 1}"`, shellLine("x", []string{"--r", "{'a': 1}"}))
	assert.Equal(t, `x '$'\''a'`, shellLine("x", []string{"$'a"}))
}

func TestMedianAndCommas(t *testing.T) {
	assert.Equal(t, 2.0, median([]float64{3, 1, 2}))
	assert.Equal(t, 2.5, median([]float64{4, 1, 2, 3}))
	assert.Equal(t, "16,450", commas(16449.6))
	assert.Equal(t, "950", commas(950))
	assert.Equal(t, "1,000,000", commas(1e6))
}

// TestTheREADMEsTableIsMakeFigures is issue 28's item 5: the README's
// figures came from commands that measured something else. Each row of
// its Figures table is a row make figures prints, in the same order with
// the same case and command; only the figures differ between runs.
func TestTheREADMEsTableIsMakeFigures(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "README.md"))
	require.NoError(t, err)
	_, figures, ok := strings.Cut(string(b), "\n## Figures\n")
	require.True(t, ok, "the README has a Figures section")
	figures, _, _ = strings.Cut(figures, "\n## ")
	_, table, ok := strings.Cut(figures, "| case | figure | command |\n|---|---|---|\n")
	require.True(t, ok, "the Figures section has make figures' table")
	var readme []string
	lines := strings.Split(table, "\n")
	for _, line := range lines {
		if !strings.HasPrefix(line, "| ") {
			break
		}
		readme = append(readme, line)
	}
	if len(readme) < len(lines) {
		assert.Empty(t, lines[len(readme)], "a blank line ends the table, nothing pasted under it")
	}
	want := plan(defaults)
	require.Len(t, readme, len(want), "rows:\n%s", strings.Join(readme, "\n"))
	figure := regexp.MustCompile(`^\| (.*) \| (.*) \| (.*) \|$`)
	for i, line := range readme {
		m := figure.FindStringSubmatch(line)
		require.NotNil(t, m, line)
		w := want[i]
		w.figure = m[2]
		assert.Equal(t, w.markdown(), line, "README row %d", i+1)
	}
}
