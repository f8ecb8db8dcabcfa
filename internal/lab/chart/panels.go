package chart

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/cqlseq/cqlseq/internal/lab/timeline"
)

// ratePanel draws acknowledged commands per second (busy answers and
// failed commands per second too, when there are any), the regions with
// their labels and the target.
func ratePanel(tl *timeline.Timeline, o *Options) *plot.Plot {
	p := newPanel(xRange(tl, o), RateLabel)
	p.Title.Text = o.Title
	p.Y.Min = 0
	p.Y.Tick.Marker = plainTicks{}
	p.Add(regions{rs: o.Regions, labels: true})
	series := []struct {
		name  string
		rate  func(timeline.Interval) float64
		style draw.LineStyle
	}{
		{"acknowledged", timeline.Interval.Rate, draw.LineStyle{Color: ackedColor, Width: vg.Points(1.5)}},
		{"busy answers", timeline.Interval.BusyRate, draw.LineStyle{Color: busyColor, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(1), vg.Points(2)}}},
		{"failed", timeline.Interval.FailedRate, draw.LineStyle{Color: failedColor, Width: vg.Points(1.2), Dashes: []vg.Length{vg.Points(4), vg.Points(2)}}},
	}
	peaks := make([]float64, len(series))
	for i, s := range series {
		for _, iv := range tl.Intervals {
			peaks[i] = max(peaks[i], s.rate(iv))
		}
	}
	yMax := max(peaks[0], peaks[2])
	if t := o.Target; t != nil {
		yMax = max(yMax, t.Rate)
	}
	// A burst of busy answers (each is retried at once, so they come by
	// the thousand) would flatten the acknowledged line: beyond busyClip
	// times the other series' peak, busy is drawn clipped at the top and
	// its legend gives its peak.
	const busyClip = 2
	clip := math.Inf(1)
	if yMax > 0 && peaks[1] > busyClip*yMax {
		clip = niceCeil(yMax * 1.1)
		series[1].name = fmt.Sprintf("busy answers (clipped; peak %s/s)", plainNumber(math.Round(peaks[1])))
	} else {
		yMax = max(yMax, peaks[1])
	}
	for i, s := range series {
		if len(tl.Intervals) == 0 || i > 0 && peaks[i] == 0 {
			continue // busy and failed only when there are some
		}
		var xys plotter.XYs
		for _, iv := range tl.Intervals {
			xys = append(xys, plotter.XY{X: iv.Start.Seconds(), Y: min(s.rate(iv), clip)})
		}
		p.Add(step(xys, tl.Intervals[len(tl.Intervals)-1].End().Seconds(), s.style))
		p.Legend.Add(s.name, step(xys[:1], xys[0].X, s.style))
	}
	if t := o.Target; t != nil {
		p.Add(targetLine{t: *t})
	}
	p.Y.Max = niceCeil(yMax * 1.1)
	switch len(tl.Intervals) {
	case 0:
		p.Add(message{NoSamples})
	case 1:
		iv := tl.Intervals[0]
		p.Add(message{fmt.Sprintf("one sample: %d commands acknowledged in %v (%.0f commands/s), %d busy, %d failed",
			iv.Acked, iv.Length, iv.Rate(), iv.Busy, iv.Failed)})
	}
	return p
}

