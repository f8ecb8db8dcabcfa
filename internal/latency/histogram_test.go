package latency

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHistogramBucketBoundaries(t *testing.T) {
	prev := -1
	for _, v := range []uint64{0, 1, 255, 256, 257, 511, 512, 1000, 1 << 20, 1<<40 + 12345, math.MaxInt64, math.MaxUint64} {
		b := bucketOf(v)
		require.Less(t, b, numBuckets, "v=%d", v)
		require.GreaterOrEqual(t, b, prev, "buckets grow with v (v=%d)", v)
		prev = b
		up := bucketUpper(b)
		require.GreaterOrEqual(t, up, v, "v=%d lies in its bucket", v)
		if b > 0 {
			require.Less(t, bucketUpper(b-1), v, "v=%d is above the previous bucket", v)
		}
		if v >= 2*SubBuckets {
			assert.LessOrEqual(t, float64(up-v), float64(v)/SubBuckets, "relative width of v=%d", v)
		}
	}
}

func TestHistogramQuantilesMatchSortedSamples(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	h := New()
	var samples []time.Duration
	for range 100_000 {
		// Log-normal-ish latencies from 10 µs to ~100 ms.
		d := time.Duration(10_000 * math.Exp(rng.Float64()*9))
		samples = append(samples, d)
		h.Record(d)
	}
	slices.Sort(samples)
	for _, q := range []float64{0.5, 0.9, 0.95, 0.99, 0.999} {
		want := samples[int(math.Ceil(q*float64(len(samples))))-1]
		got := h.Quantile(q)
		assert.InEpsilon(t, float64(want), float64(got), 1.0/SubBuckets+1e-9, "q=%v", q)
	}
	assert.Equal(t, samples[len(samples)-1], h.Quantile(1))
	assert.Equal(t, samples[len(samples)-1], h.Max())
}

func TestHistogramMergeAndEmpty(t *testing.T) {
	a, b := New(), New()
	assert.Zero(t, a.Quantile(0.5))
	assert.Zero(t, a.Mean())
	a.Record(time.Millisecond)
	b.Record(3 * time.Millisecond)
	b.Record(-time.Second) // clamped to 0
	a.Merge(b)
	assert.Equal(t, uint64(3), a.Count())
	assert.Equal(t, 3*time.Millisecond, a.Max())
	assert.Equal(t, time.Duration(0), a.Quantile(0.01))
	assert.InEpsilon(t, float64(time.Millisecond), float64(a.Quantile(0.5)), 0.01)
	assert.Equal(t, uint64(2), b.Count(), "merge leaves its argument alone")

	var z Histogram // the zero value is usable
	z.Merge(a)
	assert.Equal(t, a.Quantile(0.5), z.Quantile(0.5))
}

func TestHistogramReset(t *testing.T) {
	h := New()
	h.Record(5 * time.Millisecond)
	h.Record(time.Second)
	h.Reset()
	assert.Zero(t, h.Count())
	assert.Zero(t, h.Max())
	assert.Zero(t, h.Quantile(0.99))
	h.Record(2 * time.Millisecond)
	assert.InEpsilon(t, float64(2*time.Millisecond), float64(h.Quantile(1)), 1e-9)
	assert.InEpsilon(t, float64(2*time.Millisecond), float64(h.Quantile(0.01)), 1.0/SubBuckets)
}

// TestHistogramRecordDoesNotAllocate: once a power of two has been seen,
// recording into it allocates nothing (the timeline records every command
// of a benchmark).
func TestHistogramRecordDoesNotAllocate(t *testing.T) {
	h := New()
	h.Record(1500 * time.Microsecond)
	allocs := testing.AllocsPerRun(1000, func() { h.Record(1600 * time.Microsecond) })
	assert.Zero(t, allocs)
}
