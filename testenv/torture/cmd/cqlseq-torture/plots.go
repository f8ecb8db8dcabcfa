package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cqlseq/cqlseq/internal/lab/chart"
	"github.com/cqlseq/cqlseq/internal/lab/timeline"
	"github.com/cqlseq/cqlseq/internal/shellwords"
	"github.com/cqlseq/cqlseq/testenv/torture"
)

// timelineInterval is the children's bench --timeline-interval.
const timelineInterval = 500 * time.Millisecond

// phaseRecord is what a phase's plot and report section are drawn from,
// recorded as the phase runs: its children and its faults' windows.
type phaseRecord struct {
	phase    string
	children []*child
	windows  []window
	// target is the rate target in commands/s (0: none) and its label.
	target      float64
	targetLabel string
	// svg is the plot's file name in the run's directory, "" when not
	// drawn; plotErr says why.
	svg     string
	plotErr string
	// timeline is the merged timeline's file name in the run's directory
	// and redraw the cqlseq plot command that draws the plot from it ("":
	// none, no samples).
	timeline, redraw string
	// began is the nodes' CPU time when the phase began; cost what its
	// commands cost, set when it ends.
	began nodeCPU
	cost  *phaseCost
}

// window is one fault's span (a kill: an instant, drawn as a narrow
// window).
type window struct {
	label        string
	began, ended time.Time
}

// mark records a fault's window in the running phase's record.
func (t *tort) mark(label string, began, ended time.Time) {
	if t.cur != nil {
		t.cur.windows = append(t.cur.windows, window{label, began, ended})
	}
}

// track samples c's ack log from the campaign (a SIGKILLed child writes
// no timeline, its ack log stays) and adds c to the running phase's record.
func (t *tort) track(c *child) {
	if t.cur == nil {
		return
	}
	smp, err := torture.StartSampler(context.Background(), c.ackLog, torture.DefaultSampleInterval)
	if err != nil {
		t.logf("%s: sampling %s: %v", c.tag, c.ackLog, err)
		return
	}
	c.sampler = smp
	t.cur.children = append(t.cur.children, c)
}

// phaseTimeline merges the children of a phase into one timeline: the
// acknowledged commands from the ack logs' samples (each child's up to its
// exit), busy answers, failures and latency (the worst child's) from the
// timelines the children wrote (none for a SIGKILLed child).
func phaseTimeline(title string, children []childSeries) *timeline.Timeline {
	step := torture.DefaultSampleInterval
	var start, end time.Time
	for _, c := range children {
		if len(c.samples) == 0 {
			continue
		}
		if start.IsZero() || c.samples[0].At.Before(start) {
			start = c.samples[0].At
		}
		if last := c.samples[len(c.samples)-1].At; last.After(end) {
			end = last
		}
	}
	tl := &timeline.Timeline{Title: title, Start: start.UTC().Round(0), Interval: step}
	if start.IsZero() || !end.After(start) {
		return tl
	}
	n := int((end.Sub(start) + step - 1) / step)
	tl.Intervals = make([]timeline.Interval, n)
	for i := range tl.Intervals {
		tl.Intervals[i] = timeline.Interval{Start: time.Duration(i) * step, Length: step}
	}
	at := func(ts time.Time) int { return min(max(int(ts.Sub(start)/step), 0), n-1) }
	for _, c := range children {
		for i := 1; i < len(c.samples); i++ {
			if d := c.samples[i].Acks - c.samples[i-1].Acks; d > 0 {
				tl.Intervals[at(c.samples[i-1].At)].Acked += uint64(d)
			}
		}
	}
	for _, c := range children {
		if c.tl == nil {
			continue
		}
		for _, iv := range c.tl.Intervals {
			// Counts go to the interval holding the child's interval's
			// start; its latency to every interval it covers (a child's
			// interval is longer than the sampling step).
			from := c.tl.Start.Add(iv.Start)
			o := &tl.Intervals[at(from)]
			o.Busy += iv.Busy
			o.Failed += iv.Failed
			if iv.Acked == 0 {
				continue
			}
			for j := at(from); j <= at(from.Add(iv.Length-1)); j++ {
				if o := &tl.Intervals[j]; o.Acked > 0 {
					o.P50, o.P99, o.Max = max(o.P50, iv.P50), max(o.P99, iv.P99), max(o.Max, iv.Max)
				}
			}
		}
	}
	return tl
}

// childSeries is one child's samples (up to its exit) and the timeline it
// wrote (nil: none).
type childSeries struct {
	samples []torture.Sample
	tl      *timeline.Timeline
}

// series stops c's sampler and returns its samples up to c's exit and the
// timeline c wrote, if any.
func (c *child) series() childSeries {
	var cs childSeries
	if c.sampler != nil {
		c.sampler.Stop()
		s, _ := c.sampler.Samples()
		select {
		case <-c.done:
			for len(s) > 1 && s[len(s)-1].At.After(c.exitedAt.Add(torture.DefaultSampleInterval)) {
				s = s[:len(s)-1]
			}
		default:
		}
		cs.samples = s
	}
	if tl, err := timeline.ReadFile(c.timeline); err == nil {
		cs.tl = tl
	}
	return cs
}

