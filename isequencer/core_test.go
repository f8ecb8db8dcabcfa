package isequencer

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// syncWorker drives a sequencer's core (core.go) the way the worker
// goroutine does, with no goroutine and no clock: each step makes at most
// one attempt of one storage call, and a failed call is attempted again at
// a later step, so that the caller's calls interleave with the worker's at
// every point the model chooses.
type syncWorker struct {
	s  *Sequencer
	st ISeqStorage
	pw *pendingWrite // prepared, not yet stored
	// stored, actualizing: the first read of an actualization succeeded.
	stored      PLogOffset
	readStored  bool
	actualizing bool
}

// newSyncSequencer returns a sequencer whose worker is not started.
func newSyncSequencer(t *testing.T, st ISeqStorage, tune func(*Params)) *syncWorker {
	t.Helper()
	p := Params{SeqTypes: testSeqTypes(), SeqStorage: st, Logger: quietLogger()}
	if tune != nil {
		tune(&p)
	}
	p.EnsureDefaults()
	require.NoError(t, p.Validate())
	s := newSequencer(p)
	s.shared.state.Store(stateActualizing)
	s.shared.actualizeReq.Store(true)
	return &syncWorker{s: s, st: st}
}

// step runs one unit of the worker's work; it reports whether it did
// anything.
func (w *syncWorker) step() bool {
	s := w.s
	if s.shared.actualizeReq.Load() {
		// An actualization abandons a prepared write and restarts.
		w.pw, w.readStored, w.actualizing = nil, false, true
		s.beginActualize()
	}
	if w.actualizing {
		if !w.readStored {
			stored, err := w.st.ReadNextPLogOffset()
			if err != nil {
				return true
			}
			w.stored, w.readStored = stored, true
			return true
		}
		var r replay
		r.reset(max(w.stored, 1))
		if err := w.st.ActualizeSequencesFromPLog(context.Background(), r.from, r.add); err != nil {
			return true
		}
		s.endActualize(w.stored, &r)
		s.open()
		w.actualizing = false
		return true
	}
	if w.pw == nil {
		pw, ok := s.prepareWrite()
		if !ok {
			return false
		}
		w.pw = &pw
	}
	err := w.st.WriteValuesAndNextPLogOffset(w.pw.batch, w.pw.offset)
	if err == nil {
		s.completeWrite(w.pw)
		w.pw = nil
		return true
	}
	var pe *PartialWriteError
	if errors.As(err, &pe) {
		w.pw.batch, _ = pe.failedOnly(w.pw.batch)
	}
	return true
}

// start steps the worker until Start succeeds.
func (w *syncWorker) start(t *testing.T, kind WSKind, ws WSID) PLogOffset {
	t.Helper()
	for range 100_000 {
		if off, ok := w.s.Start(kind, ws); ok {
			return off
		}
		w.step()
	}
	t.Fatal("Start stayed busy for 100,000 worker steps")
	return 0
}

// TestCoreModel drives the core synchronously with a seeded random
// sequence of transactions (flushed, cancelled, failed), Durable reports,
// restarts, storage faults (failed, applied-then-failed and partial
// writes), read-aheads and worker steps at any point, with and without
// GroupCommit, and checks every number and offset against a model of what
// is durable, as TestModel does, but deterministically: a seed replays the
// same run. Each run draws tiny to medium MaxNumUnflushedValues and some
// transactions larger than the ring's free space, and fails unless it
// reached the ring's growth, the overflow path and a read-ahead that Next
// used (and one it found stale).
func TestCoreModel(t *testing.T) {
	for _, group := range []bool{false, true} {
		name := "flush"
		if group {
			name = "groupcommit"
		}
		t.Run(name, func(t *testing.T) {
			seed := *modelSeed
			if seed == 0 {
				seed = rand.Uint64()
			}
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("replay with: go test -run 'TestCoreModel/%s$' -model.seed %d ./isequencer/", name, seed)
				}
			})
			runCoreModel(t, seed, group, *modelSteps)
		})
	}
}

