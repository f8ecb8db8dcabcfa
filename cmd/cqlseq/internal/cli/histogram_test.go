package cli

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBucketBoundaries(t *testing.T) {
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
		if v >= 2*subBuckets {
			assert.LessOrEqual(t, float64(up-v), float64(v)/subBuckets, "relative width of v=%d", v)
		}
	}
}

func TestQuantilesMatchSortedSamples(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	h := newHistogram()
	var samples []time.Duration
	for range 100_000 {
		// Log-normal-ish latencies from 10 µs to ~100 ms.
		d := time.Duration(10_000 * math.Exp(rng.Float64()*9))
		samples = append(samples, d)
		h.record(d)
	}
	slices.Sort(samples)
	for _, q := range []float64{0.5, 0.9, 0.95, 0.99, 0.999} {
		want := samples[int(math.Ceil(q*float64(len(samples))))-1]
		got := h.quantile(q)
		assert.InEpsilon(t, float64(want), float64(got), 1.0/subBuckets+1e-9, "q=%v", q)
	}
	assert.Equal(t, samples[len(samples)-1], h.quantile(1))
	assert.Equal(t, samples[len(samples)-1], h.max)
}

func TestHistogramMergeAndEmpty(t *testing.T) {
	a, b := newHistogram(), newHistogram()
	assert.Zero(t, a.quantile(0.5))
	assert.Zero(t, a.mean())
	a.record(time.Millisecond)
	b.record(3 * time.Millisecond)
	b.record(-time.Second) // clamped to 0
	a.merge(b)
	assert.Equal(t, uint64(3), a.n)
	assert.Equal(t, 3*time.Millisecond, a.max)
	assert.Equal(t, time.Duration(0), a.quantile(0.01))
	assert.InEpsilon(t, float64(time.Millisecond), float64(a.quantile(0.5)), 0.01)
}

func TestFormat(t *testing.T) {
	for n, want := range map[uint64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567"} {
		assert.Equal(t, want, commas(n))
	}
	assert.Equal(t, "1 event", plural(1, "event", "events"))
	assert.Equal(t, "2,000 events", plural(2000, "event", "events"))
}
