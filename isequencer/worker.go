package isequencer

import (
	"fmt"
	"slices"
	"time"
)

// run is the sequencer's only goroutine. It actualizes on request and
// otherwise writes accepted values. It owns wbuf and replay, and, while
// stateActualizing is set, the caller-side fields. cleanup cancels ctx and
// waits for it.
func (s *sequencer) run() {
	defer s.wg.Done()
	for {
		s.mu.Lock()
		act := s.mu.actualizeReq
		work := len(s.mu.pending) > 0 || len(s.mu.recovered) > 0 || s.mu.pendingOffset > s.mu.writtenOffset
		s.mu.Unlock()
		switch {
		case act:
			if !s.actualize() {
				return
			}
			continue
		case work:
			if !s.flush() {
				return
			}
			continue
		}
		select {
		case <-s.ctx.Done():
			return
		case <-s.signal:
		}
	}
}

// flush writes what is pending (and the actualization result, if not yet
// written) as one batch. It returns false if ctx is done.
func (s *sequencer) flush() bool {
	if d := s.p.BatcherDelay; d > 0 {
		if !s.sleep(d) {
			return false
		}
	}
	s.mu.Lock()
	if s.mu.actualizeReq {
		s.mu.Unlock()
		return true
	}
	raw := s.mu.pending
	s.mu.inTransit = raw
	s.mu.pending = s.mu.spare[:0]
	s.mu.spare = nil
	rec := s.mu.recovered
	offset := s.mu.pendingOffset
	s.mu.Unlock()

	batch := s.dedupe(rec, raw)
	ok := s.retry(opWriteValues, func() error {
		began := time.Now()
		if err := s.p.SeqStorage.WriteValuesAndNextPLogOffset(batch, offset); err != nil {
			return fmt.Errorf("writing %d values and next PLog offset %d: %w", len(batch), offset, err)
		}
		s.m.Flushed(len(batch), time.Since(began))
		return nil
	})

	s.mu.Lock()
	s.mu.inTransit = nil
	s.mu.spare = raw[:0]
	if ok {
		if invariants && offset < s.mu.writtenOffset {
			panic(fmt.Sprintf("isequencer: invariant: written offset went back from %d to %d", s.mu.writtenOffset, offset))
		}
		s.mu.writtenOffset = offset
		if len(rec) > 0 {
			s.mu.recovered = nil
		}
	}
	s.mu.Unlock()
	if ok {
		s.m.Unflushed(int(s.unflushed.Add(-int64(len(raw)))))
	}
	return s.ctx.Err() == nil
}

// dedupe returns the union of rec (sorted, unique) and raw as one batch
// with unique keys, keeping the largest value of each. The result is in
// s.wbuf.
func (s *sequencer) dedupe(rec, raw []SeqValue) []SeqValue {
	b := append(append(s.wbuf[:0], rec...), raw...)
	slices.SortFunc(b, compareSeqValues)
	out := b[:0]
	for _, v := range b {
		if n := len(out); n > 0 && out[n-1].Key == v.Key {
			out[n-1].Value = max(out[n-1].Value, v.Value)
			continue
		}
		out = append(out, v)
	}
	s.wbuf = b
	return out
}

// actualize rebuilds the sequencer's state from storage and the PLog tail.
// It returns false if ctx is done.
func (s *sequencer) actualize() bool {
	began := time.Now()
	s.mu.Lock()
	s.mu.actualizeReq = false
	s.mu.pending = s.mu.pending[:0]
	s.mu.pendingOffset = 0
	s.mu.recovered = nil
	s.mu.Unlock()
	s.unflushed.Store(0)
	s.m.Unflushed(0)

	var stored PLogOffset
	if !s.retry(opReadNextPLogOffset, func() (err error) {
		stored, err = s.p.SeqStorage.ReadNextPLogOffset()
		return err
	}) {
		return false
	}
	from := max(stored, 1)

	events := 0
	var last PLogOffset
	if !s.retry(opActualizeFromPLog, func() error {
		clear(s.replay)
		events, last = 0, 0
		return s.p.SeqStorage.ActualizeSequencesFromPLog(s.ctx, from, func(batch []SeqValue, offset PLogOffset) error {
			if offset < from || (events > 0 && offset <= last) {
				return fmt.Errorf("PLog event at offset %d out of order (from %d, previous %d)", offset, from, last)
			}
			for _, v := range batch {
				if v.Value > s.replay[v.Key] {
					s.replay[v.Key] = v.Value
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
	if invariants && next < s.lastSeen {
		panic(fmt.Sprintf("isequencer: invariant: next PLog offset went back from %d to %d", s.lastSeen, next))
	}
	s.lastSeen = next

	rec := make([]SeqValue, 0, len(s.replay))
	for k, v := range s.replay {
		rec = append(rec, SeqValue{Key: k, Value: v})
	}
	slices.SortFunc(rec, compareSeqValues)
	clear(s.replay)

	s.cache.reset()
	s.nextOffset = next
	s.mu.Lock()
	s.mu.recovered = rec
	s.mu.pendingOffset = next
	s.mu.writtenOffset = max(stored, 1)
	s.mu.Unlock()
	took := time.Since(began)
	s.state.And(^stateActualizing)
	s.m.Actualized(events, took)
	s.p.Logger.Info("isequencer: actualized",
		"stored_next_plog_offset", stored, "events_replayed", events,
		"numbers_recovered", len(rec), "next_plog_offset", next, "took", took)
	return true
}

// retry calls f until it succeeds, backing off from RetryDelay to
// MaxRetryDelay. It returns false if ctx is done or (for writes) an
// actualization was requested, which makes the write moot.
func (s *sequencer) retry(op string, f func() error) bool {
	delay := s.p.RetryDelay
	for attempt := 1; ; attempt++ {
		err := f()
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
		s.p.Logger.Warn("isequencer: storage call failed, will retry",
			"op", op, "attempt", attempt, "retry_in", delay, "err", err)
		if !s.sleep(delay) {
			return false
		}
		if op == opWriteValues {
			s.mu.Lock()
			moot := s.mu.actualizeReq
			s.mu.Unlock()
			if moot {
				return false
			}
		}
		delay = min(2*delay, s.p.MaxRetryDelay)
	}
}

// sleep waits d or until ctx is done (false), or until an actualization
// is requested during the wait (true, early).
func (s *sequencer) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return false
		case <-t.C:
			return true
		case <-s.signal:
			s.mu.Lock()
			act := s.mu.actualizeReq
			s.mu.Unlock()
			if act {
				return true
			}
		}
	}
}
