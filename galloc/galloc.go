// Package galloc owns globally allocated range sequences: one named
// sequence of integers shared by many processes, each of which allocates
// chunks of values from a record in the storage contract (mem, bbolt, CQL)
// with a compare-and-swap, and hands the values of its chunks out locally.
// It is the design of BDR's galloc sequences without their Raft majority:
// one lightweight transaction per chunk.
//
// Guarantees:
//   - No value is handed out twice, by any process, as long as every
//     process opens the sequence with the same definition (Open checks
//     it) and the store's compare-and-swap is linearizable (CQL's LWT at
//     SERIAL or LOCAL_SERIAL within one data centre).
//   - Values are monotonic per process: a Next that begins after another
//     returned gets a larger value. They are NOT ordered across processes:
//     two processes hand out values of different chunks at the same time.
//   - A process holds at most two chunks (the current one and a reserved
//     one); a crash wastes at most their unused values.
//   - An allocation's compare-and-swap is never retried blindly. When its
//     outcome is unknown, storage/cql first re-reads the row at SERIAL; if
//     that cannot prove the write, galloc reads the record: every write
//     carries a unique nonce, so the chunk counts as allocated only when
//     the record holds this very write. Otherwise it is treated as not
//     made (if it was in fact applied, that chunk is wasted, never handed
//     out) and the allocation goes on from the record read.
//   - Once a fraction (Options.PrefetchAt) of the current chunk is handed
//     out, one background goroutine allocates the reserved chunk, so that
//     a caller waits only when both chunks are used up. Only that goroutine
//     allocates, so callers that arrive while an allocation is pending wait
//     for it instead of starting their own: every chunk is used to its end.
//
// Within the current chunk, Next is one atomic add; the lock is taken only
// to switch chunks.
package galloc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cqlseq/cqlseq/storage"
)

// span is a chunk being handed out: slots [lo, hi). next is the next slot
// to hand out; it runs past hi once the chunk is used up. A span is never
// reused: a chunk switch installs a new one.
type span struct {
	next    atomic.Uint64
	lo, hi  uint64
	trigger uint64 // handing out this slot wakes the prefetcher; hi: never
}

// Chunk is a range of values allocated to this process: Count values from
// First, Step apart.
type Chunk struct {
	First int64
	Count uint64
}

// Run is a contiguous run of values handed out by NextN: Count values from
// First, Step apart (First, First+Step, ...).
type Run struct {
	First int64
	Count uint64
}

// Stats are a Sequence's counters.
type Stats struct {
	// Fetches is the number of chunks this process allocated.
	Fetches uint64
	// Conflicts counts compare-and-swap attempts lost to other processes.
	Conflicts uint64
	// UnknownOutcomes counts allocations whose outcome the store could not
	// report; each was decided by a read.
	UnknownOutcomes uint64
	// Abandoned counts allocations whose compare-and-swap was in flight
	// when Close ended them: their outcome stays unknown, and a chunk they
	// did allocate is wasted (it is then one of the two chunks a process
	// holds at most: the reserved one was not there yet).
	Abandoned uint64
	// Waits counts Next and NextN calls that had to wait for a chunk.
	Waits uint64
	// Issued is the number of values handed out.
	Issued uint64
	// Held is the number of values allocated to this process and not yet
	// handed out (current and reserved chunk): what a crash now would
	// waste.
	Held uint64
	// ChunkSize is the number of values of the last chunk this process
	// allocated (0: none yet): the record's chunk size, or for an
	// adaptive sequence its current step (AdaptiveChunkSize).
	ChunkSize int64
	// Retired: the sequence was seen retired; Next fails with ErrRetired.
	Retired bool
}

