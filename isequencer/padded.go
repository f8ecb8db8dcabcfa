package isequencer

// cacheLine is the cache line size the padding assumes: 64 bytes on amd64
// and on most arm64 cores.
const cacheLine = 64

// padded holds v alone on its cache lines: a full line of padding on either
// side keeps every other field off the lines v touches, whatever the
// enclosing struct's alignment. Writes to v then do not invalidate the
// lines of fields that another goroutine reads (false sharing), and writes
// to those do not invalidate v's. It is meant for the atomics that one side
// writes on every transaction.
type padded[T any] struct {
	_ [cacheLine]byte
	v T
	_ [cacheLine]byte
}
