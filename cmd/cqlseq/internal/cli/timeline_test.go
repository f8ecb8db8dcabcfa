package cli

import (
	"encoding/json"
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

var timelineT0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// svgTexts returns the texts of an SVG file's <text> elements.
func svgTexts(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []string
	for _, m := range regexp.MustCompile(`<text[^>]*>([^<]*)</text>`).FindAllStringSubmatch(string(b), -1) {
		out = append(out, m[1])
	}
	return out
}

// TestBenchTimelineAndPlot: bench --timeline and --plot write what the
// run did per interval and its picture; the timeline's acknowledged
// commands are the bench's; plot draws the file again, from JSON or CSV,
// with a fault window and a target.
func TestBenchTimelineAndPlot(t *testing.T) {
	dir := t.TempDir()
	tf, sf, rf := filepath.Join(dir, "t.json"), filepath.Join(dir, "t.svg"), filepath.Join(dir, "report.json")
	r := runCLI(t, "bench", "--store", "bbolt", "--dir", dir, "--duration", "2s", "--timeline", tf, "--plot", sf, "--json", rf)
	require.Equal(t, ExitOK, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	assert.Contains(t, r.stdout, "timeline       "+tf+": 3 intervals of 1s, ", "2 s of commands and the ones in flight then")
	assert.Contains(t, r.stdout, "plot           "+sf+": rate and latency over time")
	require.FileExists(t, tf)
	require.FileExists(t, sf)

	b, err := os.ReadFile(rf)
	require.NoError(t, err)
	var rep benchReport
	require.NoError(t, json.Unmarshal(b, &rep))
	tl, err := timeline.ReadFile(tf)
	require.NoError(t, err)
	acked, busy, failed := tl.Totals()
	assert.Equal(t, rep.Sequencer.Commands, acked, "the timeline's acknowledged commands are the bench's")
	assert.Equal(t, rep.Busy.Rejections, busy)
	assert.Zero(t, failed)
	require.Len(t, tl.Intervals, 3)
	assert.Positive(t, tl.Intervals[0].Acked)
	assert.Positive(t, tl.Intervals[0].P99)
	assert.Contains(t, tl.Title, "cqlseq bench: bbolt ")
	assert.Contains(t, tl.Title, "mode trust0, 4 partitions, 1 client per partition")

	texts := svgTexts(t, sf)
	for _, want := range []string{"time since start (s)", "rate (commands/s)", "latency (ms, log scale)", "acknowledged", "p50", "p99"} {
		assert.Contains(t, texts, want, "the bench's SVG")
	}

	// The same timeline as CSV, drawn again with a fault window and a
	// target.
	cf := filepath.Join(dir, "t.csv")
	require.NoError(t, tl.WriteFile(cf))
	for _, in := range []string{tf, cf} {
		out := filepath.Join(dir, "redrawn"+filepath.Ext(in)+".svg")
		p := runCLI(t, "plot", "--timeline", in, "--out", out, "--region", "0.5:1.5:node 3 paused", "--region", "1s:2s:cut: 1 and 2",
			"--target", "100:target 0.5 x rate before", "--title", "redrawn", "--width", "900", "--height", "500")
		require.Equal(t, ExitOK, p.code, "stdout:\n%s\nstderr:\n%s", p.stdout, p.stderr)
		// The duration is rounded to the millisecond: a run that ended
		// within half a millisecond of 2 s prints "2s".
		assert.Regexp(t, `^plot .*: 3 intervals of 1s \(2(\.\d+)?s\), [\d,]+ acknowledged, 2 regions shaded\n$`, p.stdout)
		texts := svgTexts(t, out)
		for _, want := range []string{"redrawn", "time since start (s)", "rate (commands/s)", "latency (ms, log scale)", "node 3 paused",
			"cut: 1 and 2", "target 0.5 x rate before"} {
			assert.Contains(t, texts, want, "%s redrawn", in)
		}
		b, err := os.ReadFile(out)
		require.NoError(t, err)
		assert.Contains(t, string(b), `width="900pt" height="500pt"`)
	}
}

// TestBenchTimelineFlagsCheckedBeforeTheRun: a bad extension is a usage
// error (exit 2), a file that cannot be written fails before the store is
// opened (exit 1), and a file created by the check alone is removed.
func TestBenchTimelineFlagsCheckedBeforeTheRun(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		werr string
	}{
		{[]string{"--timeline", filepath.Join(dir, "t.txt")}, `--timeline "` + filepath.Join(dir, "t.txt") + `": want a file name ending in .json or .csv`},
		{[]string{"--plot", filepath.Join(dir, "t.png")}, "--plot"},
		{[]string{"--timeline", filepath.Join(dir, "t.json"), "--timeline-interval", "0s"}, "--timeline-interval 0s: want at least 10ms"},
	} {
		r := runCLI(t, append([]string{"bench", "--dir", dir, "--duration", "1s"}, c.args...)...)
		assert.Equal(t, ExitUsage, r.code, "%v: %s", c.args, r.stderr)
		assert.Contains(t, requireOneLine(t, r), c.werr)
	}

	missing := filepath.Join(dir, "no", "such", "dir")
	ok := filepath.Join(dir, "ok.json")
	r := runCLI(t, "bench", "--dir", dir, "--duration", "10s", "--timeline", ok, "--plot", filepath.Join(missing, "t.svg"))
	assert.Equal(t, ExitFailure, r.code)
	assert.Contains(t, requireOneLine(t, r), "--plot: open "+filepath.Join(missing, "t.svg")+": no such file or directory")
	assert.Empty(t, r.stdout, "nothing ran")
	assert.NoFileExists(t, filepath.Join(dir, boltFileName), "the store was not opened")
	assert.NoFileExists(t, ok, "the check leaves no file behind")

	// An existing file keeps its content until the run writes it.
	require.NoError(t, os.WriteFile(ok, []byte("old"), 0o644))
	r = runCLI(t, "bench", "--dir", dir, "--duration", "10s", "--timeline", ok, "--plot", filepath.Join(missing, "t.svg"))
	assert.Equal(t, ExitFailure, r.code)
	b, err := os.ReadFile(ok)
	require.NoError(t, err)
	assert.Equal(t, "old", string(b))
}

// TestPlotFlagsAndFiles: plot's usage errors exit 2, a file it cannot read
// as a timeline exits 1, naming it.
func TestPlotFlagsAndFiles(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "t.json")
	require.NoError(t, (&timeline.Timeline{Start: timelineT0, Interval: time.Second}).WriteFile(good))
	out := filepath.Join(dir, "t.svg")
	for _, c := range []struct {
		args []string
		werr string
	}{
		{[]string{"--out", out}, "--timeline: required"},
		{[]string{"--timeline", good}, "--out: required"},
		{[]string{"--timeline", filepath.Join(dir, "t.txt"), "--out", out}, "want a file name ending in .json or .csv"},
		{[]string{"--timeline", good, "--out", filepath.Join(dir, "t.png")}, "want a file name ending in .svg"},
		{[]string{"--timeline", good, "--out", out, "--region", "5"}, `--region "5": want START:END:LABEL`},
		{[]string{"--timeline", good, "--out", out, "--region", "5:2:back"}, "want 0 <= START < END"},
		{[]string{"--timeline", good, "--out", out, "--region", "x:2:x"}, `"x": want seconds (12.5) or a duration (12.5s)`},
		{[]string{"--timeline", good, "--out", out, "--target", "fast:x"}, `--target "fast:x": want RATE:LABEL`},
		{[]string{"--timeline", good, "--out", out, "--target", "-1:x"}, "--target"},
		{[]string{"--timeline", good, "--out", out, "--width", "50"}, "--width 50 --height 540: want 100 to 100,000 points each"},
	} {
		r := runCLI(t, append([]string{"plot"}, c.args...)...)
		assert.Equal(t, ExitUsage, r.code, "%v: %s", c.args, r.stderr)
		assert.Contains(t, requireOneLine(t, r), c.werr, "%v", c.args)
	}

	r := runCLI(t, "plot", "--timeline", filepath.Join(dir, "missing.csv"), "--out", out)
	assert.Equal(t, ExitFailure, r.code)
	assert.Contains(t, requireOneLine(t, r), "no such file or directory")
	bad := filepath.Join(dir, "bad.csv")
	require.NoError(t, os.WriteFile(bad, []byte("start_s,acked\n0,1\n"), 0o644))
	r = runCLI(t, "plot", "--timeline", bad, "--out", out)
	assert.Equal(t, ExitFailure, r.code)
	assert.Contains(t, requireOneLine(t, r), "timeline: "+bad+": CSV: first line")
	assert.NoFileExists(t, out)

	// An empty timeline is drawn, saying so.
	r = runCLI(t, "plot", "--timeline", good, "--out", out)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Contains(t, svgTexts(t, out), "no samples")
}

