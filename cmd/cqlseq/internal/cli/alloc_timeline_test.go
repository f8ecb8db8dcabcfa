package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/internal/lab/chart"
	"github.com/cqlseq/cqlseq/internal/lab/timeline"
)

// readAllocReport reads the report alloc --json wrote into path.
func readAllocReport(t *testing.T, path string) allocReport {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var rep allocReport
	require.NoError(t, json.Unmarshal(b, &rep))
	return rep
}

// TestAllocTimeline: alloc --timeline records every Next of every
// goroutine of every process: the timeline's acknowledged commands are
// the IDs the report says were handed out, none failed or busy, and the
// latencies are there.
func TestAllocTimeline(t *testing.T) {
	dir := t.TempDir()
	tf, rf := filepath.Join(dir, "x.json"), filepath.Join(dir, "report.json")
	r := runCLI(t, "alloc", "--dir", dir, "--name", "orders", "--ids", "30000", "--chunk", "1000", "--procs", "3", "--goroutines", "4",
		"--timeline", tf, "--timeline-interval", "50ms", "--json", rf)
	require.Equal(t, ExitOK, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	assert.Regexp(t, `\ntimeline       `+tf+`: \d+ intervals? of 50ms, 30,000 acknowledged, 0 busy, 0 failed\n`, r.stdout)

	rep := readAllocReport(t, rf)
	require.Equal(t, uint64(30000), rep.IDs)
	tl, err := timeline.ReadFile(tf)
	require.NoError(t, err)
	acked, busy, failed := tl.Totals()
	assert.Equal(t, rep.IDs, acked, "each ID handed out is one acknowledged command")
	assert.Zero(t, busy)
	assert.Zero(t, failed)
	assert.Equal(t, 50*time.Millisecond, tl.Interval)
	require.NotEmpty(t, tl.Intervals)
	assert.Positive(t, tl.Intervals[0].Acked)
	assert.Positive(t, tl.Intervals[0].Max, "the Next calls' latency")
	assert.Equal(t, `cqlseq alloc: bbolt `+filepath.Join(dir, boltFileName)+`, sequence "orders" (bigint, chunk 1,000), 3 processes x 4 goroutines`, tl.Title)
	assert.WithinDuration(t, time.Now(), tl.Start.Add(tl.Duration()), time.Minute)
}

// TestAllocSpawnedTimelinesMerged: with --spawn each child process records
// its own timeline into the file its hidden --child-timeline names, and the
// parent merges them. Spawning needs CQL (a bbolt file admits one process
// at a time), so the children run here one after the other, in-process, on
// one bbolt file, with the arguments spawnAlloc gives them
// (allocChildArgs); the parent's reading and merging is spawnAlloc's own.
// The merged timeline's acknowledged commands are the IDs the merged
// report counts.
func TestAllocSpawnedTimelinesMerged(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	const procs = 2
	fs := newAllocCmd(&env{}).Flags()
	require.NoError(t, fs.Parse([]string{"--dir", dir, "--name", "spawned", "--ids", "20001", "--chunk", "1000",
		"--procs", strconv.Itoa(procs), "--goroutines", "3", "--timeline", filepath.Join(dir, "parent.json"),
		"--plot", filepath.Join(dir, "parent.svg"), "--timeline-interval", "20ms", "--json", filepath.Join(dir, "report.json")}))
	startAt := time.Now().UnixMilli()
	for p := range procs {
		args := allocChildArgs("error", fs, out, p, startAt, true)
		assert.Contains(t, args, "--timeline-interval=20ms")
		for _, a := range args {
			for _, parents := range []string{"--timeline=", "--plot=", "--json="} {
				assert.NotContains(t, a, parents, "the parent's")
			}
		}
		assert.Equal(t, []string{"--child-timeline", childTimelineFile(out, p)}, args[len(args)-2:])
		r := runCLI(t, args...)
		require.Equal(t, ExitOK, r.code, "child %d: %v\nstdout:\n%s\nstderr:\n%s", p, args, r.stdout, r.stderr)
		assert.Empty(t, r.stdout, "a child writes files only")
		require.FileExists(t, childTimelineFile(out, p))
	}
	assert.NotContains(t, allocChildArgs("error", fs, out, 0, startAt, false), "--child-timeline", "no timeline wanted")

	results, err := readChildResults(out, procs)
	require.NoError(t, err)
	tl, err := mergeChildTimelines(out, make([]bool, procs), "merged")
	require.NoError(t, err)
	f := &allocFlags{name: "spawned", typ: "bigint", chunk: 1000, start: 1, step: 1, procs: procs, goroutines: 3, spawn: true}
	rep := mergeAlloc(f, "bbolt", results, time.Second)
	require.Equal(t, uint64(20001), rep.IDs)
	require.True(t, rep.Unique)

	require.NoError(t, tl.Validate())
	acked, busy, failed := tl.Totals()
	assert.Equal(t, rep.IDs, acked, "each ID handed out by either child is one acknowledged command")
	assert.Zero(t, busy)
	assert.Zero(t, failed)
	assert.Equal(t, "merged", tl.Title)
	assert.Equal(t, 20*time.Millisecond, tl.Interval, "the children's --timeline-interval")
	assert.Equal(t, time.UnixMilli(startAt).UTC(), tl.Start, "every child's timeline starts at --child-start")
	for p := range procs {
		one, err := timeline.ReadFile(childTimelineFile(out, p))
		require.NoError(t, err)
		a, _, _ := one.Totals()
		assert.Equal(t, results[p].IDs, a, "child %d's own timeline", p)
	}

	// A child that failed before writing its timeline is skipped; one that
	// did not fail must have written one.
	require.NoError(t, os.Remove(childTimelineFile(out, 1)))
	tl, err = mergeChildTimelines(out, []bool{false, true}, "merged")
	require.NoError(t, err)
	acked, _, _ = tl.Totals()
	assert.Equal(t, results[0].IDs, acked)
	_, err = mergeChildTimelines(out, make([]bool, procs), "merged")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "child 1's timeline: ")
}

