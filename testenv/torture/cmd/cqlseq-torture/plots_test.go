package main

import (
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/internal/lab/chart"
	"github.com/cqlseq/cqlseq/internal/lab/timeline"
	"github.com/cqlseq/cqlseq/testenv/torture"
)

// recordedPhase is a phase of 20 s: one child acknowledging 100 commands
// per 250 ms sample, a second from 10 s that was killed at 15 s (no
// timeline), and two faults: a 3 s cut at 5 s and a kill at 15 s.
func recordedPhase(t0 time.Time) (*phaseRecord, []childSeries) {
	var a, b []torture.Sample
	for i := 0; i <= 80; i++ {
		at := t0.Add(time.Duration(i) * torture.DefaultSampleInterval)
		a = append(a, torture.Sample{At: at, Acks: 100 * i})
		if i >= 40 && i <= 60 {
			b = append(b, torture.Sample{At: at, Acks: 50 * (i - 40)})
		}
	}
	pr := &phaseRecord{phase: "partition (fenced, 4x4)", windows: []window{
		{"node 3 cut", t0.Add(5 * time.Second), t0.Add(8 * time.Second)},
		{"kill fenced", t0.Add(15 * time.Second), t0.Add(15 * time.Second)},
	}, target: 200, targetLabel: "target during a fault: 0.5 x 400/s before"}
	return pr, []childSeries{{samples: a}, {samples: b}}
}

// TestPhaseTimelineFromAckLogSamples: the children's acknowledgements per
// interval are summed, a killed child's included (from its samples).
func TestPhaseTimelineFromAckLogSamples(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 22, 0, 0, 0, time.UTC)
	_, series := recordedPhase(t0)
	tl := phaseTimeline("x", series)
	require.NoError(t, tl.Validate())
	assert.Equal(t, t0, tl.Start)
	assert.Equal(t, 20*time.Second, tl.Duration())
	acked, _, _ := tl.Totals()
	assert.Equal(t, uint64(8000+1000), acked, "both children's acks")
	assert.Equal(t, uint64(100), tl.Intervals[0].Acked)
	assert.Equal(t, uint64(150), tl.Intervals[45].Acked, "both children at 11.25 s")

	empty := phaseTimeline("none", nil)
	require.NoError(t, empty.Validate())
	assert.Empty(t, empty.Intervals)
}

// TestPhaseTimelineLatencyFromChildTimelines: busy, failed and latency come
// from the timelines the children wrote.
func TestPhaseTimelineLatencyFromChildTimelines(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 22, 0, 0, 0, time.UTC)
	_, series := recordedPhase(t0)
	series[0].tl = &timeline.Timeline{Start: t0, Interval: 500 * time.Millisecond, Intervals: []timeline.Interval{
		{Start: 0, Length: 500 * time.Millisecond, Acked: 200, Busy: 3, P50: time.Millisecond, P99: 5 * time.Millisecond, Max: 9 * time.Millisecond},
	}}
	tl := phaseTimeline("x", series)
	require.NoError(t, tl.Validate())
	assert.Equal(t, uint64(3), tl.Intervals[0].Busy)
	assert.Zero(t, tl.Intervals[1].Busy, "counted once")
	assert.Equal(t, 5*time.Millisecond, tl.Intervals[0].P99)
	assert.Equal(t, 5*time.Millisecond, tl.Intervals[1].P99, "a child's 500 ms interval covers two 250 ms steps: no gap in the latency line")
	assert.Zero(t, tl.Intervals[2].P99)
}

// TestPhasePlotShadesEveryFault: the phase's plot has one shaded region per
// fault on each panel, each labelled once, at the fault's times (a kill, an
// instant, drawn 250 ms wide), and the target line's label.
func TestPhasePlotShadesEveryFault(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 22, 0, 0, 0, time.UTC)
	pr, series := recordedPhase(t0)
	rs := regions(t0, pr.windows)
	assert.Equal(t, []chart.Region{{Start: 5 * time.Second, End: 8 * time.Second, Label: "node 3 cut"},
		{Start: 15 * time.Second, End: 15250 * time.Millisecond, Label: "kill fenced"}}, rs)

	dir := t.TempDir()
	pr.drawSeries(dir, series)
	require.Empty(t, pr.plotErr)
	require.Equal(t, "plot-partition_fenced_4x4.svg", pr.svg)
	texts, shaded := readSVG(t, filepath.Join(dir, pr.svg))
	assert.Equal(t, 2*len(pr.windows), shaded, "one shaded region per fault on each panel")
	for _, w := range pr.windows {
		assert.Equal(t, 1, texts[w.label], "%q written once", w.label)
	}
	assert.Equal(t, 1, texts[pr.targetLabel], "the target line's label")

	none := &phaseRecord{phase: "kills"}
	none.drawSeries(dir, nil)
	require.Empty(t, none.plotErr)
	texts, _ = readSVG(t, filepath.Join(dir, none.svg))
	assert.Positive(t, texts[chart.NoSamples], "a phase without samples says so")
}

// readSVG returns how often each text is written in the SVG at path and
// how many translucent filled paths (shaded regions) it has.
func readSVG(t *testing.T, path string) (map[string]int, int) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	texts := map[string]int{}
	shaded := 0
	d := xml.NewDecoder(f)
	inText := false
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		switch tk := tok.(type) {
		case xml.StartElement:
			inText = tk.Name.Local == "text"
			if tk.Name.Local == "path" {
				for _, a := range tk.Attr {
					if a.Name.Local == "style" && translucentFill(a.Value) {
						shaded++
					}
				}
			}
		case xml.CharData:
			if inText {
				texts[strings.TrimSpace(string(tk))]++
			}
		case xml.EndElement:
			inText = false
		}
	}
	return texts, shaded
}

func translucentFill(style string) bool {
	for _, kv := range strings.Split(style, ";") {
		k, v, _ := strings.Cut(kv, ":")
		if strings.TrimSpace(k) == "fill-opacity" {
			op, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return err == nil && op < 1
		}
	}
	return false
}

// TestSubPhaseOneRecordPerMode: a rated phase run in two modes gets a
// record (and a plot) per mode; the phase's empty record is only renamed.
func TestSubPhaseOneRecordPerMode(t *testing.T) {
	dir := t.TempDir()
	tt := &tort{c: config{dir: dir}, out: io.Discard}
	t0 := time.Date(2026, 11, 27, 22, 0, 0, 0, time.UTC)
	tt.beginPhase("partition")
	tt.subPhase("partition trust2")
	tt.mark("node 3 cut", t0, t0.Add(time.Second))
	tt.subPhase("partition fenced")
	tt.mark("node 3 cut", t0, t0.Add(time.Second))
	tt.endPhase()
	require.Len(t, tt.records, 2)
	for i, want := range []string{"partition trust2", "partition fenced"} {
		assert.Equal(t, want, tt.records[i].phase)
		assert.Len(t, tt.records[i].windows, 1)
		assert.FileExists(t, filepath.Join(dir, tt.records[i].svg))
	}
	assert.Nil(t, tt.cur)
}
