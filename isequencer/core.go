package isequencer

import (
	"fmt"
	"slices"
)

// The worker's decisions, as a synchronous core: what to write next
// (prepareWrite), what a completed write releases (completeWrite), and how
// an actualization resets and rebuilds the state (beginActualize,
// endActualize). They make no storage call, start no goroutine and read no
// clock; the worker (worker.go) drives them, makes the storage calls and
// owns retries and time, as raft's RawNode returns a Ready that its driver
// writes and then Advances. The model test (core_test.go) drives them
// with no goroutine at all.
//
// Protocol: the worker calls prepareWrite only when no actualization is
// requested; a prepared write is either completed (completeWrite, after
// every value and the offset are stored) or abandoned by an actualization
// (beginActualize), never prepared twice.

// pendingWrite is one prepared write: batch and offset go to storage;
// completeWrite releases the rest.
type pendingWrite struct {
	batch  []SeqValue // sorted by key, unique keys (s.worker.wbuf)
	offset PLogOffset // the next PLog offset written with batch
	to     uint64     // the ring position after the values written
	mh     uint64     // the marks position after the marks covered
	claim  PLogOffset // the next offset of the last mark covered
	over   []SeqValue // the overflow values taken
	rec    bool       // batch holds the actualization result
	ws     []WSID     // batch's workspaces, for read-ahead (s.worker.wsBuf)
	known  bool       // ws is complete (read-ahead is on)
}

// prepareWrite returns the next write, or false if nothing is to be
// written: the actualization result (if not yet written) and the values of
// the transactions the watermark covers, with the next offset of the last
// of them, never the offset of a transaction whose values it does not
// write (see sharedState). Worker side.
func (s *Sequencer) prepareWrite() (pendingWrite, bool) {
	if !s.hasWork() {
		return pendingWrite{}, false
	}
	w := PLogOffset(s.shared.watermark.v.Load())
	mt := s.shared.markTailPub.v.Load()
	marks := s.shared.marks.Load() // after markTailPub: see sharedState
	pw := pendingWrite{to: s.worker.head, mh: s.worker.mhead, claim: s.worker.claim}
	for ; pw.mh != mt; pw.mh++ {
		m := *marks.at(pw.mh)
		if m.next > w {
			break
		}
		pw.to, pw.claim = m.tail, m.next
	}
	pw.offset = pw.claim
	s.mu.Lock()
	if len(s.mu.overflow) > 0 {
		if s.mu.overflowMaxNext <= w {
			pw.over = s.mu.overflow
			s.mu.overflow, s.mu.overflowTaken = nil, pw.over
			s.mu.overflowMinNext, s.mu.overflowMaxNext = 0, 0
		} else {
			// A tentative transaction in overflow is not written: claim
			// no offset at or past it.
			pw.offset = min(pw.offset, s.mu.overflowMinNext-1)
		}
	}
	rec := s.mu.recovered
	s.mu.Unlock()
	pw.offset = max(pw.offset, s.worker.writtenOffset)
	pw.rec = len(rec) > 0
	pw.batch = s.collect(rec, pw.to, pw.over)
	s.worker.wsBuf, pw.known = s.readAhead.workspacesOf(pw.batch, s.worker.wsBuf)
	pw.ws = s.worker.wsBuf
	return pw, true
}

// completeWrite releases what pw wrote: the ring up to pw.to, the marks up
// to pw.mh, the overflow values taken and the actualization result. Worker
// side, once pw's values and offset are stored.
func (s *Sequencer) completeWrite(pw *pendingWrite) {
	if invariants && pw.offset < s.worker.writtenOffset {
		panic(fmt.Sprintf("isequencer: invariant: written offset went back from %d to %d", s.worker.writtenOffset, pw.offset))
	}
	s.worker.writtenOffset = max(s.worker.writtenOffset, pw.offset)
	s.worker.head = pw.to
	s.readAhead.completed(pw.ws, pw.known) // before the head: see readahead.go
	s.shared.ringHead.v.Store(pw.to)
	s.mu.Lock()
	s.mu.overflowTaken = nil
	if pw.rec {
		s.mu.recovered = nil
		s.shared.hasRecovered.Store(false)
	}
	s.mu.Unlock()
	n := s.shared.overflowN.Add(-int64(len(pw.over)))
	s.worker.mhead, s.worker.claim = pw.mh, pw.claim
	s.shared.markHead.v.Store(pw.mh)
	if mt := s.shared.markTailPub.v.Load(); mt != pw.mh {
		n += int64(s.shared.marks.Load().at(mt-1).tail - pw.to) // after markTailPub: see sharedState
	}
	s.m.Unflushed(int(n))
}

