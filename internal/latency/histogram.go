// Package latency holds the one latency histogram of the project: the
// bench's totals and the timeline's per-interval percentiles are both read
// from it, so they are computed the same way.
package latency

import (
	"math"
	"math/bits"
	"time"
)

// Log-linear buckets with SubBuckets per power of two, so a percentile read
// from a Histogram is within 1/SubBuckets (0.8 %) of the true sample. Values
// below 2*SubBuckets ns have a bucket each.
const (
	subBits = 7
	// SubBuckets is the number of buckets per power of two.
	SubBuckets = 1 << subBits
	numBuckets = 2*SubBuckets + (64-subBits-1)*SubBuckets
	numChunks  = numBuckets / SubBuckets
)

// Method describes how Quantile is computed, for reports.
const Method = "log-linear histogram, 128 sub-buckets per power of two, percentiles within 0.8 %"

// Histogram counts durations. The zero value is an empty histogram ready to
// use. It is not safe for concurrent use: each goroutine records into its
// own, and they are merged when done.
//
// Buckets are allocated per power of two on its first sample (1 KiB each),
// so an idle histogram is small and recording allocates only the first
// time a power of two is reached; Reset keeps them for reuse.
type Histogram struct {
	chunks [numChunks]*[SubBuckets]uint64
	n      uint64
	sum    time.Duration
	max    time.Duration
}

// New returns an empty histogram.
func New() *Histogram { return &Histogram{} }

// bucketOf returns the bucket of v nanoseconds.
func bucketOf(v uint64) int {
	if v < 2*SubBuckets {
		return int(v)
	}
	e := bits.Len64(v) - subBits - 1 // >= 1
	return 2*SubBuckets + (e-1)*SubBuckets + int(v>>e) - SubBuckets
}

// bucketUpper returns the largest value of bucket i.
func bucketUpper(i int) uint64 {
	if i < 2*SubBuckets {
		return uint64(i)
	}
	e := (i-2*SubBuckets)/SubBuckets + 1
	m := uint64((i-2*SubBuckets)%SubBuckets + SubBuckets)
	return (m+1)<<e - 1
}

// Record counts d; a negative d counts as 0.
func (h *Histogram) Record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	b := bucketOf(uint64(d))
	c := h.chunks[b>>subBits]
	if c == nil {
		c = new([SubBuckets]uint64)
		h.chunks[b>>subBits] = c
	}
	c[b&(SubBuckets-1)]++
	h.n++
	h.sum += d
	h.max = max(h.max, d)
}

// Merge adds o's samples to h; o is unchanged.
func (h *Histogram) Merge(o *Histogram) {
	for i, oc := range o.chunks {
		if oc == nil {
			continue
		}
		c := h.chunks[i]
		if c == nil {
			c = new([SubBuckets]uint64)
			h.chunks[i] = c
		}
		for j, v := range oc {
			c[j] += v
		}
	}
	h.n += o.n
	h.sum += o.sum
	h.max = max(h.max, o.max)
}

// Reset empties h, keeping its buckets' memory.
func (h *Histogram) Reset() {
	for _, c := range h.chunks {
		if c != nil {
			*c = [SubBuckets]uint64{}
		}
	}
	h.n, h.sum, h.max = 0, 0, 0
}

// Count returns the number of samples.
func (h *Histogram) Count() uint64 { return h.n }

// Max returns the largest sample, 0 when empty.
func (h *Histogram) Max() time.Duration { return h.max }

// Quantile returns the q-quantile (0 < q <= 1) as the upper bound of the
// bucket that holds it, capped at the largest sample; 0 when empty.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n) + 0.5)
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for ci, c := range h.chunks {
		if c == nil {
			continue
		}
		for j, v := range c {
			seen += v
			if seen >= rank {
				return min(time.Duration(min(bucketUpper(ci*SubBuckets+j), math.MaxInt64)), h.max)
			}
		}
	}
	return h.max
}

// Mean returns the mean sample, 0 when empty.
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return h.sum / time.Duration(h.n)
}