func runCoreModel(t *testing.T, seed uint64, group bool, steps int) {
	rng := rand.New(rand.NewPCG(seed, 1))
	st := &flakyStorage{mockStorage: newMockStorage(), rng: rand.New(rand.NewPCG(seed, 2))}
	tune := func(p *Params) {
		switch rng.IntN(3) {
		case 0:
			p.MaxNumUnflushedValues = 1 + rng.IntN(4)
		case 1:
			p.MaxNumUnflushedValues = 1 + rng.IntN(40)
		default:
			p.MaxNumUnflushedValues = 1 + rng.IntN(800)
		}
		p.LRUCacheSize = 3 * (1 + rng.IntN(30))
		if rng.IntN(3) == 0 {
			// A workspace or two: cold workspaces with values in the
			// ring, which a read-ahead races with their write.
			p.LRUCacheSize = 3 * (1 + rng.IntN(2))
		}
		p.GroupCommit = group
		if rng.IntN(2) == 0 {
			// The replay-length flush policy: writes wait for a window.
			p.FlushAfterEvents = 2 + rng.IntN(64)
		}
	}
	w := newSyncSequencer(t, st, tune)
	durable := map[NumberKey]Number{} // largest number in a durable event
	issued := map[NumberKey]Number{}  // largest number issued since the last actualization
	var lastDurable PLogOffset
	type tx struct {
		off   PLogOffset
		taken []SeqValue
	}
	var pending []tx // GroupCommit: flushed, event not yet written
	counts := map[string]int{}
	forget := func() {
		pending = pending[:0]
		clear(issued)
		for k, v := range durable {
			issued[k] = v
		}
	}
	writeEvent := func(x tx) {
		require.True(t, st.writeEvent(x.off, x.taken), "PLog offset %d reused (seed %d)", x.off, seed)
		lastDurable = x.off
		for _, v := range x.taken {
			durable[v.Key] = max(durable[v.Key], v.Value)
		}
	}
	// writeGroup writes the events of the pending transactions, or of the
	// first of them (Durable reports a group's events as they become
	// durable, in order), and reports them durable.
	writeGroup := func() {
		n := len(pending)
		if n > 1 && rng.IntN(3) == 0 {
			n = 1 + rng.IntN(n-1)
			counts["groupPrefixes"]++
		}
		for _, x := range pending[:n] {
			writeEvent(x)
		}
		pending = append(pending[:0], pending[n:]...)
		w.s.Durable(lastDurable + 1)
		counts["groups"]++
	}
	// The stored next offset never claims an event not durable, the
	// stored numbers cover every event it claims, and no number is stored
	// before an event holding it is durable.
	checkStored := func(step int) {
		nums, next := st.stored()
		require.LessOrEqual(t, next, lastDurable+1, "step %d: stored next offset %d past the last durable event %d (seed %d)", step, next, lastDurable, seed)
		for k, v := range nums {
			if v > durable[k] {
				t.Fatalf("step %d: %v=%d stored, the largest in a durable event is %d (seed %d)", step, k, v, durable[k], seed)
			}
		}
		st.mu.Lock()
		defer st.mu.Unlock()
		for o := max(next, 1) - 1; o >= 1 && o+64 >= next; o-- {
			for _, v := range st.plog[o] {
				if nums[v.Key] < v.Value { // not require: this loop is the test's hot path
					t.Fatalf("step %d: stored next offset %d claims offset %d with %v=%d, stored %d (seed %d)", step, next, o, v.Key, v.Value, nums[v.Key], seed)
				}
			}
		}
	}
	kinds := []WSKind{kindApp, kindUser}
	seqs := []SeqID{seqWLog, seqRecord, seqCDoc}
	// readAheadsOf adds the read-aheads w's sequencer made, used and found
	// stale to counts (once, as w is dropped or at the end).
	readAheadsOf := func(w *syncWorker) {
		ra := &w.s.readAhead
		counts["readAheads"] += int(ra.read.Load())
		counts["readAheadsUsed"] += int(ra.used.Load())
		counts["readAheadsStale"] += int(ra.stale.Load())
	}
	readAhead := func() {
		w.s.ReadAhead(kinds[rng.IntN(len(kinds))], WSID(1+rng.IntN(40)))
	}
	recent := []WSID{1, 2, 3, 4} // workspaces of the last transactions
	for step := range steps {
		checkStored(step)
		switch r := rng.IntN(100); {
		case r < 2:
			readAheadsOf(w)
			w = newSyncSequencer(t, st, tune) // a crash: the old one is dropped
			forget()
			counts["restarts"]++
			continue
		case r < 4:
			readAhead()
			continue
		case r < 5:
			st.setRate([]float64{0, 0, 0.1, 0.4}[rng.IntN(4)])
			continue
		case r < 40:
			w.step()
			continue
		case group && r < 50 && len(pending) > 0:
			writeGroup()
			continue
		}
		ws, kind := WSID(1+rng.IntN(40)), kinds[rng.IntN(len(kinds))]
		if rng.IntN(2) == 0 {
			ws = recent[rng.IntN(len(recent))] // perhaps with values in the ring
		}
		recent[step%len(recent)] = ws
		if rng.IntN(2) == 0 {
			// Read ahead the transaction's workspace (as a caller does
			// before it takes its lock), perhaps with the worker
			// writing in between.
			w.s.ReadAhead(kind, ws)
			for range rng.IntN(4) {
				w.step()
			}
		}
		off, ok := w.s.Start(kind, ws)
		if !ok {
			if group && len(pending) > 0 {
				// Busy, perhaps with tentative values: the group's
				// write ends, or fails.
				if rng.IntN(2) == 0 {
					w.s.Actualize()
					forget()
					counts["actualizations"]++
					continue
				}
				writeGroup()
				continue
			}
			off = w.start(t, kind, ws)
		}
		require.Greater(t, off, lastDurable, "step %d (seed %d)", step, seed)
		if n := len(pending); n > 0 {
			require.Equal(t, pending[n-1].off+1, off, "step %d: offsets within a group are consecutive (seed %d)", step, seed)
		}
		var taken []SeqValue
		before := map[NumberKey]Number{} // issued before this transaction, per key it took
		failed := false
		size := rng.IntN(4)
		if rng.IntN(50) == 0 {
			// Larger than the ring's initial size, or than its free
			// space at its limit (the overflow path).
			size = 100 + rng.IntN(1000)
		}
		for range size {
			if rng.IntN(4) == 0 && (size < 4 || rng.IntN(64) == 0) {
				w.step() // the worker runs while the transaction is open
			}
			if rng.IntN(8) == 0 && (size < 4 || rng.IntN(64) == 0) {
				readAhead() // a read-ahead of another caller
			}
			id := seqs[rng.IntN(len(seqs))]
			if len(taken) > 0 && size >= 4 && rng.IntN(4) != 0 {
				id = taken[len(taken)-1].Key.SeqID // mostly one sequence: long runs of one key
			}
			n, err := w.s.Next(id)
			if _, known := testSeqTypes()[kind][id]; !known {
				require.ErrorIs(t, err, ErrUnknownSeqID, "step %d", step)
				continue
			}
			if err != nil {
				require.ErrorIs(t, err, errStorage, "step %d", step)
				failed = true
				break
			}
			k := NumberKey{WSID: ws, SeqID: id}
			require.Greater(t, n, durable[k], "step %d: %v: %d not above durable (seed %d)", step, k, n, seed)
			require.Greater(t, n, issued[k], "step %d: %v: %d not above issued (seed %d)", step, k, n, seed)
			// The sequencer skips no number (more than ISequencer
			// promises): the next number is the one after the largest
			// issued and not cancelled, whether the workspace's numbers
			// came from the cache, a read or a read-ahead, so that a
			// stale or lost value shows as a difference.
			require.Equal(t, max(issued[k]+1, testSeqTypes()[kind][id]), n, "step %d: %v: a number skipped (seed %d)", step, k, seed)
			if _, ok := before[k]; !ok {
				before[k] = issued[k]
			}
			issued[k] = n
			taken = append(taken, SeqValue{Key: k, Value: n})
		}
		switch end := rng.IntN(100); {
		case failed || end < 5:
			// Given up before a write: nothing of it may be used, and
			// its numbers may be issued again (Cancel's contract).
			w.s.Cancel()
			for k, v := range before {
				issued[k] = v
			}
			counts["cancels"]++
		case end < 12:
			w.s.Actualize() // the event's write failed
			forget()
			counts["actualizations"]++
		case group:
			pending = append(pending, tx{off: off, taken: taken})
			flush(w.s, counts)
		default:
			writeEvent(tx{off: off, taken: taken})
			flush(w.s, counts)
		}
	}
	for w.step() {
	}
	checkStored(steps)
	readAheadsOf(w)
	t.Logf("seed %d: %d steps, events to offset %d, %v", seed, steps, lastDurable, counts)
	require.Positive(t, counts["actualizations"])
	require.Positive(t, counts["restarts"])
	require.Positive(t, counts["ringGrowths"], "the values ring never grew: the model does not reach it")
	require.Positive(t, counts["overflows"], "no transaction overflowed the ring: the model does not reach the overflow path")
	require.Positive(t, counts["readAheadsUsed"], "no read-ahead was used: the model does not reach it")
	require.Positive(t, counts["readAheadsStale"], "no read-ahead was stale: the model does not race one with a write")
}

// flush calls s.Flush and counts in counts the paths it took: the values
// ring grew (ringGrowths), the transaction's values went to the overflow
// (overflows, overflowValues).
func flush(s *Sequencer, counts map[string]int) {
	size := s.shared.values.Load().size()
	over := s.shared.overflowN.Load()
	s.Flush()
	if s.shared.values.Load().size() > size {
		counts["ringGrowths"]++
	}
	if n := s.shared.overflowN.Load() - over; n > 0 {
		counts["overflows"]++
		counts["overflowValues"] += int(n)
	}
}
