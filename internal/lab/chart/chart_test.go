package chart

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/internal/lab/timeline"
)

// The tests draw from recorded samples (no run, no timing) and read the
// SVG back as a reader would see it: its texts, and the rectangles and
// lines at their places relative to the axes.

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// recorded is a 40 s run at about 1,000 commands/s whose rate falls to
// 300/s from 10 s to 25 s (p99 200 ms), with nothing acknowledged from 12
// s to 14 s, and a last interval of half a second.
func recorded() *timeline.Timeline {
	tl := &timeline.Timeline{Title: "cqlseq bench: bbolt, mode trust0", Start: t0, Interval: time.Second}
	for i := range 40 {
		iv := timeline.Interval{Start: time.Duration(i) * time.Second, Length: time.Second, Acked: 1000 + uint64(i*7%50),
			P50: 800 * time.Microsecond, P99: 3 * time.Millisecond, Max: 9 * time.Millisecond}
		if i >= 10 && i < 25 {
			iv.Acked, iv.Failed, iv.P99, iv.Max = 300, 20, 200*time.Millisecond, 900*time.Millisecond
		}
		if i == 12 || i == 13 {
			iv = timeline.Interval{Start: iv.Start, Length: time.Second, Busy: 50}
		}
		if i == 39 {
			iv.Length, iv.Acked = 500*time.Millisecond, 500
		}
		tl.Intervals = append(tl.Intervals, iv)
	}
	return tl
}

// svgDoc is what a reader sees in a chart: texts and paths, in points
// with y growing upwards (the SVG's own transform).
type svgDoc struct {
	texts []svgText
	paths []svgPath
}

type svgText struct {
	x    float64
	text string
}

type svgPath struct {
	pts    [][2]float64
	closed bool
	style  map[string]string
}

var pathPoint = regexp.MustCompile(`[ML](-?[0-9.e+-]+),(-?[0-9.e+-]+)`)

func parseSVG(t *testing.T, b []byte) svgDoc {
	t.Helper()
	var doc svgDoc
	d := xml.NewDecoder(bytes.NewReader(b))
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err, "the SVG is well-formed XML")
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		attr := map[string]string{}
		for _, a := range se.Attr {
			attr[a.Name.Local] = a.Value
		}
		switch se.Name.Local {
		case "text":
			var s string
			require.NoError(t, d.DecodeElement(&s, &se))
			x, _ := strconv.ParseFloat(attr["x"], 64)
			doc.texts = append(doc.texts, svgText{x: x, text: s})
		case "path":
			p := svgPath{closed: strings.HasSuffix(attr["d"], "Z"), style: map[string]string{}}
			for _, m := range pathPoint.FindAllStringSubmatch(attr["d"], -1) {
				x, err1 := strconv.ParseFloat(m[1], 64)
				y, err2 := strconv.ParseFloat(m[2], 64)
				require.NoError(t, err1)
				require.NoError(t, err2)
				p.pts = append(p.pts, [2]float64{x, y})
			}
			for _, kv := range strings.Split(attr["style"], ";") {
				k, v, _ := strings.Cut(kv, ":")
				p.style[k] = v
			}
			doc.paths = append(doc.paths, p)
		}
	}
	return doc
}

func (d svgDoc) count(text string) int {
	n := 0
	for _, t := range d.texts {
		if t.text == text {
			n++
		}
	}
	return n
}

func (d svgDoc) withPrefix(prefix string) []string {
	var out []string
	for _, t := range d.texts {
		if strings.HasPrefix(t.text, prefix) {
			out = append(out, t.text)
		}
	}
	return out
}

// axis is a panel's time axis line: from x0 (time 0) to x1 (the axis'
// end) at height y.
type axis struct{ x0, x1, y float64 }

// timeAxes returns the panels' time axis lines, top panel first: the
// longest horizontal black lines.
func (d svgDoc) timeAxes(t *testing.T) []axis {
	t.Helper()
	var lines []axis
	for _, p := range d.paths {
		if p.style["stroke"] != "#000000" || len(p.pts) != 2 || p.pts[0][1] != p.pts[1][1] {
			continue
		}
		lines = append(lines, axis{p.pts[0][0], p.pts[1][0], p.pts[0][1]})
	}
	require.NotEmpty(t, lines)
	longest := slices.MaxFunc(lines, func(a, b axis) int { return cmpf(a.x1-a.x0, b.x1-b.x0) })
	var axes []axis
	for _, l := range lines {
		if math.Abs((l.x1-l.x0)-(longest.x1-longest.x0)) < 0.01 {
			axes = append(axes, l)
		}
	}
	slices.SortFunc(axes, func(a, b axis) int { return cmpf(b.y, a.y) })
	require.Len(t, axes, 2, "one time axis per panel")
	return axes
}

