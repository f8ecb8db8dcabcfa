// Package chart draws a timeline.Timeline as an SVG picture a person reads
// at a glance: two panels stacked on one time axis, the rate of
// acknowledged commands (with busy answers and failures, when there are
// any) and the latency percentiles of the acknowledged commands, with
// shaded regions (fault windows) and a target rate line.
//
// It draws with gonum.org/v1/plot, whose fonts are compiled into the
// binary: nothing is fetched at run time. The SVG names the font family
// (Liberation Serif) and a viewer without it uses another serif.
package chart

import (
	"bytes"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/cqlseq/cqlseq/internal/lab/timeline"
)

// The axes' labels, with their units.
const (
	TimeLabel    = "time since start (s)"
	RateLabel    = "rate (commands/s)"
	LatencyLabel = "latency (ms, log scale)"
)

// The messages drawn instead of data.
const (
	NoSamples      = "no samples"
	NoAcknowledged = "no command acknowledged"
	// NoLatency: commands were acknowledged but no interval holds their
	// latency (counts sampled from an ack log, as of a SIGKILLed process).
	NoLatency = "no latency recorded for the commands acknowledged"
)

// Region is a shaded window of time, such as a fault's: from Start to End
// since the timeline's start, with Label written on it.
type Region struct {
	Start, End time.Duration
	Label      string
}

// Target is a horizontal line on the rate panel at Rate commands/s, with
// Label written on it.
type Target struct {
	Rate  float64
	Label string
}

// Default size of the picture, in points (1/72 in).
const (
	DefaultWidth  = 720
	DefaultHeight = 540
)

// Options configure a chart.
type Options struct {
	// Title is written above the panels; empty: the timeline's Title.
	Title string
	// Regions are shaded on both panels and labelled on the rate panel.
	Regions []Region
	// Target, if set, is drawn on the rate panel.
	Target *Target
	// Width and Height are the picture's size in points; 0: the defaults.
	Width, Height float64
}

// EnsureDefaults sets the zero sizes to the defaults.
func (o *Options) EnsureDefaults() {
	if o.Width == 0 {
		o.Width = DefaultWidth
	}
	if o.Height == 0 {
		o.Height = DefaultHeight
	}
}

// Validate reports every problem at once: a region that does not start at
// or after 0 and end after its start, a label or title of more than one
// line, a negative or infinite target, a size below 100 points.
func (o *Options) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("chart: "+format, a...)) }
	line := func(what, s string) {
		if strings.ContainsAny(s, "\r\n") {
			bad("%s %q: one line, please", what, s)
		}
	}
	line("title", o.Title)
	for i, r := range o.Regions {
		if r.Start < 0 || r.End <= r.Start {
			bad("region %d (%q): from %v to %v: want 0 <= start < end", i, r.Label, r.Start, r.End)
		}
		line("region label", r.Label)
	}
	if t := o.Target; t != nil {
		if t.Rate < 0 || math.IsInf(t.Rate, 0) || math.IsNaN(t.Rate) {
			bad("target rate %v: want a finite number >= 0", t.Rate)
		}
		line("target label", t.Label)
	}
	if o.Width < 100 || o.Height < 100 {
		bad("size %vx%v points: want at least 100x100", o.Width, o.Height)
	}
	return errors.Join(errs...)
}

// SVG draws tl as an SVG picture to w. A timeline without intervals, or
// with one, is drawn with a message saying so ("no samples", "one sample:
// ..."), and a panel without data says so: only bad options, an invalid
// timeline or a failed write are errors.
func SVG(w io.Writer, tl *timeline.Timeline, o Options) (err error) {
	o.EnsureDefaults()
	if err := errors.Join(o.Validate(), tl.Validate()); err != nil {
		return err
	}
	defer func() {
		// gonum/plot panics on what it cannot draw; the panels are built
		// so that it does not, and a case missed is an error, not a crash
		// at the end of a long run.
		if r := recover(); r != nil {
			err = fmt.Errorf("chart: drawing failed: %v", r)
		}
	}()
	if o.Title == "" {
		o.Title = tl.Title
	}
	c := vgsvg.New(vg.Length(o.Width), vg.Length(o.Height))
	drawPanels(draw.New(c), tl, &o)
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	if _, err := b.WriteTo(w); err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	return nil
}

// drawPanels draws the two panels on dc.
func drawPanels(dc draw.Canvas, tl *timeline.Timeline, o *Options) {
	panels := [][]*plot.Plot{{ratePanel(tl, o)}, {latencyPanel(tl, o)}}
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: 8, PadBottom: 8, PadLeft: 8, PadRight: 16, PadY: 16}
	canvases := plot.Align(panels, tiles, dc)
	for i := range panels {
		panels[i][0].Draw(canvases[i][0])
	}
}

// WriteFile draws tl as an SVG picture into path.
func WriteFile(path string, tl *timeline.Timeline, o Options) error {
	var b bytes.Buffer
	if err := SVG(&b, tl, o); err != nil {
		return err
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	return nil
}

// xRange returns the time axis' end in seconds: the timeline's or the last
// region's end, whichever is later, at least 1 s.
func xRange(tl *timeline.Timeline, o *Options) float64 {
	end := tl.Duration()
	for _, r := range o.Regions {
		end = max(end, r.End)
	}
	return max(end.Seconds(), 1)
}

// Colours of what is drawn (regionColor is how tests find the regions).
var (
	regionColor  = color.NRGBA{R: 0xf0, G: 0x80, B: 0x20, A: 0x40}
	targetColor  = color.NRGBA{R: 0x10, G: 0x80, B: 0x30, A: 0xff}
	ackedColor   = color.NRGBA{R: 0x1f, G: 0x5f, B: 0xbf, A: 0xff}
	busyColor    = color.NRGBA{R: 0x80, G: 0x80, B: 0x80, A: 0xff}
	failedColor  = color.NRGBA{R: 0xd0, G: 0x20, B: 0x20, A: 0xff}
	p50Color     = color.NRGBA{R: 0x1f, G: 0x5f, B: 0xbf, A: 0xff}
	p99Color     = color.NRGBA{R: 0xd0, G: 0x60, B: 0x00, A: 0xff}
	maxColor     = color.NRGBA{R: 0x90, G: 0x90, B: 0x90, A: 0xff}
	messageColor = color.NRGBA{R: 0x60, G: 0x00, B: 0x00, A: 0xff}
)

// newPanel returns a plot with the time axis from 0 to xMax seconds and a
// y axis labelled yLabel.
func newPanel(xMax float64, yLabel string) *plot.Plot {
	p := plot.New()
	p.X.Label.Text = TimeLabel
	p.Y.Label.Text = yLabel
	p.X.Min, p.X.Max = 0, xMax
	p.X.Tick.Marker = plainTicks{}
	p.Legend.Top = true
	p.Legend.TextStyle.Font.Size = 9
	p.Legend.ThumbnailWidth = 16
	return p
}
