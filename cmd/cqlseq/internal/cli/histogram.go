package cli

import (
	"math"
	"math/bits"
	"time"
)

// Latency histogram: log-linear buckets with subBuckets per power of two,
// so a percentile read from it is within 1/subBuckets (0.8 %) of the true
// sample. Values below 2*subBuckets ns have a bucket each.
const (
	subBits    = 7
	subBuckets = 1 << subBits
	numBuckets = 2*subBuckets + (64-subBits-1)*subBuckets
)

// histogram counts durations. Not safe for concurrent use: each load
// worker owns one, and they are merged when the workers are done.
type histogram struct {
	counts []uint64
	n      uint64
	sum    time.Duration
	max    time.Duration
}

func newHistogram() *histogram { return &histogram{counts: make([]uint64, numBuckets)} }

// bucketOf returns the bucket of v nanoseconds.
func bucketOf(v uint64) int {
	if v < 2*subBuckets {
		return int(v)
	}
	e := bits.Len64(v) - subBits - 1 // >= 1
	return 2*subBuckets + (e-1)*subBuckets + int(v>>e) - subBuckets
}

// bucketUpper returns the largest value of bucket i.
func bucketUpper(i int) uint64 {
	if i < 2*subBuckets {
		return uint64(i)
	}
	e := (i-2*subBuckets)/subBuckets + 1
	m := uint64((i-2*subBuckets)%subBuckets + subBuckets)
	return (m+1)<<e - 1
}

func (h *histogram) record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[bucketOf(uint64(d))]++
	h.n++
	h.sum += d
	h.max = max(h.max, d)
}

func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.sum += o.sum
	h.max = max(h.max, o.max)
}

// quantile returns the q-quantile (0 < q <= 1) as the upper bound of the
// bucket that holds it, capped at the largest recorded value; 0 when
// empty.
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n) + 0.5)
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(time.Duration(min(bucketUpper(i), math.MaxInt64)), h.max)
		}
	}
	return h.max
}

func (h *histogram) mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return h.sum / time.Duration(h.n)
}
