package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/internal/lab/timeline"
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

func TestRecoveryLinesParse(t *testing.T) {
	medians := "cqlseq   open       this build   wall   2.61 s  peak RSS   19 MiB\nvoedger  actualize  after        wall   3.50 s  peak RSS   98 MiB\n"
	m := recoveryMedian.FindAllStringSubmatch(medians, -1)
	assert.Equal(t, [][]string{
		{"cqlseq   open       this build   wall   2.61 s", "cqlseq", "open", "2.61"},
		{"voedger  actualize  after        wall   3.50 s", "voedger", "actualize", "3.50"},
	}, m)
}

// TestPauseRatesCountWholeIntervalsOnly: an interval that straddles the
// pause's start or end counts in no span; the p99 is the largest of the
// intervals during the pause.
func TestPauseRatesCountWholeIntervalsOnly(t *testing.T) {
	tl := &timeline.Timeline{Interval: time.Second}
	for i, acked := range []uint64{900, 1000, 1000, 700, 200, 300, 650, 1100, 1100} {
		tl.Intervals = append(tl.Intervals, timeline.Interval{
			Start: time.Duration(i) * time.Second, Length: time.Second, Acked: acked, P99: time.Duration(i+1) * 10 * time.Millisecond})
	}
	// Paused from 3.5 s to 6.2 s: before 0-3 s, during 4-6 s, after 7-9 s.
	got := pauseRates(tl, 3500*time.Millisecond, 6200*time.Millisecond)
	assert.Equal(t, "967 / 250 / 1,100 commands/s (during over before 0.26), p99 up to 60 ms during", got)
	assert.Equal(t, "772 / 0 / 0 commands/s (during over before 0.00), p99 up to 0 ms during", pauseRates(tl, 9*time.Second, 9*time.Second),
		"a pause after the run: nothing during or after")
	assert.Equal(t, "0 / 0 / 0 commands/s (during over before -), p99 up to 0 ms during", pauseRates(&timeline.Timeline{}, 0, time.Second))
}

func TestServiceFigureReadsBenchServiceTables(t *testing.T) {
	out := []byte(`1. Max rate (-rate=0, 10s a run; workers: the best of a 3s sweep of 16 32 64)
| target                                           | workers |      req/s |     p99 µs | x trivial | target |
|--------------------------------------------------|---------|------------|-------------|----------|--------|
| trivial net/http handler                         |      32 |      14920 |        6353 |     1.00 | -      |
| galloc POST /v1/sequences/{name}/next            |      16 |      14861 |        4106 |     1.00 | met    |
2. Fixed rate 7460 req/s (half the trivial handler's max), 10s a run
| galloc POST /v1/sequences/{name}/next            |       7459 |      112679 |     0.18 | met    | 112679 5379499 2702      |
3. Batches of 1000 IDs a request (-rate=0, 5s a run)
| galloc POST /v1/sequences/{name}/next?count=1000 |      16 |      8547600 | MISSED |
| timeshard POST /v1/timeshard/63/next?count=1000  |      32 |      3166664 | 0.77 x ceiling |
`)
	got, err := serviceFigure(out)
	require.NoError(t, err)
	assert.Equal(t, []measured{{figure: "14,861 req/s (1.00 x), 8.5 M IDs/s (medians of 3)"}}, got)
	_, err = serviceFigure(out[:strings.Index(string(out), "3. Batches")])
	assert.ErrorContains(t, err, "no galloc max rate or batch figure")
}

func TestShellLineQuotesWhatTheShellWouldInterpret(t *testing.T) {
	assert.Equal(t, `go test -run '^$' -bench 'A/b=1$|C' ./x/`, shellLine("go", []string{"test", "-run", "^$", "-bench", "A/b=1$|C", "./x/"}))
	assert.Equal(t, `x --r "{'a': 1}"`, shellLine("x", []string{"--r", "{'a': 1}"}))
	assert.Equal(t, `x '$'\''a'`, shellLine("x", []string{"$'a"}))
}

func TestCommas(t *testing.T) {
	assert.Equal(t, "16,450", commas(16449.6))
	assert.Equal(t, "950", commas(950))
	assert.Equal(t, "1,000,000", commas(1e6))
}

// root is the repository's root, from this package's directory.
var root = filepath.Join("..", "..", "..", "..")

// section returns the text under the heading line (with its "#"s) in
// the file name of the repository, up to the next heading of that level or
// above.
func section(t *testing.T, name, heading string) string {
	b, err := os.ReadFile(filepath.Join(root, name))
	require.NoError(t, err)
	_, text, ok := strings.Cut(string(b), "\n"+heading+"\n")
	require.True(t, ok, "%s has a section %q", name, heading)
	level := strings.IndexByte(heading, ' ')
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if n := len(l) - len(strings.TrimLeft(l, "#")); n > 0 && n <= level && strings.HasPrefix(l[n:], " ") {
			return strings.Join(lines[:i], "\n")
		}
	}
	return text
}

// currentTable returns the rows of make figures' table in docs/benchmarks.md's
// "The current table", each as its four cells, checking that a blank line
// ends it.
func currentTable(t *testing.T) (lines []string, cells [][]string) {
	text := section(t, "docs/benchmarks.md", "### The current table")
	_, table, ok := strings.Cut(text, tableHeader+"\n")
	require.True(t, ok, "The current table has make figures' table")
	all := strings.Split(table, "\n")
	for _, line := range all {
		if !strings.HasPrefix(line, "| ") {
			break
		}
		lines = append(lines, line)
	}
	if len(lines) < len(all) {
		assert.Empty(t, all[len(lines)], "a blank line ends the table, nothing pasted under it")
	}
	figure := regexp.MustCompile(`^\| (.*) \| (.*) \| (.*) \| (.*) \|$`)
	for _, line := range lines {
		m := figure.FindStringSubmatch(line)
		require.NotNil(t, m, line)
		cells = append(cells, m[1:])
	}
	return lines, cells
}

// TestTheCurrentTableIsMakeFigures is issue 28's item 5: the README's
// figures came from commands that measured something else. Each row of
// the table the README's figures come from (docs/benchmarks.md, The
// current table) is a row make figures prints, in the same order with the
// same case and command; only the figures and costs differ between runs.
func TestTheCurrentTableIsMakeFigures(t *testing.T) {
	lines, cells := currentTable(t)
	want := plan(defaults)
	require.Len(t, lines, len(want), "rows:\n%s", strings.Join(lines, "\n"))
	for i, line := range lines {
		w := want[i]
		w.figure, w.cost = cells[i][1], cells[i][2]
		assert.Equal(t, w.markdown(), line, "docs/benchmarks.md, The current table, row %d", i+1)
	}
}

// TestTheREADMEsFiguresAreTheCurrentTables: the README's Figures section
// lists one figure per headline case, the list make figures prints: each
// row of the current table, in order, as its case and figure, the same
// figure as the table's.
func TestTheREADMEsFiguresAreTheCurrentTables(t *testing.T) {
	_, cells := currentTable(t)
	text := section(t, "README.md", "## Figures")
	var items []string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "- ") {
			items = append(items, line)
		}
	}
	want := plan(defaults)
	require.Len(t, items, len(want), "items:\n%s", strings.Join(items, "\n"))
	for i, item := range items {
		w := want[i]
		w.figure = cells[i][1]
		assert.Equal(t, w.headline(), item, "README, Figures, item %d", i+1)
	}
	assert.Contains(t, text, "docs/benchmarks.md#the-current-table", "the README links the full table")
}
