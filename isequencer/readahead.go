package isequencer

import (
	"slices"
	"sync"
	"sync/atomic"
)

// Read-ahead: ReadAhead reads a cold workspace's stored numbers outside of
// the caller's transaction (the caller's lock), so that the miss in Next
// that follows uses them instead of reading under the lock.
//
// A stored value read at time t0 may be used at time t1 only if every
// value of the workspace not in it is in the overlay taken at t1. The
// values missing from it are those whose write had not completed when the
// read began; at t1 each of them is either still unwritten (in the ring,
// the overflow or the actualization result: in the overlay, which Next
// takes first) or was written by a write that completed after t0. So the
// read is used only if no write that completed since t0 may have held the
// workspace, and no actualization began since t0 (it resets the ring and
// its positions):
//
//   - the worker counts completed writes (writeGen) and, for the last
//     listWindow of them, keeps the sorted list of the workspaces each
//     wrote (recorded before the count and the ring head are published);
//   - ReadAhead notes writeGen and actGen before it reads;
//   - Next takes the overlay (loading the ring head), then loads writeGen
//     and looks the workspace up in the lists of the writes since: a write
//     that released values the overlay no longer holds is one of them.
//
// The lists are exact: a read-ahead is read again only if a write since
// held its workspace, however many workspaces a write holds. A write
// recorded while read-ahead was off has no list and invalidates every
// read-ahead that spans it.

// listWindow is the number of completed writes whose lists are kept: a
// read-ahead older than that is read again.
const listWindow = 32

// listKeepCap is the capacity up to which a list's backing array is
// reused whatever the next list's length: above it, and above 4 times the
// next list's length, the array is dropped for one sized to the list, so
// that a huge write's list does not hold its memory for good.
const listKeepCap = 64

// maxReadAheads bounds the read-ahead results waiting for their
// transaction; ReadAhead drops its result beyond it.
const maxReadAheads = 4096

// writeRecord lists the workspaces of one completed write.
type writeRecord struct {
	gen   uint64 // the writeGen the write completed as
	known bool   // ws lists every workspace of the write
	ws    []WSID // ascending, distinct
}

// holds reports whether the write may have held ws.
func (r *writeRecord) holds(ws WSID) bool {
	if !r.known {
		return true
	}
	_, found := slices.BinarySearch(r.ws, ws)
	return found
}

// readAheadEntry is a read-ahead result waiting for its transaction.
type readAheadEntry struct {
	kind     WSKind
	nums     []Number
	writeGen uint64 // writeGen before the read
	actGen   uint64 // actGen before the read
}

// readAheadState is shared by ReadAhead (any goroutine), the caller (Next)
// and the worker.
type readAheadState struct {
	on atomic.Bool // set by the first ReadAhead: the worker keeps lists
	// read, used and stale count the reads ReadAhead made, those Next
	// used, and those it found stale (and read again).
	read, used, stale atomic.Int64
	writeGen          atomic.Uint64 // completed writes, written by the worker
	actGen            atomic.Uint64 // actualizations begun, written by the worker

	// cacheMu guards the cache's membership against ReadAhead's look-up:
	// the caller (or the actualizing worker) holds it to add, remove or
	// reset entries; ReadAhead holds it to read.
	cacheMu sync.RWMutex

	mu      sync.Mutex
	entries map[WSID]readAheadEntry
	written []writeRecord // ring of listWindow records, by gen; nil until on
	// closed (under mu) refuses new reads: cleanup sets it, then waits for
	// calls, the reads in flight (Add only under mu while !closed).
	closed bool
	calls  sync.WaitGroup
}

// begin registers a read; false once the sequencer is closing.
func (ra *readAheadState) begin() bool {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	if ra.closed {
		return false
	}
	ra.calls.Add(1)
	return true
}

// close refuses new reads and returns a channel closed once the reads in
// flight have returned. cleanup calls it.
func (ra *readAheadState) close() <-chan struct{} {
	ra.mu.Lock()
	ra.closed = true
	ra.mu.Unlock()
	done := make(chan struct{})
	go func() {
		ra.calls.Wait()
		close(done)
	}()
	return done
}

// Cached reports whether workspace wsID's numbers are in the sequencer's
// cache: a transaction of it reads nothing from storage, and ReadAhead of
// it returns at once. Any goroutine may call it; the answer may be stale
// by the time it is used.
func (s *Sequencer) Cached(wsID WSID) bool {
	s.readAhead.cacheMu.RLock()
	defer s.readAhead.cacheMu.RUnlock()
	return s.caller.cache.has(wsID)
}