// TestAllocPlot: alloc --plot draws the run's rate and latency into an
// SVG, and says how to draw it again.
func TestAllocPlot(t *testing.T) {
	dir := t.TempDir()
	sf := filepath.Join(dir, "x.svg")
	// 200,000 IDs take about 100 ms here: several intervals of 10 ms,
	// drawn as lines.
	r := runCLI(t, "alloc", "--dir", dir, "--ids", "200000", "--chunk", "1000", "--procs", "2", "--goroutines", "2",
		"--plot", sf, "--timeline-interval", "10ms")
	require.Equal(t, ExitOK, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	assert.Contains(t, r.stdout, "\nplot           "+sf+": rate and latency over time (record it with --timeline FILE to draw it again)\n")
	assert.NotContains(t, r.stdout, "\ntimeline ", "no --timeline")
	texts := svgTexts(t, sf)
	for _, want := range []string{"rate (commands/s)", "latency (ms, log scale)", "acknowledged", "p99"} {
		assert.Contains(t, texts, want)
	}
	assert.NotContains(t, texts, chart.NoSamples)
}

// TestAllocTimelineFlagsCheckedBeforeTheRun: a bad extension is a usage
// error naming the flag; a file that cannot be written fails before the
// store is opened.
func TestAllocTimelineFlagsCheckedBeforeTheRun(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		werr string
	}{
		{[]string{"--timeline", filepath.Join(dir, "x.txt")}, `--timeline "` + filepath.Join(dir, "x.txt") + `": want a file name ending in .json or .csv`},
		{[]string{"--plot", filepath.Join(dir, "x.png")}, `--plot "` + filepath.Join(dir, "x.png") + `": want a file name ending in .svg`},
		{[]string{"--timeline", filepath.Join(dir, "x.csv"), "--timeline-interval", "1ms"}, "--timeline-interval 1ms: want at least 10ms"},
	} {
		r := runCLI(t, append([]string{"alloc", "--dir", dir, "--ids", "1000"}, c.args...)...)
		assert.Equal(t, ExitUsage, r.code, "%v: %s", c.args, r.stderr)
		assert.Contains(t, requireOneLine(t, r), c.werr)
		assert.Empty(t, r.stdout, "nothing ran")
	}

	missing := filepath.Join(dir, "no", "such", "dir", "x.json")
	r := runCLI(t, "alloc", "--dir", dir, "--ids", "1000", "--timeline", missing)
	assert.Equal(t, ExitFailure, r.code)
	assert.Contains(t, requireOneLine(t, r), "--timeline: open "+missing+": no such file or directory")
	assert.Empty(t, r.stdout, "nothing ran")
	assert.NoFileExists(t, filepath.Join(dir, boltFileName), "the store was not opened")
}

// TestAllocTimelineOfAFailedRun: a run that fails (the sequence is
// exhausted) reports nothing but still writes its timeline: the IDs handed
// out before, and the failed Next.
func TestAllocTimelineOfAFailedRun(t *testing.T) {
	dir := t.TempDir()
	tf := filepath.Join(dir, "x.csv")
	r := runCLI(t, "alloc", "--dir", dir, "--type", "smallint", "--start", "32000", "--chunk", "100", "--ids", "1000",
		"--procs", "1", "--goroutines", "1", "--timeline", tf)
	assert.Equal(t, ExitFailure, r.code)
	assert.Contains(t, requireOneLine(t, r), "exhausted")
	tl, err := timeline.ReadFile(tf)
	require.NoError(t, err)
	acked, busy, failed := tl.Totals()
	assert.Equal(t, uint64(32767-32000+1), acked, "every smallint from 32000 was handed out")
	assert.Zero(t, busy)
	assert.Equal(t, uint64(1), failed, "the one goroutine's Next that failed")
	assert.Contains(t, r.stdout, "timeline       "+tf+": ")
}

// TestAllocHelpSaysWhatTheTimelineHolds: alloc's help says what its
// --timeline holds and what an event is there.
func TestAllocHelpSaysWhatTheTimelineHolds(t *testing.T) {
	r := runCLI(t, "alloc", "--help")
	require.Equal(t, ExitOK, r.code, r.stderr)
	for _, want := range []string{timelineHelp, "Each ID handed out (one Next call) counts as one acknowledged command",
		"a failed Next as one failed command", "--plot FILE.svg draws it", "--timeline-interval"} {
		assert.Contains(t, r.stdout, want)
	}
	assert.NotContains(t, r.stdout, "child-timeline", "hidden")
}
