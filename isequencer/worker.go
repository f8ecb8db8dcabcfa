package isequencer

import (
	"errors"
	"fmt"
	"math/rand/v2"
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

// hasWork reports whether there is something to write now: the
// actualization result, or a mark the watermark covers once the flush
// policy (Params.FlushAfterEvents) says it is time.
func (s *Sequencer) hasWork() bool {
	if s.shared.hasRecovered.Load() {
		return true
	}
	mt := s.shared.markTailPub.v.Load()
	if s.worker.mhead == mt {
		return false
	}
	marks := s.shared.marks.Load() // after markTailPub: see sharedState
	w := s.shared.watermark.v.Load()
	if uint64(marks.at(s.worker.mhead).next) > w {
		return false
	}
	return s.flushDue(marks, mt, w)
}

// flushDue is the flush policy, for a write that has a covered mark: the
// window of durable events past the written offset reaches
// FlushAfterEvents, or the transactions waiting or their values reach a
// quarter of MaxNumUnflushedValues, or values overflowed the ring.
func (s *Sequencer) flushDue(marks *ring[txMark], mt, w uint64) bool {
	after := uint64(s.p.FlushAfterEvents)
	if after <= 1 || w >= uint64(s.worker.writtenOffset)+after {
		return true
	}
	quarter := max(uint64(s.p.MaxNumUnflushedValues)/4, 1)
	return mt-s.worker.mhead >= quarter || marks.at(mt-1).tail-s.worker.head >= quarter ||
		s.shared.overflowN.Load() > 0
}

// flush writes what prepareWrite returns, retrying, and completes it. It
// returns false if ctx is done.
func (s *Sequencer) flush() bool {
	if d := s.p.BatcherDelay; d > 0 {
		if !s.sleep(d) {
			return false
		}
	}
	if s.shared.actualizeReq.Load() {
		return true
	}
	pw, ok := s.prepareWrite()
	if !ok {
		return true
	}
	if s.write(&pw) {
		s.completeWrite(&pw)
	}
	return s.ctx.Err() == nil
}

// write stores pw's batch and offset, retrying. It returns false if ctx is
// done or an actualization was requested (which abandons pw).
func (s *Sequencer) write(pw *pendingWrite) bool {
	batch, offset := pw.batch, pw.offset
	return s.retry(opWriteValues, func() (bool, error) {
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
}

// actualize rebuilds the sequencer's state from storage and the PLog tail
// (beginActualize, the reads, endActualize). It returns false if ctx is
// done.
func (s *Sequencer) actualize() bool {
	began := time.Now()
	s.beginActualize()
	var stored PLogOffset
	if !s.retry(opReadNextPLogOffset, func() (_ bool, err error) {
		stored, err = s.p.SeqStorage.ReadNextPLogOffset()
		return false, err
	}) {
		return false
	}
	r := &s.worker.replay
	if !s.retry(opActualizeFromPLog, func() (bool, error) {
		r.reset(max(stored, 1))
		return false, s.p.SeqStorage.ActualizeSequencesFromPLog(s.ctx, r.from, r.add)
	}) {
		return false
	}
	events := r.events
	next, recovered := s.endActualize(stored, r)
	took := time.Since(began)
	// Reported before Start can succeed, so that a caller's first
	// transaction sees the actualization counted.
	s.m.Actualized(events, took)
	s.open()
	s.p.Logger.Info("isequencer: actualized",
		"stored_next_plog_offset", stored, "events_replayed", events,
		"numbers_recovered", recovered, "next_plog_offset", next, "took", took)
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
