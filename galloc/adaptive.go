package galloc

import "time"

// Leaf's dynamic step (SegmentIDGenImpl.updateSegmentFromDb), the rule of
// an adaptive sequence's chunk sizes.
const (
	// MaxAdaptiveChunkSize is the largest chunk an adaptive sequence
	// doubles to (Leaf's MAX_STEP). A configured chunk size above it is
	// used as it is, never doubled.
	MaxAdaptiveChunkSize = 1_000_000
	// AdaptiveFast: a chunk used up (the next one allocated) sooner than
	// this after the one before doubles the next chunk.
	AdaptiveFast = 15 * time.Minute
	// AdaptiveSlow: a chunk that lasted this long or longer halves the
	// next chunk, down to the configured size.
	AdaptiveSlow = 30 * time.Minute
)

// AdaptiveChunkSize returns the size of a process's next chunk of an
// adaptive sequence whose configured (smallest) chunk size is base, when
// the process's last chunk had prev values (0: none yet) and was allocated
// at last, and the next is allocated at now:
//
//   - the first chunk, or one after a chunk smaller than base (base was
//     raised), is base;
//   - after less than AdaptiveFast the size doubles, unless that passes
//     MaxAdaptiveChunkSize (then it stays);
//   - after AdaptiveSlow or more it halves, but not below base;
//   - otherwise it stays.
//
// A process allocates its next chunk when its current one is used past
// Options.PrefetchAt, so the time between its allocations is the time one
// chunk lasts. The size only tunes how many values a process holds: any
// size hands out each value once, as every allocation is a
// compare-and-swap of the record's allocated count.
func AdaptiveChunkSize(base, prev int64, last, now time.Time) int64 {
	if prev < base || last.IsZero() {
		return base
	}
	switch d := now.Sub(last); {
	case d < AdaptiveFast:
		if prev <= MaxAdaptiveChunkSize/2 {
			return prev * 2
		}
		return prev
	case d >= AdaptiveSlow:
		return max(prev/2, base)
	}
	return prev
}