// latencyPanel draws the p50, p99 and largest latency of the acknowledged
// commands per interval, on a log scale, with a gap where an interval
// acknowledged nothing, and the regions unlabelled.
func latencyPanel(tl *timeline.Timeline, o *Options) *plot.Plot {
	p := newPanel(xRange(tl, o), LatencyLabel)
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = decades{}
	p.Add(regions{rs: o.Regions})
	lo, hi := math.Inf(1), 0.0
	series := []struct {
		name  string
		v     func(timeline.Interval) float64
		style draw.LineStyle
	}{
		{"p50", func(iv timeline.Interval) float64 { return ms(iv.P50) }, draw.LineStyle{Color: p50Color, Width: vg.Points(1.5)}},
		{"p99", func(iv timeline.Interval) float64 { return ms(iv.P99) }, draw.LineStyle{Color: p99Color, Width: vg.Points(1.5)}},
		{"max", func(iv timeline.Interval) float64 { return ms(iv.Max) }, draw.LineStyle{Color: maxColor, Width: vg.Points(0.8), Dashes: []vg.Length{vg.Points(3), vg.Points(2)}}},
	}
	for _, s := range series {
		legend := false
		// One step line per run of intervals that acknowledged commands.
		var run plotter.XYs
		var runEnd float64
		flush := func() {
			if len(run) == 0 {
				return
			}
			p.Add(step(run, runEnd, s.style))
			if !legend {
				p.Legend.Add(s.name, step(run[:1], run[0].X, s.style))
				legend = true
			}
			run = nil
		}
		for _, iv := range tl.Intervals {
			v := s.v(iv)
			if iv.Acked == 0 || v <= 0 {
				flush()
				continue
			}
			lo, hi = min(lo, v), max(hi, v)
			run = append(run, plotter.XY{X: iv.Start.Seconds(), Y: v})
			runEnd = iv.End().Seconds()
		}
		flush()
	}
	drawn := hi > 0
	if !drawn {
		lo, hi = 0.1, 10 // nothing to draw: an axis of a sensible range
	}
	p.Y.Min = math.Pow(10, math.Floor(math.Log10(lo)))
	p.Y.Max = math.Pow(10, math.Ceil(math.Log10(hi)))
	if p.Y.Max <= p.Y.Min {
		p.Y.Max = p.Y.Min * 10
	}
	switch {
	case len(tl.Intervals) == 0:
		p.Add(message{NoSamples})
	case !drawn && !anyAcked(tl):
		p.Add(message{NoAcknowledged})
	case !drawn:
		p.Add(message{NoLatency})
	case len(tl.Intervals) == 1:
		iv := tl.Intervals[0]
		p.Add(message{fmt.Sprintf("one sample: p50 %.3g ms, p99 %.3g ms, max %.3g ms", ms(iv.P50), ms(iv.P99), ms(iv.Max))})
	}
	return p
}

func anyAcked(tl *timeline.Timeline) bool {
	acked, _, _ := tl.Totals()
	return acked > 0
}

// step returns a line through xys drawn as steps: each value holds from
// its x to the next one's, the last to end.
func step(xys plotter.XYs, end float64, style draw.LineStyle) *plotter.Line {
	pts := append(append(plotter.XYs(nil), xys...), plotter.XY{X: end, Y: xys[len(xys)-1].Y})
	l, err := plotter.NewLine(pts)
	if err != nil {
		panic(err) // finite values only: a bug
	}
	l.StepStyle = plotter.PostStep
	l.LineStyle = style
	return l
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// niceCeil returns a round number (1, 2 or 5 times a power of ten) at
// least v; 1 for v <= 0.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// decades marks a log axis: a labelled tick at each power of ten, minor
// ticks at 2..9 times it. (plot.LogTicks drops the label of a lowest power
// of ten below 1: int(math.Log10(0.1)) is 0.)
type decades struct{}

func (decades) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo) + 1e-9); ; e++ {
		v := math.Pow(10, e)
		if v > hi*(1+1e-9) {
			return ticks
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: plainNumber(v)})
		for m := 2.0; m < 10; m++ {
			if m*v <= hi {
				ticks = append(ticks, plot.Tick{Value: m * v})
			}
		}
	}
}

// plainTicks are plot.DefaultTicks labelled without trailing zeros and
// with thousands separators: "2,500", not "2500.00".
type plainTicks struct{}

func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = plainNumber(ticks[i].Value)
		}
	}
	return ticks
}

// plainNumber formats v with at most 6 significant digits, an integer
// part of more than three digits with commas.
func plainNumber(v float64) string {
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if r := strconv.FormatFloat(v, 'g', 6, 64); len(r) < len(s) && !strings.ContainsAny(r, "e") {
		s = r
	}
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	intPart, frac, hasFrac := strings.Cut(s, ".")
	var b strings.Builder
	for i, d := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(d)
	}
	out := b.String()
	if hasFrac {
		out += "." + frac
	}
	if neg {
		out = "-" + out
	}
	return out
}
