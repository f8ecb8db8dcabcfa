package isequencer

// ring is a power-of-two array indexed by an ever-growing position
// (position & mask). The sequencer's rings are single-producer
// single-consumer: the caller writes positions at and above the tail, the
// worker reads positions below the tail it loaded, and the caller reuses a
// slot only after the worker has released it (the head passed it).
//
// A ring grows on demand: grow returns a larger ring holding the same
// positions [from, to). The producer publishes it (an atomic pointer
// store) before it publishes any position written to it, and never writes
// the old ring again; a consumer loads the ring after the tail, so a tail
// it loaded is always covered by the ring it reads.
type ring[T any] struct {
	buf  []T
	mask uint64
}

func newRing[T any](size int) *ring[T] {
	if size < 1 || size&(size-1) != 0 {
		panic("isequencer: ring size must be a power of two")
	}
	return &ring[T]{buf: make([]T, size), mask: uint64(size - 1)}
}

// at returns the slot of position pos.
func (r *ring[T]) at(pos uint64) *T { return &r.buf[pos&r.mask] }

// size returns the number of slots.
func (r *ring[T]) size() uint64 { return uint64(len(r.buf)) }

// grow returns a ring of at least need slots (a power of two, doubling at
// least, at most limit) holding positions [from, to) of r. It returns r if
// r already has need slots or has limit slots.
func (r *ring[T]) grow(need, limit uint64, from, to uint64) *ring[T] {
	size := r.size()
	if size >= need || size >= limit {
		return r
	}
	for size < need && size < limit {
		size <<= 1
	}
	g := newRing[T](int(size))
	for p := from; p != to; p++ {
		*g.at(p) = *r.at(p)
	}
	return g
}

// pow2AtLeast returns the smallest power of two >= n (1 for n <= 1).
func pow2AtLeast(n int) int {
	size := 1
	for size < n {
		size <<= 1
	}
	return size
}