// Sequence hands out the values of one galloc sequence in this process.
// Its methods are safe for concurrent use. Close must be called to stop its
// background allocation.
type Sequence struct {
	st          storage.Storage
	name        string
	pKey, cCols []byte
	o           Options
	def         Record

	cur     atomic.Pointer[span]
	closed  atomic.Bool
	retired atomic.Bool // seen retired: Next and NextN fail with ErrRetired

	// lastSize is the number of values of the last chunk allocated (0:
	// none yet); lastFetch its time by Options.Now. Only run writes them
	// after Open.
	lastSize  atomic.Int64
	lastFetch time.Time

	kick   chan struct{} // wakes run; capacity 1
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when run returns

	fetches, conflicts, unknown, abandoned, waits atomic.Uint64

	// raw is the record as this process last saw it; only run touches it
	// after Open.
	raw []byte

	mu struct {
		sync.Mutex
		reserved   Chunk // Count 0: none
		reservedLo uint64
		changed    chan struct{} // closed and replaced when the state below changes
		fetchErr   error         // the last failed allocation's error
		errGen     uint64        // incremented with every failed allocation
		final      error         // ErrExhausted or ErrRetired: no chunk will come
		issuedDone uint64        // values handed out from chunks before the current
		chunks     []Chunk
	}
}

// Open opens (creating it if needed) the sequence name in st and starts
// its background allocation, which fetches the first chunk at once. A
// stored definition that differs from o's is ErrDefinitionMismatch: its
// type, start or step, and its chunk size unless o.StoredChunkSize. It
// registers the name in the catalog (List) before it creates the record:
// it reads the catalog row and writes it only when the row is missing (a
// sequence it creates, or one created before the catalog existed), so that
// opening a listed sequence writes no catalog row. A retired sequence
// opens, and its Next fails with ErrRetired. st is not closed by Close.
//
// The chunk size and the adaptive flag are the stored record's (Alter
// changes them): every allocation reads them from the record it replaces,
// so an Alter takes effect at each process's next allocation.
func Open(ctx context.Context, st storage.Storage, name string, o Options) (*Sequence, error) {
	o.EnsureDefaults()
	errs := []error{o.Validate(), validName(name)}
	if st == nil {
		errs = append(errs, fmt.Errorf("galloc: %w: nil storage", storage.ErrInvalidArgument))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	s := &Sequence{st: st, name: name, pKey: PKey(name), cCols: StateCCols(), o: o, kick: make(chan struct{}, 1), done: make(chan struct{})}
	s.def = Record{Type: o.Type, ChunkSize: o.ChunkSize, Start: o.Start, Step: o.Step, Adaptive: o.Adaptive}
	if err := register(ctx, st, name); err != nil {
		return nil, err
	}
	raw, err := s.create(ctx)
	if err != nil {
		return nil, err
	}
	s.raw = raw
	s.cur.Store(&span{})
	s.mu.changed = make(chan struct{})
	s.ctx, s.cancel = context.WithCancel(context.Background())
	go s.run()
	s.wake()
	return s, nil
}

// create writes the sequence's initial record unless it exists, and
// returns the stored record after checking its definition.
func (s *Sequence) create(ctx context.Context) ([]byte, error) {
	init := s.def
	init.Nonce = rand.Uint64()
	init.Process = s.o.Process
	raw, err := init.MarshalBinary()
	if err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		ok, err := s.st.InsertIfNotExists(ctx, s.pKey, s.cCols, raw, 0)
		switch {
		case err == nil && ok:
			return raw, nil
		case err != nil && !errors.Is(err, storage.ErrUnknownOutcome) && !errors.Is(err, storage.ErrUnavailable):
			return nil, fmt.Errorf("galloc: creating sequence %q: %w", s.name, err)
		}
		got, found, rerr := s.st.Get(ctx, s.pKey, s.cCols)
		if rerr == nil && found {
			if err := s.checkDefinition(got, !s.o.StoredChunkSize); err != nil {
				return nil, err
			}
			return got, nil
		}
		// An unknown or failed insert and no row: the insert is
		// conditional, so trying it again cannot overwrite anything.
		if attempt >= s.o.MaxAttempts {
			return nil, fmt.Errorf("galloc: creating sequence %q: %d attempts: %w", s.name, attempt, errors.Join(err, rerr))
		}
		if err := s.backoff(ctx, attempt); err != nil {
			return nil, fmt.Errorf("galloc: creating sequence %q: %w", s.name, err)
		}
	}
}

