package timeline

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// The encoded layout, JSON and CSV alike: a header (Format, title, start,
// interval_s, units) and one row per interval with columns. Times are
// seconds and latencies milliseconds, written as the shortest decimal that
// reads back as the same float64, so a Timeline reads back exactly (to the
// nanosecond, for durations under 26 days).
var columns = []string{"start_s", "length_s", "acked", "busy", "failed", "p50_ms", "p99_ms", "max_ms"}

// units says what each column holds, in the order of columns.
var units = []string{
	"seconds since start: when the interval begins",
	"seconds: the interval's length (the last may be shorter)",
	"commands acknowledged in the interval",
	"busy answers in the interval (each retried)",
	"commands that ended with an error in the interval",
	"milliseconds: median latency of the interval's acknowledged commands (0 when none)",
	"milliseconds: 99th percentile latency of the same",
	"milliseconds: largest latency of the same",
}

// startLayout is how Timeline.Start is written.
const startLayout = time.RFC3339Nano

func seconds(d time.Duration) float64 { return float64(d) / 1e9 }
func millis(d time.Duration) float64  { return float64(d) / 1e6 }

// fromFloat turns v units of unit nanoseconds back into a duration.
func fromFloat(v, unit float64, what string) (time.Duration, error) {
	ns := math.Round(v * unit)
	if math.IsNaN(ns) || ns < 0 || ns > math.MaxInt64/2 {
		return 0, fmt.Errorf("%s %v: want a non-negative number", what, v)
	}
	return time.Duration(ns), nil
}

// row is one interval as the columns' values.
func row(iv Interval) []string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	return []string{f(seconds(iv.Start)), f(seconds(iv.Length)), u(iv.Acked), u(iv.Busy), u(iv.Failed),
		f(millis(iv.P50)), f(millis(iv.P99)), f(millis(iv.Max))}
}
