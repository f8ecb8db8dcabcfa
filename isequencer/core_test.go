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
// writes) and worker steps at any point, with and without GroupCommit,
// and checks every number and offset against a model of what is durable,
// as TestModel does, but deterministically: a seed replays the same run.
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
		p.MaxNumUnflushedValues = 1 + rng.IntN(40)
		p.LRUCacheSize = 3 * (1 + rng.IntN(30))
		p.GroupCommit = group
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
	// The stored next offset never claims an event not durable, and the
	// stored numbers cover every event it claims.
	checkStored := func(step int) {
		nums, next := st.stored()
		require.LessOrEqual(t, next, lastDurable+1, "step %d: stored next offset %d past the last durable event %d (seed %d)", step, next, lastDurable, seed)
		st.mu.Lock()
		defer st.mu.Unlock()
		for o := max(next, 1) - 1; o >= 1 && o+64 >= next; o-- {
			for _, v := range st.plog[o] {
				require.GreaterOrEqual(t, nums[v.Key], v.Value, "step %d: stored next offset %d claims offset %d with %v=%d, stored %d (seed %d)", step, next, o, v.Key, v.Value, nums[v.Key], seed)
			}
		}
	}
	kinds := []WSKind{kindApp, kindUser}
	seqs := []SeqID{seqWLog, seqRecord, seqCDoc}
	counts := map[string]int{}
	for step := range steps {
		checkStored(step)
		switch r := rng.IntN(100); {
		case r < 2:
			w = newSyncSequencer(t, st, tune) // a crash: the old one is dropped
			forget()
			counts["restarts"]++
			continue
		case r < 5:
			st.setRate([]float64{0, 0, 0.1, 0.4}[rng.IntN(4)])
			continue
		case r < 40:
			w.step()
			continue
		case group && r < 50 && len(pending) > 0:
			for _, x := range pending {
				writeEvent(x)
			}
			pending = pending[:0]
			w.s.Durable(lastDurable + 1)
			counts["groups"]++
			continue
		}
		ws, kind := WSID(1+rng.IntN(40)), kinds[rng.IntN(len(kinds))]
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
				for _, x := range pending {
					writeEvent(x)
				}
				pending = pending[:0]
				w.s.Durable(lastDurable + 1)
				counts["groups"]++
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
		for range rng.IntN(4) {
			if rng.IntN(4) == 0 {
				w.step() // the worker runs while the transaction is open
			}
			id := seqs[rng.IntN(len(seqs))]
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
			w.s.Flush()
		default:
			writeEvent(tx{off: off, taken: taken})
			w.s.Flush()
		}
	}
	for w.step() {
	}
	checkStored(steps)
	t.Logf("seed %d: %d steps, events to offset %d, %v", seed, steps, lastDurable, counts)
	require.Positive(t, counts["actualizations"])
	require.Positive(t, counts["restarts"])
}