// checkDefinition decodes raw and compares its definition with s's: the
// type, start and step, which no Alter changes, and the chunk size when
// chunk is set (Open's check).
func (s *Sequence) checkDefinition(raw []byte, chunk bool) error {
	var r Record
	if err := r.UnmarshalBinary(raw); err != nil {
		return fmt.Errorf("galloc: sequence %q: %w", s.name, err)
	}
	if r.Type != s.def.Type || chunk && r.ChunkSize != s.def.ChunkSize || r.Start != s.def.Start || r.Step != s.def.Step {
		return fmt.Errorf("%w: sequence %q is stored as %v chunk %d start %d step %d, opened as %v chunk %d start %d step %d",
			ErrDefinitionMismatch, s.name, r.Type, r.ChunkSize, r.Start, r.Step, s.def.Type, s.def.ChunkSize, s.def.Start, s.def.Step)
	}
	return nil
}

// Name returns the sequence's name.
func (s *Sequence) Name() string { return s.name }

// Definition returns the sequence's type, start and step (which never
// change) and the chunk size and adaptive flag it was opened with (an
// Alter may have changed them since: ReadRecord has the stored ones).
func (s *Sequence) Definition() Record { return s.def }

// Next returns the sequence's next value in this process. It waits only
// when the current and the reserved chunk are both used up, for the
// allocation in flight. It fails with ErrExhausted once every value has been
// allocated, with ErrRetired once the sequence is seen retired (by an
// allocation, MarkRetired or Refresh), with ErrClosed after Close, with
// ctx's error when ctx ends while it waits, or with the error of the
// allocation it waited for.
func (s *Sequence) Next(ctx context.Context) (int64, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	if s.retired.Load() {
		return 0, s.retiredErr()
	}
	for {
		c := s.cur.Load()
		n := c.next.Add(1) - 1
		if n < c.hi {
			if n == c.trigger {
				s.wake()
			}
			return s.def.Value(n), nil
		}
		if err := s.switchChunk(ctx, c); err != nil {
			return 0, err
		}
	}
}

// MaxNextN is the largest count NextN takes.
const MaxNextN = math.MaxInt32

// NextN hands out n values (1 <= n <= MaxNextN) as runs of consecutive
// values: one run when they fit in what is left of the current chunk,
// otherwise the chunk's rest and runs from the next chunks. On error no
// values are returned; those already taken are wasted.
func (s *Sequence) NextN(ctx context.Context, n int) ([]Run, error) {
	if n < 1 || n > MaxNextN {
		return nil, fmt.Errorf("galloc: NextN(%d): %w: want 1..%d", n, storage.ErrInvalidArgument, MaxNextN)
	}
	if s.closed.Load() {
		return nil, ErrClosed
	}
	if s.retired.Load() {
		return nil, s.retiredErr()
	}
	var runs []Run
	for need := uint64(n); need > 0; {
		c := s.cur.Load()
		lo := c.next.Add(need) - need
		if lo < c.hi {
			hi := min(lo+need, c.hi)
			if lo <= c.trigger && c.trigger < hi {
				s.wake()
			}
			runs = append(runs, Run{First: s.def.Value(lo), Count: hi - lo})
			need -= hi - lo
			continue
		}
		if err := s.switchChunk(ctx, c); err != nil {
			return nil, err
		}
	}
	return runs, nil
}

// switchChunk replaces the used-up span c by the reserved chunk, waiting
// for the background allocation when there is none. It returns nil when
// the caller should try the (new) current span again.
func (s *Sequence) switchChunk(ctx context.Context, c *span) error {
	waited := false
	s.mu.Lock()
	gen := s.mu.errGen
	for {
		switch {
		case s.closed.Load():
			s.mu.Unlock()
			return ErrClosed
		case s.retired.Load(): // no chunk is installed once retired
			s.mu.Unlock()
			return s.retiredErr()
		case s.cur.Load() != c:
			s.mu.Unlock()
			return nil
		case s.mu.reserved.Count > 0:
			s.installLocked(c)
			s.mu.Unlock()
			s.wake()
			return nil
		case s.mu.final != nil:
			err := s.mu.final
			s.mu.Unlock()
			return err
		case s.mu.errGen != gen:
			err := s.mu.fetchErr
			s.mu.Unlock()
			return err
		}
		ch := s.mu.changed
		s.mu.Unlock()
		if !waited {
			waited = true
			s.waits.Add(1)
		}
		s.wake()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("galloc: sequence %q: waiting for a chunk: %w", s.name, ctx.Err())
		}
		s.mu.Lock()
	}
}