func cmpf(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// rect is a shaded region as drawn: from x0 to x1, from y0 up to y1.
type rect struct{ x0, x1, y0, y1 float64 }

// shaded returns the translucent filled rectangles above the axis a and
// below the axis above it (the panel's), left to right.
func (d svgDoc) shaded(a axis, above float64) []rect {
	var rs []rect
	for _, p := range d.paths {
		op, err := strconv.ParseFloat(p.style["fill-opacity"], 64)
		if !p.closed || len(p.pts) != 4 || err != nil || op >= 1 {
			continue
		}
		r := rect{p.pts[0][0], p.pts[1][0], p.pts[0][1], p.pts[2][1]}
		if r.y0 > a.y && r.y1 < above {
			rs = append(rs, r)
		}
	}
	slices.SortFunc(rs, func(a, b rect) int { return cmpf(a.x0, b.x0) })
	return rs
}

func drawSVG(t *testing.T, tl *timeline.Timeline, o Options) svgDoc {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, SVG(&b, tl, o))
	return parseSVG(t, b.Bytes())
}

// TestChartAxesLabelledWithUnits: both panels say what their axes hold and
// in which unit, the legend names the lines, the title is the timeline's.
func TestChartAxesLabelledWithUnits(t *testing.T) {
	doc := drawSVG(t, recorded(), Options{})
	assert.Equal(t, 2, doc.count("time since start (s)"), "each panel's time axis")
	assert.Equal(t, 1, doc.count("rate (commands/s)"))
	assert.Equal(t, 1, doc.count("latency (ms, log scale)"))
	assert.Equal(t, 1, doc.count("cqlseq bench: bbolt, mode trust0"), "the title")
	for _, name := range []string{"acknowledged", "busy answers", "failed", "p50", "p99", "max"} {
		assert.Equal(t, 1, doc.count(name), "legend %q", name)
	}
	for _, tick := range []string{"0", "10", "20", "30", "0.1", "1", "100", "1,000"} {
		assert.Positive(t, doc.count(tick), "tick label %q", tick)
	}
	assert.Empty(t, doc.withPrefix("one sample"))
	assert.Zero(t, doc.count(NoSamples))
}

// TestChartRegionsShadedAtTheirTimes: each region is one shaded rectangle
// per panel, spanning its times on the time axis (0 at the axis' left end,
// the axis' end at its right), its label written once, on it.
func TestChartRegionsShadedAtTheirTimes(t *testing.T) {
	for _, c := range []struct {
		name    string
		regions []Region
		axisEnd float64 // seconds
	}{
		{"inside", []Region{{10 * time.Second, 25 * time.Second, "node 3 paused"}, {30 * time.Second, 31 * time.Second, "kill"},
			{37500 * time.Millisecond, 39500 * time.Millisecond, "cut"}}, 39.5},
		{"beyond the end", []Region{{0, 2 * time.Second, "skew"}, {38 * time.Second, 45 * time.Second, "takeover"}}, 45},
	} {
		t.Run(c.name, func(t *testing.T) {
			doc := drawSVG(t, recorded(), Options{Regions: c.regions})
			axes := doc.timeAxes(t)
			above := math.Inf(1)
			for pi, a := range axes {
				rs := doc.shaded(a, above)
				above = a.y
				require.Len(t, rs, len(c.regions), "panel %d: one shaded rectangle per region", pi)
				width := a.x1 - a.x0
				for i, r := range rs {
					rg := c.regions[i]
					assert.InDelta(t, rg.Start.Seconds()/c.axisEnd, (r.x0-a.x0)/width, 0.002, "panel %d, %q starts at %v", pi, rg.Label, rg.Start)
					assert.InDelta(t, rg.End.Seconds()/c.axisEnd, (r.x1-a.x0)/width, 0.002, "panel %d, %q ends at %v", pi, rg.Label, rg.End)
					assert.Greater(t, r.y1-r.y0, 100.0, "panel %d, %q: the panel's height", pi, rg.Label)
				}
			}
			top := doc.shaded(axes[0], math.Inf(1))
			for i, rg := range c.regions {
				require.Equal(t, 1, doc.count(rg.Label), "label %q once", rg.Label)
				for _, tx := range doc.texts {
					if tx.text == rg.Label {
						assert.InDelta(t, top[i].x0+2, tx.x, 0.5, "%q written on its region", rg.Label)
					}
				}
			}
		})
	}
}

