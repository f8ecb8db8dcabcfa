package timeline

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recorded returns the timeline of one recorder started at start, with
// events at the given offsets (ack with the latency, or fail when the
// latency is negative), ended at end after start.
func recorded(t *testing.T, start time.Time, interval, end time.Duration, events map[time.Duration]time.Duration) *Timeline {
	t.Helper()
	r, err := New(Options{Start: start, Interval: interval, Title: "one process"})
	require.NoError(t, err)
	s := r.NewShard()
	for at, lat := range events {
		if lat < 0 {
			s.Fail(start.Add(at))
		} else {
			s.Ack(start.Add(at), lat)
		}
	}
	s.Flush()
	return r.Timeline(start.Add(end))
}

// TestMergeAlignsOnTheEarliestStartAndSums: three processes' timelines,
// one starting 0.5 s and one 2.3 s after the first, are merged into one
// aligned on the first's start; an input interval counts in the interval
// containing its start; counts are summed, latencies the worst input's.
func TestMergeAlignsOnTheEarliestStartAndSums(t *testing.T) {
	ms := time.Millisecond
	a := recorded(t, t0, time.Second, 3*time.Second, map[time.Duration]time.Duration{
		100 * ms: 2 * ms, 1100 * ms: 4 * ms, 2900 * ms: -1,
	})
	b := recorded(t, t0.Add(500*ms), time.Second, 2*time.Second, map[time.Duration]time.Duration{
		// b's interval 0 begins at 0.5 s: in the result's interval 0,
		// though this ack happened at 1.3 s.
		800 * ms: 9 * ms, 1500 * ms: 1 * ms,
	})
	c := recorded(t, t0.Add(2300*ms), time.Second, 2500*ms, map[time.Duration]time.Duration{
		// c's intervals 0..2 begin at 2.3, 3.3 and 4.3 s: the result's 2..4.
		100 * ms: 3 * ms, 2200 * ms: 5 * ms, 2400 * ms: -1,
	})
	require.Len(t, c.Intervals, 3)
	require.Equal(t, 500*ms, c.Intervals[2].Length)

	// Given in any order, with nil and empty ones skipped.
	got, err := Merge("all processes", c, nil, a, &Timeline{}, b, &Timeline{Start: t0.Add(-time.Hour), Interval: time.Minute})
	require.NoError(t, err)
	require.NoError(t, got.Validate())
	assert.Equal(t, "all processes", got.Title)
	assert.Equal(t, t0, got.Start, "the earliest start")
	assert.Equal(t, time.Second, got.Interval)
	s := time.Second
	assert.Equal(t, []Interval{
		{Start: 0, Length: s, Acked: 2, P50: 9 * ms, P99: 9 * ms, Max: 9 * ms},                // a 2 ms, b 9 ms
		{Start: s, Length: s, Acked: 2, P50: 4 * ms, P99: 4 * ms, Max: 4 * ms},                // a 4 ms, b 1 ms
		{Start: 2 * s, Length: s, Acked: 1, Failed: 1, P50: 3 * ms, P99: 3 * ms, Max: 3 * ms}, // a's failure, c 3 ms
		{Start: 3 * s, Length: s},
		{Start: 4 * s, Length: 500 * ms, Acked: 1, Failed: 1, P50: 5 * ms, P99: 5 * ms, Max: 5 * ms}, // c's last, half long
	}, got.Intervals)

	acked, busy, failed := got.Totals()
	for _, tl := range []*Timeline{a, b, c} {
		ta, tb, tf := tl.Totals()
		acked, busy, failed = acked-ta, busy-tb, failed-tf
	}
	assert.Zero(t, acked+busy+failed, "every input's events are in the result, once")

	// The result shares nothing with its inputs.
	got.Intervals[0].Acked = 100
	assert.Equal(t, uint64(1), a.Intervals[0].Acked)
}

// TestMergeWorstLatencyPerInterval: the percentiles of an interval are the
// largest of the inputs', each taken on its own (here p50 from one input,
// p99 and max from another), not percentiles of the union.
func TestMergeWorstLatencyPerInterval(t *testing.T) {
	ms := time.Millisecond
	iv := func(acked uint64, p50, p99, mx time.Duration) []Interval {
		return []Interval{{Length: time.Second, Acked: acked, P50: p50, P99: p99, Max: mx}}
	}
	a := &Timeline{Start: t0, Interval: time.Second, Intervals: iv(1000, 8*ms, 9*ms, 10*ms)}
	b := &Timeline{Start: t0, Interval: time.Second, Intervals: iv(1, 1*ms, 50*ms, 70*ms)}
	got, err := Merge("", a, b)
	require.NoError(t, err)
	assert.Equal(t, iv(1001, 8*ms, 50*ms, 70*ms), got.Intervals)
	require.NoError(t, got.Validate())
}

// TestMergeRefusesMismatchedIntervals: inputs of different intervals, or an
// invalid input, are an error naming the inputs.
func TestMergeRefusesMismatchedIntervals(t *testing.T) {
	a := recorded(t, t0, time.Second, 2*time.Second, map[time.Duration]time.Duration{0: time.Millisecond})
	b := recorded(t, t0, 500*time.Millisecond, 2*time.Second, map[time.Duration]time.Duration{0: time.Millisecond})
	got, err := Merge("x", a, nil, b)
	require.Error(t, err)
	assert.Nil(t, got)
	assert.Equal(t, "timeline: merging input 2 of interval 500ms with input 0 of interval 1s: want one interval", err.Error())

	bad := recorded(t, t0, time.Second, 2*time.Second, nil)
	bad.Intervals[1].Start = 0
	_, err = Merge("x", a, bad)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "timeline: merging input 1: interval 1 starts at 0s, want 1s")

	far := recorded(t, t0.Add(60*24*time.Hour), time.Second, 2*time.Second, nil)
	_, err = Merge("x", a, far)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "timeline: merging timelines that start 1440h0m0s apart: more than 4194304 intervals of 1s")
}

// TestMergeEmpty: no input, or only nil and empty ones, is an empty
// timeline with the title; one input alone comes back equal but for the
// title.
func TestMergeEmpty(t *testing.T) {
	for _, tls := range [][]*Timeline{nil, {nil}, {{}, nil, {Start: t0, Interval: time.Second}}} {
		got, err := Merge("nothing ran", tls...)
		require.NoError(t, err)
		assert.Equal(t, &Timeline{Title: "nothing ran"}, got, "%v", tls)
	}

	a := recorded(t, t0, 250*time.Millisecond, 1100*time.Millisecond, map[time.Duration]time.Duration{
		10 * time.Millisecond: time.Millisecond, 1050 * time.Millisecond: -1,
	})
	got, err := Merge("alone", nil, a)
	require.NoError(t, err)
	want := *a
	want.Title = "alone"
	assert.Equal(t, &want, got)
}