// regions turns the windows into the chart's regions, relative to start;
// a window shorter than minWidth is drawn minWidth wide.
func regions(start time.Time, ws []window) []chart.Region {
	const minWidth = 250 * time.Millisecond
	var rs []chart.Region
	for _, w := range ws {
		s := max(w.began.Sub(start), 0)
		e := max(w.ended.Sub(start), s+minWidth)
		rs = append(rs, chart.Region{Start: s, End: e, Label: w.label})
	}
	return rs
}

// plotFile is the phase's plot's file name in the run's directory.
func plotFile(phase string) string {
	r := strings.NewReplacer(" ", "_", "/", "_", "(", "", ")", "", ",", "")
	return "plot-" + r.Replace(phase) + ".svg"
}

// finish writes the phase's plot into dir and sets its cost: the nodes'
// CPU time from pr.began to ended over the commands the children's ack
// logs hold, and the CQL statements of the children's reports.
func (pr *phaseRecord) finish(dir string, ended nodeCPU) {
	series := make([]childSeries, 0, len(pr.children))
	c := &phaseCost{}
	for _, ch := range pr.children {
		cs := ch.series()
		series = append(series, cs)
		if len(cs.samples) > 0 {
			c.acked += uint64(cs.samples[len(cs.samples)-1].Acks)
		}
		c.addReport(ch.json)
	}
	pr.drawSeries(dir, series)
	c.measureNodes(pr.began, ended)
	pr.cost = c
}

func (pr *phaseRecord) drawSeries(dir string, series []childSeries) {
	tl := phaseTimeline(pr.phase+": the children's acknowledged commands", series)
	if len(tl.Intervals) == 0 && len(pr.windows) > 0 {
		// No samples: the faults are drawn from the first one's start.
		first := pr.windows[0].began
		for _, w := range pr.windows {
			if w.began.Before(first) {
				first = w.began
			}
		}
		tl.Start = first.UTC().Round(0)
	}
	o := chart.Options{Regions: regions(tl.Start, pr.windows), Width: 900, Height: 500}
	if pr.target > 0 {
		o.Target = &chart.Target{Rate: pr.target, Label: pr.targetLabel}
	}
	name := plotFile(pr.phase)
	if err := chart.WriteFile(filepath.Join(dir, name), tl, o); err != nil {
		pr.plotErr = err.Error()
		return
	}
	pr.svg = name
	// The merged timeline, so that the plot can be drawn again.
	tlName := strings.TrimSuffix(name, ".svg") + ".timeline.json"
	if len(tl.Intervals) > 0 {
		if err := tl.WriteFile(filepath.Join(dir, tlName)); err != nil {
			pr.plotErr = "writing its timeline: " + err.Error()
			return
		}
		pr.timeline, pr.redraw = tlName, redrawCommand(tlName, name, o)
	}
}

// redrawCommand is the cqlseq plot command line that draws the timeline
// file tl into svg again with o's regions and target (run in the run's
// directory).
func redrawCommand(tl, svg string, o chart.Options) string {
	args := []string{"cqlseq", "plot", "--timeline", tl, "--out", svg}
	if o.Width != 0 || o.Height != 0 {
		args = append(args, "--width", strconv.FormatFloat(o.Width, 'f', -1, 64), "--height", strconv.FormatFloat(o.Height, 'f', -1, 64))
	}
	for _, r := range o.Regions {
		args = append(args, "--region", fmt.Sprintf("%s:%s:%s", seconds(r.Start), seconds(r.End), r.Label))
	}
	if o.Target != nil {
		args = append(args, "--target", fmt.Sprintf("%s:%s", strconv.FormatFloat(o.Target.Rate, 'f', -1, 64), o.Target.Label))
	}
	return shellwords.Line(args[0], args[1:]...)
}

// seconds is d in seconds, to the millisecond.
func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Round(time.Millisecond).Seconds(), 'f', -1, 64)
}

// beginPhase starts the record of phase; endPhase draws its plot.
func (t *tort) beginPhase(name string) {
	t.cur = &phaseRecord{phase: name, began: t.nodeCPUNow()}
	t.records = append(t.records, t.cur)
}

// subPhase starts a record of its own for a part of the running phase
// (a rated phase's run in one mode, with its own target), unless the
// phase has recorded nothing yet: then it only names it.
func (t *tort) subPhase(name string) {
	if t.cur != nil && len(t.cur.children) == 0 && len(t.cur.windows) == 0 {
		t.cur.phase = name
		return
	}
	t.endPhase()
	t.beginPhase(name)
}

func (t *tort) endPhase() {
	if t.cur == nil {
		return
	}
	t.cur.finish(t.c.dir, t.nodeCPUNow())
	if t.cur.plotErr != "" {
		t.logf("%s: plot: %s", t.cur.phase, t.cur.plotErr)
	}
	t.logf("%s: cost: %s", t.cur.phase, t.cur.cost)
	t.cur = nil
}

// rateTarget sets the running phase's target line: targets.During times
// the rate before the first measured fault.
func (t *tort) rateTarget(targets torture.Targets, fr faultRates) {
	if t.cur == nil || t.cur.target > 0 || fr.err != nil || targets.During <= 0 {
		return
	}
	before := fr.r.Before.Rate()
	if before <= 0 {
		return
	}
	t.cur.target = targets.During * before
	t.cur.targetLabel = fmt.Sprintf("target during a fault: %.2g x %.0f/s before", targets.During, before)
}

// removeIfExists removes path; a missing file is fine.
func removeIfExists(path string) { _ = os.Remove(path) }