// TestChartTargetLine: the target is a dashed line across the rate panel
// at its rate (the rate axis runs from 0 to a round number above the
// largest rate or the target), labelled.
func TestChartTargetLine(t *testing.T) {
	tl := recorded()
	target := Target{Rate: 520, Label: "target 0.5 x rate before"}
	doc := drawSVG(t, tl, Options{Target: &target})
	assert.Equal(t, 1, doc.count(target.Label))
	axes := doc.timeAxes(t)
	var lines []svgPath
	for _, p := range doc.paths {
		if p.style["stroke"] == "#108030" && len(p.pts) == 2 {
			lines = append(lines, p)
		}
	}
	require.Len(t, lines, 1, "one target line")
	l := lines[0]
	assert.NotEmpty(t, l.style["stroke-dasharray"], "dashed")
	assert.Equal(t, l.pts[0][1], l.pts[1][1], "horizontal")
	assert.InDelta(t, axes[0].x0, l.pts[0][0], 0.01, "across the whole rate panel")
	assert.InDelta(t, axes[0].x1, l.pts[1][0], 0.01)
	// The rate axis: the vertical black line left of the top panel.
	var yAxis [2]float64
	for _, p := range doc.paths {
		if p.style["stroke"] == "#000000" && len(p.pts) == 2 && p.pts[0][0] == p.pts[1][0] && p.pts[0][1] > axes[0].y && p.pts[1][1]-p.pts[0][1] > yAxis[1]-yAxis[0] {
			yAxis = [2]float64{p.pts[0][1], p.pts[1][1]}
		}
	}
	var maxRate float64
	for _, iv := range tl.Intervals {
		maxRate = max(maxRate, iv.Rate())
	}
	require.Equal(t, 2000.0, niceCeil(maxRate*1.1))
	assert.InDelta(t, target.Rate/2000, (l.pts[0][1]-yAxis[0])/(yAxis[1]-yAxis[0]), 0.002, "at 520 commands/s")

	// A target above every rate raises the axis to hold it.
	high := Target{Rate: 5000, Label: "target"}
	assert.Equal(t, 1, drawSVG(t, tl, Options{Target: &high}).count("target"))
}

// TestChartSaysWhenThereIsNothingToDraw: an empty timeline, a timeline of
// one interval and one in which nothing was acknowledged draw a chart that
// says so, with its axes labelled.
func TestChartSaysWhenThereIsNothingToDraw(t *testing.T) {
	empty := &timeline.Timeline{Title: "empty", Start: t0, Interval: time.Second}
	doc := drawSVG(t, empty, Options{Regions: []Region{{time.Second, 2 * time.Second, "kill"}}})
	assert.Equal(t, 2, doc.count("no samples"), "both panels")
	assert.Equal(t, 2, doc.count("time since start (s)"))
	assert.Equal(t, 1, doc.count("rate (commands/s)"))
	assert.Equal(t, 1, doc.count("kill"))

	one := &timeline.Timeline{Start: t0, Interval: time.Second, Intervals: []timeline.Interval{
		{Length: 700 * time.Millisecond, Acked: 1234, Busy: 5, P50: 800 * time.Microsecond, P99: 2500 * time.Microsecond, Max: 7 * time.Millisecond}}}
	doc = drawSVG(t, one, Options{})
	assert.Equal(t, []string{"one sample: 1234 commands acknowledged in 700ms (1763 commands/s), 5 busy, 0 failed",
		"one sample: p50 0.8 ms, p99 2.5 ms, max 7 ms"}, doc.withPrefix("one sample"))
	assert.Zero(t, doc.count("no samples"))
	assert.Equal(t, 1, doc.count("latency (ms, log scale)"))

	idle := &timeline.Timeline{Start: t0, Interval: time.Second, Intervals: []timeline.Interval{
		{Length: time.Second, Failed: 3}, {Start: time.Second, Length: time.Second, Busy: 9}}}
	doc = drawSVG(t, idle, Options{})
	assert.Equal(t, 1, doc.count(NoAcknowledged), "the latency panel")
	assert.Equal(t, 1, doc.count("failed"))
	assert.Empty(t, doc.withPrefix("one sample"))

	// Acks counted from an ack log, no latency: the panel says so.
	counted := &timeline.Timeline{Start: t0, Interval: time.Second, Intervals: []timeline.Interval{
		{Length: time.Second, Acked: 40}, {Start: time.Second, Length: time.Second, Acked: 35}}}
	doc = drawSVG(t, counted, Options{})
	assert.Equal(t, 1, doc.count(NoLatency), "the latency panel")
	assert.Zero(t, doc.count(NoAcknowledged))
}

