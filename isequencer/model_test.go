package isequencer

import (
	"context"
	"flag"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var (
	modelSeed  = flag.Uint64("model.seed", 0, "seed of TestModel (0: time-based)")
	modelSteps = flag.Int("model.steps", 4000, "steps of TestModel per run")
)

// flakyStorage fails calls of the wrapped mockStorage at a chosen rate. A
// third of the failed writes are applied before they report failure (an
// unknown outcome), a third write some values and report the others
// failed (a PartialWriteError, without the offset).
type flakyStorage struct {
	*mockStorage
	mu   sync.Mutex
	rng  *rand.Rand
	rate float64
	// readDelay and writeDelay, if set, delay half of the reads and the
	// writes by up to them.
	readDelay, writeDelay time.Duration
}

func (f *flakyStorage) fail() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rate > 0 && f.rng.Float64() < f.rate
}

func (f *flakyStorage) intN(n int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rng.IntN(n)
}

func (f *flakyStorage) setRate(r float64) { f.mu.Lock(); f.rate = r; f.mu.Unlock() }

func (f *flakyStorage) ReadNumbers(ws WSID, ids []SeqID) ([]Number, error) {
	if f.readDelay > 0 && f.intN(2) == 0 {
		time.Sleep(time.Duration(f.intN(int(f.readDelay))))
	}
	if f.fail() {
		return nil, errStorage
	}
	return f.mockStorage.ReadNumbers(ws, ids)
}

func (f *flakyStorage) ReadNextPLogOffset() (PLogOffset, error) {
	if f.fail() {
		return 0, errStorage
	}
	return f.mockStorage.ReadNextPLogOffset()
}

func (f *flakyStorage) WriteValuesAndNextPLogOffset(b []SeqValue, o PLogOffset) error {
	if f.writeDelay > 0 && f.intN(2) == 0 {
		time.Sleep(time.Duration(f.intN(int(f.writeDelay))))
	}
	if f.fail() {
		switch f.intN(3) {
		case 0:
			_ = f.mockStorage.WriteValuesAndNextPLogOffset(b, o)
		case 1:
			var failed []int
			f.mockStorage.mu.Lock()
			for i, v := range b {
				if f.intN(2) == 0 {
					failed = append(failed, i)
				} else {
					f.mockStorage.numbers[v.Key] = v.Value
				}
			}
			f.mockStorage.mu.Unlock()
			return &PartialWriteError{Failed: failed, Err: errStorage}
		}
		return errStorage
	}
	return f.mockStorage.WriteValuesAndNextPLogOffset(b, o)
}

func (f *flakyStorage) ActualizeSequencesFromPLog(ctx context.Context, o PLogOffset, cb func([]SeqValue, PLogOffset) error) error {
	if f.fail() {
		return errStorage
	}
	return f.mockStorage.ActualizeSequencesFromPLog(ctx, o, cb)
}

// TestModel drives the sequencer with a seeded random sequence of
// transactions, failed event writes (Actualize), restarts and storage
// faults, and checks every number against a model of what is durable:
// numbers of a (WSID, SeqID) strictly increase within a sequencer's run
// between actualizations, always exceed every number in a durable event,
// and PLog offsets are never reused. Replay with -model.seed.
func TestModel(t *testing.T) { runModel(t, false, false) }

// TestModelGroupCommit is TestModel with Params.GroupCommit: flushed
// transactions form a group whose events are written together (then
// Durable) or not at all (then Actualize), and the stored next offset must
// never claim an event that is not in the PLog.
func TestModelGroupCommit(t *testing.T) { runModel(t, true, false) }

// TestModelReadAhead is TestModel with two goroutines calling ReadAhead on
// random workspaces all along (reads delayed at random, so that they race
// the worker's writes, evictions, restarts and actualizations).
func TestModelReadAhead(t *testing.T) { runModel(t, false, true) }

// TestModelGroupCommitReadAhead is TestModelGroupCommit with read-ahead.
func TestModelGroupCommitReadAhead(t *testing.T) { runModel(t, true, true) }

