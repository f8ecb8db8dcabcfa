package isequencer

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// run is the sequencer's only goroutine, the worker. It actualizes on
// request and otherwise writes accepted values. It owns s.worker and, while
// stateActualizing is set, s.caller. cleanup cancels ctx and waits for it to
// close done.
func (s *Sequencer) run() {
	defer close(s.done)
	for {
		switch {
		case s.shared.actualizeReq.Load():
			if !s.actualize() {
				return
			}
			continue
		case s.hasWork():
			if !s.flush() {
				return
			}
			continue
		}
		// Park. Flush wakes a parked worker; re-checking after announcing
		// it closes the window in which a Flush could miss it.
		s.shared.parked.v.Store(true)
		if s.shared.actualizeReq.Load() || s.hasWork() {
			s.shared.parked.v.Store(false)
			continue
		}
		select {
		case <-s.ctx.Done():
			return
		case <-s.signal:
		}
		s.shared.parked.v.Store(false)
	}
}

// hasWork reports whether there is something to write: the actualization
// result, or a mark the watermark covers.
func (s *Sequencer) hasWork() bool {
	// markTailPub before marks: see sharedState.
	return s.shared.hasRecovered.Load() || (s.worker.mhead != s.shared.markTailPub.v.Load() &&
		uint64(s.shared.marks.Load().at(s.worker.mhead).next) <= s.shared.watermark.v.Load())
}

// flush writes what is durable (and the actualization result, if not yet
// written) as one batch. It returns false if ctx is done.
func (s *Sequencer) flush() bool {
	if d := s.p.BatcherDelay; d > 0 {
		if !s.sleep(d) {
			return false
		}
	}
	if s.shared.actualizeReq.Load() {
		return true
	}
	// Write the values of the transactions the watermark covers and claim
	// their next offset, never the offset of a transaction whose values
	// are not written.
	w := PLogOffset(s.shared.watermark.v.Load())
	mt := s.shared.markTailPub.v.Load()
	marks := s.shared.marks.Load() // after markTailPub: see sharedState
	pos, mh, claim := s.worker.head, s.worker.mhead, s.worker.claim
	for ; mh != mt; mh++ {
		m := *marks.at(mh)
		if m.next > w {
			break
		}
		pos, claim = m.tail, m.next
	}
	offset := claim
	s.mu.Lock()
	var over []SeqValue
	if len(s.mu.overflow) > 0 {
		if s.mu.overflowMaxNext <= w {
			over = s.mu.overflow
			s.mu.overflow, s.mu.overflowTaken = nil, over
			s.mu.overflowMinNext, s.mu.overflowMaxNext = 0, 0
		} else {
			// A tentative transaction in overflow is not written: claim
			// no offset at or past it.
			offset = min(offset, s.mu.overflowMinNext-1)
		}
	}
	rec := s.mu.recovered
	s.mu.Unlock()
	offset = max(offset, s.worker.writtenOffset)

	if s.write(rec, pos, over, offset) {
		s.worker.mhead, s.worker.claim = mh, claim
		s.shared.markHead.v.Store(mh)
	}
	return s.ctx.Err() == nil
}

// write writes rec, ring[head:to] and over with next offset, retrying, and
// then releases what it wrote: the ring up to to, the overflow values taken
// and the actualization result. It returns false, releasing nothing, if ctx
// is done or an actualization was requested.
func (s *Sequencer) write(rec map[NumberKey]Number, to uint64, over []SeqValue, offset PLogOffset) bool {
	batch := s.collect(rec, to, over)
	var known bool
	s.worker.wsBuf, known = s.readAhead.workspacesOf(batch, s.worker.wsBuf)
	ok := s.retry(opWriteValues, func() (bool, error) {
		began := time.Now()
		err := s.p.SeqStorage.WriteValuesAndNextPLogOffset(batch, offset)
		if err == nil {
			s.m.Flushed(len(batch), time.Since(began))
			return false, nil
		}
		err = fmt.Errorf("writing %d values and next PLog offset %d: %w", len(batch), offset, err)
		// The values the storage reports written are durable: retry the
		// others only. The offset is retried with them, so it is written
		// only once every value below it is durable.
		var pe *PartialWriteError
		if errors.As(err, &pe) {
			n := len(batch)
			if b, ok := pe.failedOnly(batch); ok {
				batch = b
				return len(batch) < n, fmt.Errorf("%w (%d of %d values left)", err, len(batch), n)
			}
		}
		return false, err
	})
	if !ok {
		return false
	}
	if invariants && offset < s.worker.writtenOffset {
		panic(fmt.Sprintf("isequencer: invariant: written offset went back from %d to %d", s.worker.writtenOffset, offset))
	}
	s.worker.writtenOffset = max(s.worker.writtenOffset, offset)
	s.worker.head = to
	s.readAhead.completed(s.worker.wsBuf, known) // before the head: see readahead.go
	s.shared.ringHead.v.Store(to)
	s.mu.Lock()
	s.mu.overflowTaken = nil
	if len(rec) > 0 {
		s.mu.recovered = nil
		s.shared.hasRecovered.Store(false)
	}
	s.mu.Unlock()
	n := s.shared.overflowN.Add(-int64(len(over)))
	s.m.Unflushed(int(n + int64(s.shared.ringTail.v.Load()-to)))
	return true
}