// installLocked makes the reserved chunk current in place of c.
func (s *Sequence) installLocked(c *span) {
	s.mu.issuedDone += c.hi - c.lo
	lo, size := s.mu.reservedLo, s.mu.reserved.Count
	n := &span{lo: lo, hi: lo + size, trigger: lo + size}
	if !s.o.NoPrefetch {
		n.trigger = lo + min(size-1, uint64(s.o.PrefetchAt*float64(size)))
	}
	n.next.Store(lo)
	s.mu.reserved = Chunk{}
	s.cur.Store(n)
}

// broadcastLocked wakes every caller waiting in switchChunk.
func (s *Sequence) broadcastLocked() {
	close(s.mu.changed)
	s.mu.changed = make(chan struct{})
}

// wake asks run to check whether a chunk is needed.
func (s *Sequence) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// run is the background allocator: the only goroutine that allocates
// chunks. It runs until Close.
func (s *Sequence) run() {
	defer close(s.done)
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.kick:
		}
		for s.needsChunk() {
			lo, hi, err := s.allocate(s.ctx)
			s.mu.Lock()
			if err != nil {
				s.mu.fetchErr = err
				s.mu.errGen++
				if errors.Is(err, ErrExhausted) || errors.Is(err, ErrRetired) {
					s.mu.final = err
				}
				if errors.Is(err, ErrRetired) {
					s.retired.Store(true)
				}
			} else {
				s.fetches.Add(1) // under mu: Stats sees it with the chunk
				s.mu.reservedLo = lo
				s.mu.reserved = Chunk{First: s.def.Value(lo), Count: hi - lo}
				s.mu.chunks = append(s.mu.chunks, s.mu.reserved)
			}
			s.broadcastLocked()
			s.mu.Unlock()
			if err != nil {
				if s.ctx.Err() == nil && s.mu.final == nil {
					s.o.Logger.Warn("galloc: chunk allocation failed", "sequence", s.name, "err", err)
				}
				break
			}
		}
	}
}

// needsChunk reports whether a reserved chunk should be allocated now:
// none is held, the sequence is not exhausted, and the current chunk is
// used past its prefetch point.
func (s *Sequence) needsChunk() bool {
	if s.ctx.Err() != nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.reserved.Count > 0 || s.mu.final != nil || s.retired.Load() {
		return false
	}
	c := s.cur.Load()
	return c.next.Load() >= c.trigger
}

