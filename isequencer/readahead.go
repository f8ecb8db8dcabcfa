package isequencer

import (
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
//     filterWindow of them, keeps a filter of the workspaces each wrote
//     (recorded before the count and the ring head are published);
//   - ReadAhead notes writeGen and actGen before it reads;
//   - Next takes the overlay (loading the ring head), then loads writeGen
//     and checks the filters of the writes since: a write that released
//     values the overlay no longer holds is one of them.
//
// A filter may report a workspace it does not hold (then Next reads
// again), never the reverse; a write recorded while read-ahead was off has
// no filter and invalidates every read-ahead that spans it.

// filterWindow is the number of completed writes whose filters are kept: a
// read-ahead older than that is read again.
const filterWindow = 32

// maxReadAheads bounds the read-ahead results waiting for their
// transaction; ReadAhead drops its result beyond it.
const maxReadAheads = 4096

// wsFilter is a Bloom filter of 1,024 bits over WSIDs, two probes.
type wsFilter [16]uint64

func wsProbes(ws WSID) (uint64, uint64) {
	h := uint64(ws) * 0x9e3779b97f4a7c15
	return (h >> 54) & 1023, (h >> 44) & 1023
}

func (f *wsFilter) add(ws WSID) {
	a, b := wsProbes(ws)
	f[a>>6] |= 1 << (a & 63)
	f[b>>6] |= 1 << (b & 63)
}

func (f *wsFilter) mayHold(ws WSID) bool {
	a, b := wsProbes(ws)
	return f[a>>6]&(1<<(a&63)) != 0 && f[b>>6]&(1<<(b&63)) != 0
}

// writeRecord is the filter of one completed write.
type writeRecord struct {
	gen    uint64 // the writeGen the write completed as
	known  bool   // the filter holds every workspace of the write
	filter wsFilter
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
	on atomic.Bool // set by the first ReadAhead: the worker keeps filters
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
	written []writeRecord // ring of filterWindow records, by gen; nil until on
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
		if r := &ra.written[g%filterWindow]; r.gen != g || !r.known || r.filter.mayHold(ws) {
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
	return ra.actGen.Load() == e.actGen && now-e.writeGen <= filterWindow &&
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

// filterOf returns the filter of the workspaces of batch, and whether
// read-ahead is on (else the filter is empty and the write is recorded
// as unknown). Worker side, before the write.
func (ra *readAheadState) filterOf(batch []SeqValue) (f wsFilter, known bool) {
	if !ra.on.Load() {
		return f, false
	}
	var last WSID
	for i, v := range batch { // sorted by key: a workspace's values are adjacent
		if i == 0 || v.Key.WSID != last {
			f.add(v.Key.WSID)
			last = v.Key.WSID
		}
	}
	return f, true
}

// completed records a write that completed, with its filter. Worker side,
// before the ring head that releases the write's values is published.
func (ra *readAheadState) completed(f *wsFilter, known bool) {
	gen := ra.writeGen.Load() + 1
	if ra.on.Load() {
		ra.mu.Lock()
		if ra.written == nil {
			ra.written = make([]writeRecord, filterWindow)
		}
		ra.written[gen%filterWindow] = writeRecord{gen: gen, known: known, filter: *f}
		ra.mu.Unlock()
	}
	ra.writeGen.Store(gen)
}

// actualizing invalidates every read-ahead begun before. Worker side, at
// the start of an actualization.
func (ra *readAheadState) actualizing() { ra.actGen.Add(1) }