// TestPlotAndBenchHelpSayWhatTheFilesHold: the help texts say what a
// timeline holds, its formats and that plot draws it again.
func TestPlotAndBenchHelpSayWhatTheFilesHold(t *testing.T) {
	glued := regexp.MustCompile(`([A-Za-z]+|\))\.[A-Z]`)
	for _, cmd := range []string{"plot", "bench"} {
		r := runCLI(t, cmd, "--help")
		require.Equal(t, ExitOK, r.code, r.stderr)
		for _, want := range []string{"commands\nacknowledged", "busy answers", "failed commands", "p50", "p99", ".json", ".csv",
			"start time (UTC)", "cqlseq plot draws it again", "--timeline"} {
			assert.Contains(t, r.stdout, want, "%s --help", cmd)
		}
	}
	r := runCLI(t, "plot", "--help")
	assert.Empty(t, glued.FindAllString(r.stdout, -1), "plot --help: a sentence glued to the next")
	for _, want := range []string{"--region", "START:END:LABEL", "--target", "RATE:LABEL", "--out", "log scale"} {
		assert.Contains(t, r.stdout, want)
	}
	r = runCLI(t, "bench", "--help")
	assert.Contains(t, r.stdout, "--plot FILE.svg draws it")
	assert.True(t, strings.Contains(r.stdout, "--timeline-interval"), r.stdout)
}