// allocate allocates the next chunk with a compare-and-swap on the record
// and returns its slots [lo, hi). A lost swap re-reads the record and tries
// again (at most Options.MaxAttempts times, with jittered exponential
// backoff). An unknown outcome is never retried blindly: a read decides it,
// and the chunk counts as allocated only if the record holds this very
// write (its nonce is unique).
func (s *Sequence) allocate(ctx context.Context) (lo, hi uint64, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.o.FetchTimeout)
	defer cancel()
	raw := s.raw
	var lastErr error
	for attempt := 1; ; attempt++ {
		if raw == nil {
			got, found, err := s.st.Get(ctx, s.pKey, s.cCols)
			switch {
			case err != nil && !errors.Is(err, storage.ErrUnavailable):
				return 0, 0, fmt.Errorf("galloc: sequence %q: reading the record: %w", s.name, err)
			case err != nil:
				lastErr = err
			case !found:
				return 0, 0, fmt.Errorf("galloc: sequence %q: %w: the record is missing", s.name, ErrCorrupt)
			default:
				raw = got
			}
		}
		if raw != nil {
			if err := s.checkDefinition(raw, false); err != nil {
				return 0, 0, err
			}
			var cur Record
			_ = cur.UnmarshalBinary(raw) // checked above
			if cur.Retired {
				return 0, 0, s.retiredErr()
			}
			if cur.Exhausted() {
				return 0, 0, fmt.Errorf("%w: sequence %q", ErrExhausted, s.name)
			}
			now := s.o.Now()
			size := uint64(cur.ChunkSize)
			if cur.Adaptive {
				size = uint64(AdaptiveChunkSize(cur.ChunkSize, s.lastSize.Load(), s.lastFetch, now))
			}
			next := cur
			next.Allocated += min(size, cur.Capacity()-cur.Allocated)
			next.Allocations++
			next.LastAlloc = now
			next.Nonce = rand.Uint64()
			next.Process = s.o.Process
			newRaw, err := next.MarshalBinary()
			if err != nil {
				return 0, 0, err
			}
			ok, err := s.st.CompareAndSwap(ctx, s.pKey, s.cCols, raw, newRaw, 0)
			raw = nil // after a lost swap the record is read again
			if errors.Is(err, storage.ErrUnknownOutcome) && ctx.Err() == nil {
				s.unknown.Add(1)
				got, found, rerr := s.st.Get(ctx, s.pKey, s.cCols)
				switch {
				case rerr != nil:
					err = fmt.Errorf("%w (re-read: %w)", err, rerr)
				case found && bytes.Equal(got, newRaw):
					ok, err = true, nil
				case found:
					// Not applied, or applied and already replaced by
					// another allocation: either way not ours to use.
					ok, err, raw = false, nil, got
				}
			}
			switch {
			case err == nil && ok:
				s.raw = newRaw
				s.lastSize.Store(int64(next.Allocated - cur.Allocated))
				s.lastFetch = now
				return cur.Allocated, next.Allocated, nil
			case err == nil:
				s.conflicts.Add(1)
			case errors.Is(err, storage.ErrUnavailable), errors.Is(err, storage.ErrUnknownOutcome) && ctx.Err() == nil:
				lastErr = err
			case ctx.Err() != nil:
				s.abandoned.Add(1)
				return 0, 0, fmt.Errorf("galloc: sequence %q: allocating a chunk: %w", s.name, err)
			default:
				return 0, 0, fmt.Errorf("galloc: sequence %q: allocating a chunk: %w", s.name, err)
			}
		}
		if attempt >= s.o.MaxAttempts {
			if lastErr != nil {
				return 0, 0, fmt.Errorf("galloc: sequence %q: %d attempts: %w", s.name, attempt, lastErr)
			}
			return 0, 0, fmt.Errorf("%w: sequence %q (%d attempts)", ErrContention, s.name, attempt)
		}
		if err := s.backoff(ctx, attempt); err != nil {
			return 0, 0, fmt.Errorf("galloc: sequence %q: allocating a chunk: %w", s.name, err)
		}
	}
}

// backoff sleeps a jittered exponential pause before attempt+1.
func (s *Sequence) backoff(ctx context.Context, attempt int) error {
	d := s.o.BackoffBase << min(attempt-1, 20)
	if d > s.o.BackoffMax || d <= 0 {
		d = s.o.BackoffMax
	}
	d = d/2 + rand.N(d/2+1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stats returns the sequence's counters.
func (s *Sequence) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cur.Load()
	used := min(c.next.Load(), c.hi) - c.lo
	return Stats{
		Fetches:         s.fetches.Load(),
		Conflicts:       s.conflicts.Load(),
		UnknownOutcomes: s.unknown.Load(),
		Abandoned:       s.abandoned.Load(),
		Waits:           s.waits.Load(),
		Issued:          s.mu.issuedDone + used,
		Held:            c.hi - c.lo - used + s.mu.reserved.Count,
		ChunkSize:       s.lastSize.Load(),
		Retired:         s.retired.Load(),
	}
}

// Chunks returns the chunks this process allocated, in allocation order
// (their First values increase).
func (s *Sequence) Chunks() []Chunk {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Chunk(nil), s.mu.chunks...)
}

// Close stops the background allocation and waits for it; calls waiting
// for a chunk and later calls fail with ErrClosed. The values still held
// are wasted. It does not close the storage and always returns nil.
func (s *Sequence) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.cancel()
	<-s.done
	s.mu.Lock()
	s.broadcastLocked()
	s.mu.Unlock()
	return nil
}

// ReadRecord reads the allocation record of sequence name from st; ok is
// false when the sequence does not exist.
func ReadRecord(ctx context.Context, st storage.Storage, name string) (r Record, ok bool, err error) {
	if err := validName(name); err != nil {
		return Record{}, false, err
	}
	raw, found, err := st.Get(ctx, PKey(name), StateCCols())
	if err != nil || !found {
		return Record{}, false, err
	}
	if err := r.UnmarshalBinary(raw); err != nil {
		return Record{}, false, fmt.Errorf("galloc: sequence %q: %w", name, err)
	}
	return r, true, nil
}
