// Package timeline records what a load did in each fixed interval of its
// run (commands acknowledged, busy answers, failed commands, the latency
// percentiles of the acknowledged ones) and encodes it as JSON or CSV, so a
// run can be drawn, and drawn again later, without running it again.
//
// A Recorder is written by many goroutines through Shards, one per
// goroutine; its Timeline is read once they are done.
package timeline

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Format is the version tag of the encoded layout (JSON "format", the CSV's
// first line).
const Format = "cqlseq timeline 1"

// Timeline is a run cut into intervals of equal length (the last may be
// shorter). Every interval of the run is present, those with nothing in
// them with zeros.
type Timeline struct {
	// Title says what was recorded (one line, may be empty).
	Title string
	// Start is when interval 0 began: UTC, without a monotonic reading.
	Start time.Time
	// Interval is the length of each interval but possibly the last.
	Interval time.Duration
	// Intervals are in order: Intervals[i].Start is i*Interval.
	Intervals []Interval
}

// Interval is what happened in one interval. An event belongs to the
// interval in which its outcome was known: a command's to the one in which
// it was acknowledged or failed, its latency too.
type Interval struct {
	Start  time.Duration // since Timeline.Start
	Length time.Duration // Timeline.Interval, but the last interval's may be shorter
	Acked  uint64        // commands acknowledged
	Busy   uint64        // busy answers (each retried by the caller)
	Failed uint64        // commands that ended with an error
	// Latency of the commands acknowledged in the interval, 0 when none.
	P50, P99, Max time.Duration
}

// Rate returns the commands acknowledged per second of the interval.
func (iv Interval) Rate() float64 { return perSecond(iv.Acked, iv.Length) }

// BusyRate returns the busy answers per second of the interval.
func (iv Interval) BusyRate() float64 { return perSecond(iv.Busy, iv.Length) }

// FailedRate returns the failed commands per second of the interval.
func (iv Interval) FailedRate() float64 { return perSecond(iv.Failed, iv.Length) }

func perSecond(n uint64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// End returns the end of the interval, since Timeline.Start.
func (iv Interval) End() time.Duration { return iv.Start + iv.Length }

// Duration returns the end of the last interval, 0 when there is none.
func (t *Timeline) Duration() time.Duration {
	if len(t.Intervals) == 0 {
		return 0
	}
	return t.Intervals[len(t.Intervals)-1].End()
}

// Totals returns the sums over all intervals.
func (t *Timeline) Totals() (acked, busy, failed uint64) {
	for _, iv := range t.Intervals {
		acked += iv.Acked
		busy += iv.Busy
		failed += iv.Failed
	}
	return acked, busy, failed
}

// maxProblems bounds the problems Validate lists.
const maxProblems = 10

// Validate reports every problem (up to ten) with t's shape: a title of
// more than one line, a non-positive interval, intervals out of place,
// lengths outside (0, Interval] or short before the last, percentiles out
// of order, latencies without an acknowledged command.
func (t *Timeline) Validate() error {
	if err := t.problems(); err != nil {
		return fmt.Errorf("timeline: %w", err)
	}
	return nil
}

// problems is Validate without the package prefix.
func (t *Timeline) problems() error {
	var errs []error
	bad := func(format string, a ...any) {
		if len(errs) < maxProblems {
			errs = append(errs, fmt.Errorf(format, a...))
		}
	}
	if strings.ContainsAny(t.Title, "\r\n") {
		bad("title %q: one line, please", t.Title)
	}
	if t.Interval <= 0 {
		bad("interval %v: want > 0", t.Interval)
		return errors.Join(errs...)
	}
	for i, iv := range t.Intervals {
		if want := time.Duration(i) * t.Interval; iv.Start != want {
			bad("interval %d starts at %v, want %v", i, iv.Start, want)
		}
		if iv.Length <= 0 || iv.Length > t.Interval || iv.Length < t.Interval && i < len(t.Intervals)-1 {
			bad("interval %d is %v long: want %v (the last: up to %v)", i, iv.Length, t.Interval, t.Interval)
		}
		if iv.P50 < 0 || iv.P50 > iv.P99 || iv.P99 > iv.Max {
			bad("interval %d: want 0 <= p50 <= p99 <= max, got %v, %v, %v", i, iv.P50, iv.P99, iv.Max)
		}
		if iv.Acked == 0 && iv.Max != 0 {
			bad("interval %d: a latency without an acknowledged command", i)
		}
	}
	return errors.Join(errs...)
}
