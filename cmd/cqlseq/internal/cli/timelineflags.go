package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/cqlseq/cqlseq/internal/lab/chart"
	"github.com/cqlseq/cqlseq/internal/lab/timeline"
)

// timelineHelp says what --timeline's file holds.
const timelineHelp = `one row per interval (--timeline-interval) of the run: the commands
acknowledged, the busy answers and the failed commands in it, and the p50,
p99 and largest latency in ms of the commands acknowledged in it (0 when
none); a command counts in the interval in which its outcome was known.
JSON (name ending in .json) or CSV (.csv), with a header giving the format,
the start time (UTC), the interval and the units (docs/testing.md, Timelines).
cqlseq plot draws it again.`

// minTimelineInterval bounds --timeline-interval: each interval holds
// latency buckets, and a picture of more intervals than points on it says
// no more.
const minTimelineInterval = 10 * time.Millisecond

// timelineFlags are --timeline, --timeline-interval and --plot: what a
// load run did per interval, as a file and as a picture.
type timelineFlags struct {
	file     string
	interval time.Duration
	plot     string
}

func (f *timelineFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.file, "timeline", "", "write the run's timeline to this file (.json or .csv): per interval, commands acknowledged, busy answers, failed commands, latency p50/p99/max in ms")
	fs.DurationVar(&f.interval, "timeline-interval", timeline.DefaultInterval, "the interval of --timeline and --plot")
	fs.StringVar(&f.plot, "plot", "", "draw the run's timeline into this SVG file (.svg): commands/s and latency p50/p99/max over time")
}

// wanted reports whether the run is to be recorded.
func (f *timelineFlags) wanted() bool { return f.file != "" || f.plot != "" }

// validate reports every bad flag at once (a usage error).
func (f *timelineFlags) validate() []error {
	var errs []error
	if f.file != "" && timeline.CheckPath(f.file) != nil {
		errs = append(errs, fmt.Errorf("--timeline %q: want a file name ending in .json or .csv", f.file))
	}
	if f.plot != "" && !isSVG(f.plot) {
		errs = append(errs, fmt.Errorf("--plot %q: want a file name ending in .svg", f.plot))
	}
	if f.interval < minTimelineInterval {
		errs = append(errs, fmt.Errorf("--timeline-interval %v: want at least %v", f.interval, minTimelineInterval))
	}
	return errs
}

func isSVG(path string) bool { return strings.EqualFold(filepath.Ext(path), ".svg") }

// checkWritable fails, before a long run, when a file the run is to write
// cannot be: it opens path for writing (creating it, then removing it, if
// it did not exist) and leaves an existing file's content as it is.
func checkWritable(flag, path string) error {
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	err = f.Close()
	if errors.Is(statErr, fs.ErrNotExist) {
		err = errors.Join(err, os.Remove(path))
	}
	if err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	return nil
}

// checkWritable checks both files (a runtime error, exit 1).
func (f *timelineFlags) checkWritable() error {
	var errs []error
	if f.file != "" {
		errs = append(errs, checkWritable("--timeline", f.file))
	}
	if f.plot != "" {
		errs = append(errs, checkWritable("--plot", f.plot))
	}
	return errors.Join(errs...)
}

// recorder returns a recorder starting now, titled title; nil when no
// timeline is wanted.
func (f *timelineFlags) recorder(title string) (*timeline.Recorder, error) {
	if !f.wanted() {
		return nil, nil
	}
	return timeline.New(timeline.Options{Interval: f.interval, Title: oneLineTitle(title)})
}

// oneLineTitle returns s with its line breaks made spaces.
func oneLineTitle(s string) string { return strings.Join(strings.Fields(s), " ") }

// write writes tl into the requested files and says so on out.
func (f *timelineFlags) write(e *env, tl *timeline.Timeline) error {
	if tl == nil {
		return nil
	}
	acked, busy, failed := tl.Totals()
	what := fmt.Sprintf("%s of %v, %s acknowledged, %s busy, %s failed", plural(uint64(len(tl.Intervals)), "interval", "intervals"),
		tl.Interval, commas(acked), commas(busy), commas(failed))
	if f.file != "" {
		if err := tl.WriteFile(f.file); err != nil {
			return fmt.Errorf("--timeline: %w", err)
		}
		fmt.Fprintf(e.stdout, "%-15s%s: %s\n", "timeline", f.file, what)
	}
	if f.plot != "" {
		if err := chart.WriteFile(f.plot, tl, chart.Options{}); err != nil {
			return fmt.Errorf("--plot: %w", err)
		}
		redraw := "record it with --timeline FILE to draw it again"
		if f.file != "" {
			redraw = "drawn again by cqlseq plot --timeline " + f.file + " --out FILE.svg"
		}
		fmt.Fprintf(e.stdout, "%-15s%s: rate and latency over time (%s)\n", "plot", f.plot, redraw)
	}
	return nil
}