func runModel(t *testing.T, group, readAhead bool) {
	seed := *modelSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replay with: go test -run '%s$' -model.seed %d ./isequencer/", t.Name(), seed)
		}
	})
	rng := rand.New(rand.NewPCG(seed, 1))
	st := &flakyStorage{mockStorage: newMockStorage(), rng: rand.New(rand.NewPCG(seed, 2))}
	params := func(p *Params) {
		p.MaxNumUnflushedValues = 1 + rng.IntN(40)
		p.LRUCacheSize = 3 * (1 + rng.IntN(30))
		p.GroupCommit = group
		if rng.IntN(2) == 0 {
			p.FlushAfterEvents = 2 + rng.IntN(32)
		}
	}
	s, cleanup := newTestSequencer(t, st, params)
	var readAheads, readAheadsUsed, readAheadsStale atomic.Int64
	countReadAheads := func(s *Sequencer) {
		ra := &s.readAhead
		readAheads.Add(ra.read.Load())
		readAheadsUsed.Add(ra.used.Load())
		readAheadsStale.Add(ra.stale.Load())
	}
	var live atomic.Value // the sequencer the read-ahead goroutines use
	live.Store(s)
	if readAhead {
		st.readDelay, st.writeDelay = 200*time.Microsecond, 500*time.Microsecond
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for g := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(seed, uint64(10+g)))
				for {
					select {
					case <-stop:
						return
					default:
					}
					s := live.Load().(*Sequencer)
					s.ReadAhead([]WSKind{kindApp, kindUser}[rng.IntN(2)], WSID(1+rng.IntN(60)))
					time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
				}
			}()
		}
		t.Cleanup(func() { close(stop); wg.Wait() })
	}

	durable := map[NumberKey]Number{} // largest number in a durable event
	issued := map[NumberKey]Number{}  // largest number issued since the last actualization
	var lastDurableOffset PLogOffset
	kinds := []WSKind{kindApp, kindUser}
	seqs := []SeqID{seqWLog, seqRecord, seqCDoc, 77}
	restarts, actualizes, cancels, events, groups := 0, 0, 0, 0, 0
	// expectOff is the offset of a cancelled transaction, which the next
	// Start must return again (0: none).
	var expectOff PLogOffset

	type tx struct {
		off   PLogOffset
		taken []SeqValue
	}
	var pending []tx // GroupCommit: flushed, event not yet written
	resetIssued := func() {
		expectOff = 0
		pending = nil
		clear(issued)
		for k, v := range durable {
			issued[k] = v
		}
	}
	// required: per key, the largest number of the events below covered,
	// which the stored numbers must reach once the stored next offset
	// claims them.
	required := map[NumberKey]Number{}
	covered := PLogOffset(1)
	checkStoredOffset := func(step int) {
		nums, stored := st.stored()
		require.LessOrEqual(t, stored, lastDurableOffset+1,
			"step %d: stored next offset %d claims events past the last durable one %d (seed %d)", step, stored, lastDurableOffset, seed)
		st.mu.Lock()
		for ; covered < stored; covered++ {
			for _, v := range st.plog[covered] {
				required[v.Key] = max(required[v.Key], v.Value)
			}
		}
		st.mu.Unlock()
		for k, v := range required {
			require.GreaterOrEqual(t, nums[k], v,
				"step %d: stored next offset %d claims an event with %v = %d, but %d is stored (seed %d)", step, stored, k, v, nums[k], seed)
		}
	}
	commit := func(step int) {
		for _, x := range pending {
			require.True(t, st.writeEvent(x.off, x.taken), "step %d: PLog offset %d reused (seed %d)", step, x.off, seed)
			events++
			lastDurableOffset = x.off
			for _, v := range x.taken {
				durable[v.Key] = max(durable[v.Key], v.Value)
			}
		}
		pending = pending[:0]
		s.Durable(lastDurableOffset + 1)
		groups++
	}
	for step := 0; step < *modelSteps; step++ {
		checkStoredOffset(step)
		switch r := rng.IntN(100); {
		case r < 3:
			cleanup()
			countReadAheads(s)
			s, cleanup = newTestSequencer(t, st, params)
			live.Store(s)
			resetIssued()
			restarts++
			continue
		case r < 6:
			st.setRate([]float64{0, 0, 0.1, 0.3}[rng.IntN(4)])
			continue
		case group && r < 20 && len(pending) > 0:
			commit(step)
			continue
		}
		ws := WSID(1 + rng.IntN(60))
		kind := kinds[rng.IntN(len(kinds))]
		off, ok := s.Start(kind, ws)
		if !ok && group && len(pending) > 0 {
			// Busy with tentative values: the group must be written.
			commit(step)
			continue
		}
		if !ok {
			off = waitStart(t, s, kind, ws)
		}
		require.Greater(t, off, lastDurableOffset, "step %d: offset %d not after the last durable one", step, off)
		if n := len(pending); n > 0 {
			require.Equal(t, pending[n-1].off+1, off, "step %d: offsets within a group are consecutive", step)
		}
		if expectOff != 0 {
			require.Equal(t, expectOff, off, "step %d: the offset of a cancelled transaction is used again (seed %d)", step, seed)
			expectOff = 0
		}
		var taken []SeqValue
		before := map[NumberKey]Number{} // issued before this transaction, per key it took
		failed := false
		for range rng.IntN(5) {
			id := seqs[rng.IntN(len(seqs))]
			n, err := s.Next(id)
			if err != nil {
				if _, known := testSeqTypes()[kind][id]; !known {
					require.ErrorIs(t, err, ErrUnknownSeqID, "step %d", step)
					continue
				}
				require.ErrorIs(t, err, errStorage, "step %d", step)
				failed = true
				break
			}
			k := NumberKey{WSID: ws, SeqID: id}
			require.Greater(t, n, durable[k], "step %d: %v: number %d not above durable %d (seed %d)", step, k, n, durable[k], seed)
			require.Greater(t, n, issued[k], "step %d: %v: number %d not above issued %d (seed %d)", step, k, n, issued[k], seed)
			if _, ok := before[k]; !ok {
				before[k] = issued[k]
			}
			issued[k] = n
			taken = append(taken, SeqValue{Key: k, Value: n})
		}
		switch end := rng.IntN(100); {
		case failed && end < 70, end < 6:
			// The command is given up before its event is written (after
			// a failed numbers read, or any other reason): its numbers
			// may be issued again, nothing else changes.
			s.Cancel()
			for k, v := range before {
				issued[k] = v
			}
			expectOff = off
			cancels++
			continue
		case failed || end < 18:
			// A failed event write: with GroupCommit the whole group fails.
			s.Actualize()
			resetIssued()
			actualizes++
			continue
		}
		if group {
			pending = append(pending, tx{off: off, taken: taken})
			s.Flush()
			continue
		}
		require.True(t, st.writeEvent(off, taken), "step %d: PLog offset %d reused (seed %d)", step, off, seed)
		events++
		lastDurableOffset = off
		for _, v := range taken {
			durable[v.Key] = max(durable[v.Key], v.Value)
		}
		s.Flush()
	}
	cleanup()
	countReadAheads(s)
	checkStoredOffset(*modelSteps)
	t.Logf("seed %d: %d steps, %d events, %d groups, %d cancels, %d actualizations, %d restarts, %d read-aheads (%d used, %d stale)", seed, *modelSteps, events, groups, cancels, actualizes, restarts, readAheads.Load(), readAheadsUsed.Load(), readAheadsStale.Load())
	if readAhead {
		require.Positive(t, readAheadsUsed.Load(), "no read-ahead was used: the model does not exercise it")
		require.Positive(t, readAheadsStale.Load(), "no read-ahead was stale: the model does not race it with writes")
	}

	// The PLog itself: per key, numbers strictly increase with the offset.
	st.mu.Lock()
	defer st.mu.Unlock()
	last := map[NumberKey]Number{}
	for o := PLogOffset(1); o <= lastDurableOffset; o++ {
		for _, v := range st.plog[o] {
			require.Greater(t, v.Value, last[v.Key], "PLog offset %d key %v", o, v.Key)
			last[v.Key] = v.Value
		}
	}
}