// TestChartLatencyGapWhereNothingWasAcknowledged: intervals 12 and 13
// acknowledged nothing: each latency line is two pieces, not a drop to 0.
func TestChartLatencyGapWhereNothingWasAcknowledged(t *testing.T) {
	doc := drawSVG(t, recorded(), Options{})
	pieces := 0
	for _, p := range doc.paths {
		if p.style["stroke"] == "#D06000" && len(p.pts) > 2 {
			pieces++
		}
	}
	assert.Equal(t, 2, pieces, "p99 in two pieces around the gap")
}

func TestChartOptionsValidate(t *testing.T) {
	o := Options{Title: "a\nb", Regions: []Region{{2 * time.Second, time.Second, "back"}, {-time.Second, time.Second, "before"}},
		Target: &Target{Rate: math.Inf(1)}, Width: 50}
	o.EnsureDefaults()
	err := SVG(io.Discard, recorded(), o)
	require.Error(t, err)
	for _, want := range []string{"chart: title", `region 0 ("back")`, `region 1 ("before")`, "target rate +Inf", "size 50x540"} {
		assert.Contains(t, err.Error(), want)
	}
	bad := recorded()
	bad.Intervals[3].Start = 0
	assert.ErrorContains(t, SVG(io.Discard, bad, Options{}), "timeline: interval 3 starts at 0s")

	p := filepath.Join(t.TempDir(), "c.svg")
	require.NoError(t, WriteFile(p, recorded(), Options{}))
	assert.Error(t, WriteFile(filepath.Join(p, "no", "such.svg"), recorded(), Options{}))
}

func TestChartPlainNumbers(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 2500: "2,500", 1234567: "1,234,567", 0.5: "0.5", 0.30000000000000004: "0.3", -1500: "-1,500", 12.25: "12.25"} {
		assert.Equal(t, want, plainNumber(v), "%v", v)
	}
}

// TestChartClipsABurstOfBusyAnswers: a burst of busy answers 50 times the
// acknowledged rate is drawn clipped, its legend gives its peak, and the
// axis stays on the acknowledged commands' scale; a smaller one is drawn
// as it is.
func TestChartClipsABurstOfBusyAnswers(t *testing.T) {
	tl := &timeline.Timeline{Start: t0, Interval: time.Second}
	for i := range 20 {
		iv := timeline.Interval{Start: time.Duration(i) * time.Second, Length: time.Second, Acked: 100, P50: time.Millisecond, P99: 2 * time.Millisecond, Max: 3 * time.Millisecond}
		if i == 7 {
			iv.Busy = 5000
		}
		tl.Intervals = append(tl.Intervals, iv)
	}
	doc := drawSVG(t, tl, Options{})
	assert.Equal(t, 1, doc.count("busy answers (clipped; peak 5,000/s)"))
	assert.Zero(t, doc.count("5,000"), "no tick at the burst's height")
	assert.Equal(t, 1, doc.count("200"), "the axis is the acknowledged commands' (110/s rounded up)")

	tl.Intervals[7].Busy = 150
	doc = drawSVG(t, tl, Options{})
	assert.Equal(t, 1, doc.count("busy answers"))
	assert.Empty(t, doc.withPrefix("busy answers ("))
}