// collect returns rec, ring[head:tail] and over as one batch sorted by key
// with unique keys, keeping the largest value of each. The result is in
// s.worker.wbuf.
func (s *Sequencer) collect(rec map[NumberKey]Number, tail uint64, over []SeqValue) []SeqValue {
	b := s.worker.wbuf[:0]
	for k, v := range rec {
		b = append(b, SeqValue{Key: k, Value: v})
	}
	values := s.shared.values.Load() // after markTailPub (tail): see sharedState
	for i := s.worker.head; i != tail; i++ {
		b = append(b, *values.at(i))
	}
	b = append(b, over...)
	slices.SortFunc(b, compareSeqValues)
	out := b[:0]
	for _, v := range b {
		if n := len(out); n > 0 && out[n-1].Key == v.Key {
			out[n-1].Value = max(out[n-1].Value, v.Value)
			continue
		}
		out = append(out, v)
	}
	s.worker.wbuf = b
	return out
}

// beginActualize takes the actualization request and drops every
// unwritten value and mark: the PLog holds their events (or they were
// cancelled) and endActualize rebuilds them. Worker side, while
// stateActualizing locks the caller out; it abandons a prepared write.
func (s *Sequencer) beginActualize() {
	s.shared.actualizeReq.Store(false)
	s.readAhead.actualizing()
	s.caller.tail, s.worker.head = 0, 0
	s.shared.ringHead.v.Store(0)
	s.caller.markTail, s.worker.mhead = 0, 0
	s.shared.markTailPub.v.Store(0)
	s.shared.markHead.v.Store(0)
	s.resetRings()
	s.mu.Lock()
	s.mu.overflow, s.mu.overflowTaken, s.mu.recovered = nil, nil, nil
	s.mu.overflowMinNext, s.mu.overflowMaxNext = 0, 0
	s.mu.Unlock()
	s.shared.overflowN.Store(0)
	s.shared.hasRecovered.Store(false)
	s.m.Unflushed(0)
}

// replay gathers what an actualization reads from the PLog from offset
// from on: the largest number per key, the events read and the last
// offset.
type replay struct {
	from, last PLogOffset
	events     int
	rec        map[NumberKey]Number
}

// reset starts the replay (again, after a failed read) from offset from.
func (r *replay) reset(from PLogOffset) {
	if r.rec == nil {
		r.rec = make(map[NumberKey]Number)
	}
	clear(r.rec)
	r.from, r.last, r.events = from, 0, 0
}

// add is ActualizeSequencesFromPLog's batcher: it takes the event at
// offset, which must follow the previous one.
func (r *replay) add(batch []SeqValue, offset PLogOffset) error {
	if offset < r.from || (r.events > 0 && offset <= r.last) {
		return fmt.Errorf("PLog event at offset %d out of order (from %d, previous %d)", offset, r.from, r.last)
	}
	for _, v := range batch {
		if v.Value > r.rec[v.Key] {
			r.rec[v.Key] = v.Value
		}
	}
	r.events++
	r.last = offset
	return nil
}

// endActualize installs what the actualization read: stored, the stored
// next PLog offset, and r, the replay from max(stored, 1) on. It takes
// r's numbers over as they are (the next write holds them and sorts its
// batch anyway, so nothing here delays the first Start) and sets the next
// offset Start returns (open then lets the caller in). It returns that
// offset and the numbers recovered. Worker side, after beginActualize.
func (s *Sequencer) endActualize(stored PLogOffset, r *replay) (next PLogOffset, recovered int) {
	from := max(stored, 1)
	next = from
	if r.events > 0 {
		next = r.last + 1
	}
	rec := r.rec
	r.rec = nil
	if invariants && next < s.worker.lastSeen {
		panic(fmt.Sprintf("isequencer: invariant: next PLog offset went back from %d to %d", s.worker.lastSeen, next))
	}
	s.worker.lastSeen = next
	s.readAhead.cacheMu.Lock()
	s.caller.cache.reset()
	s.readAhead.cacheMu.Unlock()
	s.caller.nextOffset = next
	s.mu.Lock()
	s.mu.recovered = rec
	s.mu.Unlock()
	s.shared.hasRecovered.Store(len(rec) > 0)
	s.worker.writtenOffset = from
	// Every event below next was read from the PLog: it is durable.
	s.worker.claim = next
	s.shared.watermark.v.Store(uint64(next))
	return next, len(rec)
}

// open lets the caller in after endActualize (and after the metrics that
// must precede a first Start are reported).
func (s *Sequencer) open() { s.shared.state.And(^stateActualizing) }