// collect returns rec, ring[head:tail] and over as one batch sorted by key
// with unique keys, keeping the largest value of each. The result is in
// s.worker.wbuf.
func (s *Sequencer) collect(rec map[NumberKey]Number, tail uint64, over []SeqValue) []SeqValue {
	b := s.worker.wbuf[:0]
	for k, v := range rec {
		b = append(b, SeqValue{Key: k, Value: v})
	}
	values := s.shared.values.Load() // after ringTail (tail): see sharedState
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

// actualize rebuilds the sequencer's state from storage and the PLog tail.
// It returns false if ctx is done.
func (s *Sequencer) actualize() bool {
	began := time.Now()
	s.shared.actualizeReq.Store(false)
	s.readAhead.actualizing()
	// The caller is locked out (stateActualizing): reset both ends.
	s.caller.tail, s.worker.head = 0, 0
	s.shared.ringTail.v.Store(0)
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

	var stored PLogOffset
	if !s.retry(opReadNextPLogOffset, func() (_ bool, err error) {
		stored, err = s.p.SeqStorage.ReadNextPLogOffset()
		return false, err
	}) {
		return false
	}
	from := max(stored, 1)

	events := 0
	var last PLogOffset
	if !s.retry(opActualizeFromPLog, func() (bool, error) {
		if s.worker.replay == nil {
			s.worker.replay = make(map[NumberKey]Number)
		}
		clear(s.worker.replay)
		events, last = 0, 0
		return false, s.p.SeqStorage.ActualizeSequencesFromPLog(s.ctx, from, func(batch []SeqValue, offset PLogOffset) error {
			if offset < from || (events > 0 && offset <= last) {
				return fmt.Errorf("PLog event at offset %d out of order (from %d, previous %d)", offset, from, last)
			}
			for _, v := range batch {
				if v.Value > s.worker.replay[v.Key] {
					s.worker.replay[v.Key] = v.Value
				}
			}
			events++
			last = offset
			return nil
		})
	}) {
		return false
	}
	next := from
	if events > 0 {
		next = last + 1
	}
	if invariants && next < s.worker.lastSeen {
		panic(fmt.Sprintf("isequencer: invariant: next PLog offset went back from %d to %d", s.worker.lastSeen, next))
	}
	s.worker.lastSeen = next

	// Hand the replay map over as is: the flush that writes it sorts its
	// batch anyway, so nothing here delays the first Start.
	rec := s.worker.replay
	s.worker.replay = nil

	s.readAhead.cacheMu.Lock()
	s.caller.cache.reset()
	s.readAhead.cacheMu.Unlock()
	s.caller.nextOffset = next
	s.mu.Lock()
	s.mu.recovered = rec
	s.mu.Unlock()
	s.shared.hasRecovered.Store(len(rec) > 0)
	s.worker.writtenOffset = max(stored, 1)
	// Every event below next was read from the PLog: it is durable.
	s.worker.claim = next
	s.shared.watermark.v.Store(uint64(next))
	took := time.Since(began)
	// Reported before Start can succeed, so that a caller's first
	// transaction sees the actualization counted.
	s.m.Actualized(events, took)
	s.shared.state.And(^stateActualizing)
	s.p.Logger.Info("isequencer: actualized",
		"stored_next_plog_offset", stored, "events_replayed", events,
		"numbers_recovered", len(rec), "next_plog_offset", next, "took", took)
	return true
}

// retry calls f until it succeeds, backing off from RetryDelay to
// MaxRetryDelay. A failed call that made progress (f reports it: a partial
// write) restarts the backoff. It returns false if ctx is done or (for
// writes) an actualization was requested, which makes the write moot.
func (s *Sequencer) retry(op string, f func() (progress bool, err error)) bool {
	var delay time.Duration
	for attempt := 1; ; attempt++ {
		progress, err := f()
		if err == nil {
			if attempt > 1 {
				s.p.Logger.Info("isequencer: storage call succeeded after retries", "op", op, "attempts", attempt)
			}
			return true
		}
		if s.ctx.Err() != nil {
			return false
		}
		s.m.StorageError(op)
		if attempt == 1 || progress {
			delay = s.p.RetryDelay
		} else {
			delay = min(2*delay, s.p.MaxRetryDelay)
		}
		wait := jitter(delay)
		s.p.Logger.Warn("isequencer: storage call failed, will retry",
			"op", op, "attempt", attempt, "retry_in", wait, "err", err)
		if !s.sleep(wait) {
			return false
		}
		if op == opWriteValues && s.shared.actualizeReq.Load() {
			return false
		}
	}
}

// jitter returns a wait drawn uniformly from [d/2, d].
func jitter(d time.Duration) time.Duration {
	if d < 2 {
		return d
	}
	return d - rand.N(d/2+1)
}

// sleep waits d or until ctx is done (false), or until an actualization
// is requested during the wait (true, early).
func (s *Sequencer) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return false
		case <-t.C:
			return true
		case <-s.signal:
			if s.shared.actualizeReq.Load() {
				return true
			}
		}
	}
}
