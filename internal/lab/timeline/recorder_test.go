package timeline

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 123456789, time.UTC)

func newRecorder(t *testing.T, interval time.Duration) *Recorder {
	t.Helper()
	r, err := New(Options{Start: t0, Interval: interval, Title: "test run"})
	require.NoError(t, err)
	return r
}

// TestTimelineConcurrentRecordingSumsExactly: many goroutines, each with
// its own Shard, record events at given times; every interval's counts are
// the exact sums and its max the exact largest latency (run it with -race).
func TestTimelineConcurrentRecordingSumsExactly(t *testing.T) {
	const (
		workers  = 32
		perEvent = 1000
		interval = 100 * time.Millisecond
		n        = 20 // intervals
	)
	r := newRecorder(t, interval)
	// Worker w's event k happens at (k*7+w) mod n intervals, 10 µs into
	// it: out of order, so shards hand over many times.
	at := func(w, k int) (int, time.Time) {
		i := (k*7 + w) % n
		return i, t0.Add(time.Duration(i)*interval + 10*time.Microsecond)
	}
	lat := func(w, k int) time.Duration { return time.Duration(1+(w*perEvent+k)%5000) * time.Microsecond }
	var wantAcked, wantBusy, wantFailed [n]uint64
	var wantMax [n]time.Duration
	for w := range workers {
		for k := range perEvent {
			i, _ := at(w, k)
			switch k % 4 {
			case 0, 1:
				wantAcked[i]++
				wantMax[i] = max(wantMax[i], lat(w, k))
			case 2:
				wantBusy[i]++
			case 3:
				wantFailed[i]++
			}
		}
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			s := r.NewShard()
			defer s.Flush()
			for k := range perEvent {
				_, when := at(w, k)
				switch k % 4 {
				case 0, 1:
					s.Ack(when, lat(w, k))
				case 2:
					s.Busy(when)
				case 3:
					s.Fail(when)
				}
			}
		})
	}
	wg.Wait()
	tl := r.Timeline(t0.Add(n * interval))
	require.Len(t, tl.Intervals, n)
	var sum uint64
	for i, iv := range tl.Intervals {
		assert.Equal(t, wantAcked[i], iv.Acked, "interval %d acked", i)
		assert.Equal(t, wantBusy[i], iv.Busy, "interval %d busy", i)
		assert.Equal(t, wantFailed[i], iv.Failed, "interval %d failed", i)
		assert.Equal(t, wantMax[i], iv.Max, "interval %d max", i)
		assert.LessOrEqual(t, iv.P50, iv.P99)
		assert.Positive(t, iv.P50)
		sum += iv.Acked
	}
	acked, busy, failed := tl.Totals()
	assert.Equal(t, uint64(workers*perEvent/2), acked)
	assert.Equal(t, sum, acked)
	assert.Equal(t, uint64(workers*perEvent/4), busy)
	assert.Equal(t, uint64(workers*perEvent/4), failed)
	require.NoError(t, tl.Validate())
}

// TestTimelineIntervalsWithoutEventsAreZeroRows: a run with events in
// intervals 0 and 5 only, ended at 8.5 intervals, has 9 intervals, the
// ones between and after with zeros, the last half long.
func TestTimelineIntervalsWithoutEventsAreZeroRows(t *testing.T) {
	r := newRecorder(t, time.Second)
	s := r.NewShard()
	s.Ack(t0.Add(200*time.Millisecond), 3*time.Millisecond)
	s.Ack(t0.Add(5*time.Second+1), 7*time.Millisecond)
	s.Busy(t0.Add(5*time.Second + 999*time.Millisecond))
	s.Flush()
	tl := r.Timeline(t0.Add(8500 * time.Millisecond))
	require.Len(t, tl.Intervals, 9)
	for i, iv := range tl.Intervals {
		assert.Equal(t, time.Duration(i)*time.Second, iv.Start)
		switch i {
		case 0:
			assert.Equal(t, Interval{Start: 0, Length: time.Second, Acked: 1, P50: 3 * time.Millisecond, P99: 3 * time.Millisecond, Max: 3 * time.Millisecond}, iv)
		case 5:
			assert.Equal(t, Interval{Start: 5 * time.Second, Length: time.Second, Acked: 1, Busy: 1, P50: 7 * time.Millisecond, P99: 7 * time.Millisecond, Max: 7 * time.Millisecond}, iv)
		case 8:
			assert.Equal(t, Interval{Start: 8 * time.Second, Length: 500 * time.Millisecond}, iv, "the last is cut at the end")
		default:
			assert.Equal(t, Interval{Start: iv.Start, Length: time.Second}, iv, "interval %d: zeros", i)
		}
	}
	assert.Equal(t, 8500*time.Millisecond, tl.Duration())
	assert.Equal(t, 1.0, tl.Intervals[5].Rate(), "per second")
	assert.Equal(t, 1.0, tl.Intervals[5].BusyRate())
	assert.Zero(t, tl.Intervals[5].FailedRate())
	assert.Equal(t, t0, tl.Start)
	assert.Equal(t, "test run", tl.Title)
	require.NoError(t, tl.Validate())
}

func TestTimelineEdges(t *testing.T) {
	r := newRecorder(t, time.Second)
	assert.Empty(t, r.Timeline(t0).Intervals, "nothing recorded, no time passed: no interval")
	assert.Empty(t, r.Timeline(t0.Add(-time.Hour)).Intervals)
	assert.Zero(t, r.Timeline(t0).Duration())

	s := r.NewShard()
	s.Fail(t0.Add(-time.Minute)) // before the start: interval 0
	s.Ack(t0.Add(3500*time.Millisecond), time.Millisecond)
	s.Flush()
	s.Flush() // nothing held: a no-op
	tl := r.Timeline(t0.Add(2 * time.Second))
	require.Len(t, tl.Intervals, 4, "an event after the end extends the timeline")
	assert.Equal(t, uint64(1), tl.Intervals[0].Failed)
	assert.Equal(t, time.Second, tl.Intervals[3].Length, "the end is before it: a full interval")
	require.NoError(t, tl.Validate())

	var nilShard *Shard
	nilShard.Ack(t0, time.Millisecond)
	nilShard.Busy(t0)
	nilShard.Fail(t0)
	nilShard.Flush()

	_, err := New(Options{Interval: -time.Second, Title: "a\nb"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "timeline: interval -1s")
	assert.Contains(t, err.Error(), "one line")
	r, err = New(Options{})
	require.NoError(t, err)
	assert.Equal(t, DefaultInterval, r.interval)
	assert.False(t, r.Start().IsZero())
}

// TestTimelineRecordingDoesNotAllocate: recording within an interval
// allocates nothing once its latency buckets exist.
func TestTimelineRecordingDoesNotAllocate(t *testing.T) {
	r := newRecorder(t, time.Second)
	s := r.NewShard()
	at := t0.Add(time.Millisecond)
	s.Ack(at, 1200*time.Microsecond)
	assert.Zero(t, testing.AllocsPerRun(1000, func() {
		s.Ack(at, 1300*time.Microsecond)
		s.Busy(at)
		s.Fail(at)
	}))
}