// ReadAhead implements IReadAhead.
func (s *Sequencer) ReadAhead(wsKind WSKind, wsID WSID) {
	k := s.kinds[wsKind]
	if k == nil || wsID == 0 {
		return
	}
	ra := &s.readAhead
	act := ra.actGen.Load()
	if s.shared.state.Load() != 0 {
		return
	}
	ra.cacheMu.RLock()
	cached := s.caller.cache.has(wsID)
	ra.cacheMu.RUnlock()
	if cached {
		return
	}
	if !ra.begin() {
		return
	}
	defer ra.calls.Done()
	ra.on.Store(true)
	gen := ra.writeGen.Load()
	nums, err := s.p.SeqStorage.ReadNumbers(wsID, k.ids)
	if err != nil || len(nums) != len(k.ids) {
		// Next reads (and reports) it again.
		return
	}
	ra.read.Add(1)
	ra.mu.Lock()
	defer ra.mu.Unlock()
	if ra.entries == nil {
		ra.entries = make(map[WSID]readAheadEntry)
	}
	if len(ra.entries) >= maxReadAheads {
		ra.pruneLocked()
		if len(ra.entries) >= maxReadAheads {
			return
		}
	}
	ra.entries[wsID] = readAheadEntry{kind: wsKind, nums: nums, writeGen: gen, actGen: act}
}

// take returns the read-ahead numbers of ws if they are current. Caller
// side, after the overlay of ws was taken (see the top of this file).
func (ra *readAheadState) take(ws WSID, kind WSKind) ([]Number, bool) {
	if !ra.on.Load() {
		return nil, false
	}
	ra.mu.Lock()
	defer ra.mu.Unlock()
	e, ok := ra.entries[ws]
	if !ok {
		return nil, false
	}
	delete(ra.entries, ws)
	if e.kind != kind || !ra.currentLocked(e) {
		ra.stale.Add(1)
		return nil, false
	}
	for g := e.writeGen + 1; g <= ra.writeGen.Load(); g++ {
		if r := &ra.written[g%listWindow]; r.gen != g || r.holds(ws) {
			ra.stale.Add(1)
			return nil, false
		}
	}
	ra.used.Add(1)
	return e.nums, true
}

// currentLocked reports whether e may still be current: no actualization
// began since its read and the writes since are within the window.
func (ra *readAheadState) currentLocked(e readAheadEntry) bool {
	now := ra.writeGen.Load()
	return ra.actGen.Load() == e.actGen && now-e.writeGen <= listWindow &&
		(now == e.writeGen || ra.written != nil)
}

// pruneLocked drops the entries that can no longer be current.
func (ra *readAheadState) pruneLocked() {
	for ws, e := range ra.entries {
		if !ra.currentLocked(e) {
			delete(ra.entries, ws)
		}
	}
}

// workspacesOf appends the workspaces of batch (sorted by key) to dst[:0],
// ascending and distinct, and reports whether read-ahead is on (else it
// appends nothing and the write is recorded as unknown). Worker side,
// before the write.
func (ra *readAheadState) workspacesOf(batch []SeqValue, dst []WSID) ([]WSID, bool) {
	dst = dst[:0]
	if !ra.on.Load() {
		return dst, false
	}
	for i, v := range batch { // sorted by key: a workspace's values are adjacent
		if i == 0 || v.Key.WSID != dst[len(dst)-1] {
			dst = append(dst, v.Key.WSID)
		}
	}
	return dst, true
}

// completed records a write that completed, with its workspaces (copied
// into the slot's list, reusing its backing array unless that is much
// larger than ws: see listKeepCap). Worker side, before the ring head that
// releases the write's values is published.
func (ra *readAheadState) completed(ws []WSID, known bool) {
	gen := ra.writeGen.Load() + 1
	if ra.on.Load() {
		ra.mu.Lock()
		if ra.written == nil {
			ra.written = make([]writeRecord, listWindow)
		}
		r := &ra.written[gen%listWindow]
		if c := cap(r.ws); c > listKeepCap && c > 4*len(ws) {
			r.ws = nil
		}
		r.gen, r.known, r.ws = gen, known, append(r.ws[:0], ws...)
		ra.mu.Unlock()
	}
	ra.writeGen.Store(gen)
}

// actualizing invalidates every read-ahead begun before. Worker side, at
// the start of an actualization.
func (ra *readAheadState) actualizing() { ra.actGen.Add(1) }
