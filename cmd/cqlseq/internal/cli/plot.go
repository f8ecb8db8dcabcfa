package cli

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cqlseq/cqlseq/internal/lab/chart"
	"github.com/cqlseq/cqlseq/internal/lab/timeline"
)

type plotFlags struct {
	timeline string
	out      string
	regions  []string
	target   string
	title    string
	width    float64
	height   float64

	parsedRegions []chart.Region // set by validate
	parsedTarget  *chart.Target  // set by validate
}

func newPlotCmd(e *env) *cobra.Command {
	f := &plotFlags{}
	cmd := &cobra.Command{
		Use:   "plot --timeline FILE.json|FILE.csv --out FILE.svg",
		Short: "Draw a recorded timeline (bench --timeline) as an SVG picture",
		Long: `plot draws a timeline written by bench --timeline again, without running
anything, into the SVG file --out: two panels on one time axis (seconds
since the run's start), the commands acknowledged per second (busy answers
and failed commands per second too, when there are any) above the p50, p99
and largest latency in ms of the acknowledged commands (log scale, a gap
where nothing was acknowledged).

The timeline file holds ` + timelineHelp + `

--region START:END:LABEL shades a window of time, such as a fault's, on both
panels and writes LABEL on it; START and END are seconds since the start
(12.5) or durations (12.5s, 1m30s); repeat it for each window. --target
RATE:LABEL draws a horizontal line at RATE commands/s, labelled. A timeline
without intervals, or with one, is drawn with a note saying so.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return usage(err)
			}
			return runPlot(e, f)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.timeline, "timeline", "", "the timeline to draw: a file bench --timeline wrote (.json or .csv)")
	fs.StringVar(&f.out, "out", "", "the SVG file to write (.svg)")
	fs.StringArrayVar(&f.regions, "region", nil, "START:END:LABEL: shade from START to END (seconds since the start, or durations such as 12.5s) and write LABEL on it; repeatable")
	fs.StringVar(&f.target, "target", "", "RATE:LABEL: draw a line at RATE commands/s, labelled (e.g. \"600:target 0.5 x rate before\")")
	fs.StringVar(&f.title, "title", "", "the picture's title (default: the timeline's)")
	fs.Float64Var(&f.width, "width", chart.DefaultWidth, "the picture's width in points (at least 100)")
	fs.Float64Var(&f.height, "height", chart.DefaultHeight, "the picture's height in points (at least 100)")
	return cmd
}

// validate reports every problem at once and parses the regions and the
// target.
func (f *plotFlags) validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	switch {
	case f.timeline == "":
		bad("--timeline: required (a file bench --timeline wrote)")
	case timeline.CheckPath(f.timeline) != nil:
		bad("--timeline %q: want a file name ending in .json or .csv", f.timeline)
	}
	switch {
	case f.out == "":
		bad("--out: required (the SVG file to write)")
	case !isSVG(f.out):
		bad("--out %q: want a file name ending in .svg", f.out)
	}
	f.parsedRegions = nil
	for _, r := range f.regions {
		rg, err := parseRegion(r)
		if err != nil {
			bad("--region %q: %v", r, err)
			continue
		}
		f.parsedRegions = append(f.parsedRegions, rg)
	}
	f.parsedTarget = nil
	if f.target != "" {
		v, label, _ := strings.Cut(f.target, ":")
		rate, err := strconv.ParseFloat(v, 64)
		if err != nil || rate < 0 || math.IsInf(rate, 0) || math.IsNaN(rate) {
			bad("--target %q: want RATE:LABEL, RATE a number of commands/s >= 0", f.target)
		} else {
			f.parsedTarget = &chart.Target{Rate: rate, Label: label}
		}
	}
	if strings.ContainsAny(f.title, "\r\n") {
		bad("--title %q: one line, please", f.title)
	}
	if !(f.width >= 100 && f.height >= 100 && f.width <= 1e5 && f.height <= 1e5) {
		bad("--width %v --height %v: want 100 to 100,000 points each", f.width, f.height)
	}
	return errors.Join(errs...)
}

// parseRegion parses START:END:LABEL (LABEL may hold colons, may be empty).
func parseRegion(s string) (chart.Region, error) {
	parts := strings.SplitN(s, ":", 3)
	if len(parts) < 2 {
		return chart.Region{}, errors.New("want START:END:LABEL")
	}
	start, err1 := parseSince(parts[0])
	end, err2 := parseSince(parts[1])
	if err := errors.Join(err1, err2); err != nil {
		return chart.Region{}, err
	}
	if start < 0 || end <= start {
		return chart.Region{}, fmt.Errorf("from %v to %v: want 0 <= START < END", start, end)
	}
	rg := chart.Region{Start: start, End: end}
	if len(parts) == 3 {
		rg.Label = parts[2]
	}
	return rg, nil
}

// parseSince parses seconds (12.5) or a duration (12.5s).
func parseSince(s string) (time.Duration, error) {
	if v, err := strconv.ParseFloat(s, 64); err == nil && !math.IsInf(v, 0) && !math.IsNaN(v) && math.Abs(v) < 1e9 {
		return time.Duration(math.Round(v * 1e9)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q: want seconds (12.5) or a duration (12.5s)", s)
	}
	return d, nil
}

func runPlot(e *env, f *plotFlags) error {
	tl, err := timeline.ReadFile(f.timeline)
	if err != nil {
		return err
	}
	if err := chart.WriteFile(f.out, tl, chart.Options{Title: f.title, Regions: f.parsedRegions, Target: f.parsedTarget, Width: f.width, Height: f.height}); err != nil {
		return err
	}
	acked, _, _ := tl.Totals()
	fmt.Fprintf(e.stdout, "plot %s: %s of %v (%v), %s acknowledged, %s shaded\n", f.out,
		plural(uint64(len(tl.Intervals)), "interval", "intervals"), tl.Interval, tl.Duration().Round(time.Millisecond), commas(acked),
		plural(uint64(len(f.parsedRegions)), "region", "regions"))
	return nil
}
