package timeline

import (
	"fmt"
	"time"
)

// Merge returns one timeline of the runs tls recorded side by side (one
// per process of a load, say), titled title.
//
// Every input must be valid (Validate) and all must have the same
// Interval; else Merge returns an error. Nil inputs and inputs without
// intervals are skipped (their Interval is not compared); with none left,
// Merge returns an empty Timeline with only the title set.
//
// The result starts at the earliest Start and has the inputs' Interval;
// its intervals are aligned on that start. An input that starts d after
// it has its interval i placed in interval i + ⌊d/Interval⌋: rounded
// down, into the interval that contains the input interval's start time,
// so its events may count up to one interval earlier than they happened.
// In each interval the acknowledged, busy and failed counts are the sums
// of the inputs', and p50, p99 and max latency the largest of the inputs'
// (the worst process's: not percentiles of all the commands together,
// which the inputs no longer hold). Every interval up to the last any
// input reaches is present, those no input reaches with zeros. All are
// Interval long but the last, which is as long as the longest input
// interval placed in it.
//
// The result shares nothing with the inputs.
func Merge(title string, tls ...*Timeline) (*Timeline, error) {
	var (
		in    []*Timeline
		first int // the index in tls of in[0]
		start time.Time
	)
	for i, tl := range tls {
		if tl == nil || len(tl.Intervals) == 0 {
			continue
		}
		if err := tl.problems(); err != nil {
			return nil, fmt.Errorf("timeline: merging input %d: %w", i, err)
		}
		if len(in) == 0 {
			first = i
		} else if tl.Interval != in[0].Interval {
			return nil, fmt.Errorf("timeline: merging input %d of interval %v with input %d of interval %v: want one interval",
				i, tl.Interval, first, in[0].Interval)
		}
		if len(in) == 0 || tl.Start.Before(start) {
			start = tl.Start
		}
		in = append(in, tl)
	}
	if len(in) == 0 {
		return &Timeline{Title: title}, nil
	}
	interval := in[0].Interval
	shifts := make([]int, len(in)) // each input's interval 0 in the result
	n := 0
	for k, tl := range in {
		shift := tl.Start.Sub(start) / interval
		if shift > MaxIntervals || int(shift)+len(tl.Intervals) > MaxIntervals {
			return nil, fmt.Errorf("timeline: merging timelines that start %v apart: more than %d intervals of %v",
				tl.Start.Sub(start), MaxIntervals, interval)
		}
		shifts[k] = int(shift)
		n = max(n, shifts[k]+len(tl.Intervals))
	}
	out := &Timeline{Title: title, Start: start.Round(0).UTC(), Interval: interval, Intervals: make([]Interval, n)}
	for i := range out.Intervals {
		out.Intervals[i].Start = time.Duration(i) * interval
		if i < n-1 {
			out.Intervals[i].Length = interval
		}
	}
	for k, tl := range in {
		for i, iv := range tl.Intervals {
			o := &out.Intervals[shifts[k]+i]
			o.Acked += iv.Acked
			o.Busy += iv.Busy
			o.Failed += iv.Failed
			o.P50, o.P99, o.Max = max(o.P50, iv.P50), max(o.P99, iv.P99), max(o.Max, iv.Max)
			if shifts[k]+i == n-1 {
				o.Length = max(o.Length, iv.Length)
			}
		}
	}
	return out, nil
}
