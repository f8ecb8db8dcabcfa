package faulty_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/faulty"
	"github.com/cqlseq/cqlseq/storage/mem"
	"github.com/cqlseq/cqlseq/storage/storagetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	ctx  = context.Background()
	p, c = []byte("p"), []byte("c")
)

func newStore(t *testing.T, o faulty.Options) *faulty.Store {
	t.Helper()
	s, err := faulty.New(mem.New(mem.Options{}), o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func get(t *testing.T, s storage.Storage, cCols []byte) ([]byte, bool) {
	t.Helper()
	v, ok, err := s.Get(ctx, p, cCols)
	require.NoError(t, err)
	return v, ok
}

// TestConformanceWithoutRules: with no rule the wrapper is transparent.
func TestConformanceWithoutRules(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	storagetest.Run(t, storagetest.Harness{
		New: func(t testing.TB) storage.Storage {
			s, err := faulty.New(mem.New(mem.Options{Now: clock}), faulty.Options{})
			require.NoError(t, err)
			return s
		},
		Advance: func(_ testing.TB, d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() },
	})
}

// calls runs every operation once and returns each one's error by name.
func calls(s storage.Storage) map[string]error {
	out := map[string]error{}
	_, _, out[faulty.OpGet] = s.Get(ctx, p, c)
	out[faulty.OpGetBatch] = s.GetBatch(ctx, p, []storage.GetItem{{CCols: c}})
	out[faulty.OpPut] = s.Put(ctx, p, []byte("put"), nil)
	out[faulty.OpPutBatch] = s.PutBatch(ctx, []storage.Row{{PKey: p, CCols: []byte("batch")}})
	out[faulty.OpRead] = s.Read(ctx, p, nil, nil, func(_, _ []byte) error { return nil })
	out[faulty.OpReadPartitions] = s.ReadPartitions(ctx, [][]byte{p}, nil, nil, func(_, _, _ []byte) error { return nil })
	_, out[faulty.OpInsertIfNotExists] = s.InsertIfNotExists(ctx, p, []byte("ins"), nil, 0)
	_, out[faulty.OpCompareAndSwap] = s.CompareAndSwap(ctx, p, c, nil, nil, 0)
	_, out[faulty.OpCompareAndDelete] = s.CompareAndDelete(ctx, p, c, nil)
	_, out[faulty.OpApplyBatchIf] = s.ApplyBatchIf(ctx, p, nil, nil)
	_, _, out[faulty.OpQueryTTL] = s.QueryTTL(ctx, p, c)
	return out
}

func TestEachOperationIsMatchedByName(t *testing.T) {
	for _, op := range faulty.AllOps() {
		s := newStore(t, faulty.Options{Rules: []faulty.Rule{{Ops: []string{op}, Action: faulty.Fail}}})
		got := calls(s)
		require.Len(t, got, len(faulty.AllOps()))
		for name, err := range got {
			if name == op {
				assert.ErrorIs(t, err, faulty.ErrInjected, "%s under a rule for %s", name, op)
				assert.ErrorIs(t, err, storage.ErrUnavailable, "%s: the default error", name)
			} else {
				assert.NoError(t, err, "%s under a rule for %s", name, op)
			}
		}
		assert.Equal(t, uint64(1), s.Injected(), op)
	}
	s := newStore(t, faulty.Options{Rules: []faulty.Rule{{Action: faulty.Fail}}})
	for name, err := range calls(s) {
		assert.ErrorIs(t, err, faulty.ErrInjected, "no Ops matches %s", name)
	}
}

func TestFailNextNCalls(t *testing.T) {
	s := newStore(t, faulty.Options{Rules: []faulty.Rule{{Ops: []string{faulty.OpPut, faulty.OpPutBatch}, Action: faulty.Fail, Times: 2}}})
	err := s.Put(ctx, p, []byte("1"), []byte("v"))
	assert.ErrorIs(t, err, faulty.ErrInjected)
	err = s.PutBatch(ctx, []storage.Row{{PKey: p, CCols: []byte("2"), Value: []byte("v")}})
	assert.ErrorIs(t, err, faulty.ErrInjected)
	_, ok := get(t, s, []byte("1"))
	assert.False(t, ok, "a fault before the call writes nothing")
	require.NoError(t, s.Put(ctx, p, []byte("3"), []byte("v")), "the rule is spent")
	_, ok = get(t, s, []byte("3"))
	assert.True(t, ok)
	assert.Equal(t, uint64(2), s.Injected())

	require.NoError(t, s.SetRules(faulty.Rule{Ops: []string{faulty.OpPut}, Action: faulty.Fail, Times: 1}))
	assert.Error(t, s.Put(ctx, p, c, nil), "SetRules restarts the count")
	assert.NoError(t, s.Put(ctx, p, c, nil))
}

func TestFailAlwaysUntilCleared(t *testing.T) {
	wantErr := errors.New("disk on fire")
	s := newStore(t, faulty.Options{Rules: []faulty.Rule{{Ops: []string{faulty.OpGet}, Action: faulty.Fail, Err: wantErr}}})
	for range 100 {
		_, _, err := s.Get(ctx, p, c)
		require.ErrorIs(t, err, wantErr)
		require.ErrorIs(t, err, faulty.ErrInjected)
		require.NotErrorIs(t, err, storage.ErrUnavailable, "Err replaces the default")
	}
	s.Clear()
	_, _, err := s.Get(ctx, p, c)
	assert.NoError(t, err)
}

func TestFailAfterCallAppliesTheWrite(t *testing.T) {
	s := newStore(t, faulty.Options{Rules: []faulty.Rule{{
		Ops: []string{faulty.OpInsertIfNotExists}, Action: faulty.Fail, Err: storage.ErrUnknownOutcome, AfterCall: true, Times: 1,
	}}})
	ok, err := s.InsertIfNotExists(ctx, p, c, []byte("mine"), 0)
	assert.ErrorIs(t, err, storage.ErrUnknownOutcome)
	assert.False(t, ok, "no ok with an error")
	v, found := get(t, s, c)
	assert.True(t, found, "the write took effect")
	assert.Equal(t, []byte("mine"), v)

	n := 0
	require.NoError(t, s.SetRules(faulty.Rule{Ops: []string{faulty.OpRead}, Action: faulty.Fail, AfterCall: true}))
	err = s.Read(ctx, p, nil, nil, func(_, _ []byte) error { n++; return nil })
	assert.ErrorIs(t, err, faulty.ErrInjected)
	assert.Equal(t, 1, n, "an after-call fault on Read delivers the rows first")
}

func TestFailAfterCallKeepsTheInnerError(t *testing.T) {
	inner := mem.New(mem.Options{})
	s, err := faulty.New(inner, faulty.Options{Rules: []faulty.Rule{{Action: faulty.Fail, AfterCall: true}}})
	require.NoError(t, err)
	require.NoError(t, inner.Close())
	err = s.Put(ctx, p, c, nil)
	assert.ErrorIs(t, err, storage.ErrClosed)
	assert.NotErrorIs(t, err, faulty.ErrInjected)
	require.NoError(t, s.Close())
}

func TestProbabilityIsSeeded(t *testing.T) {
	pattern := func(seed uint64) []bool {
		s := newStore(t, faulty.Options{Seed: seed, Rules: []faulty.Rule{{Ops: []string{faulty.OpGet}, Action: faulty.Fail, Probability: 0.3}}})
		out := make([]bool, 1000)
		for i := range out {
			_, _, err := s.Get(ctx, p, c)
			out[i] = err != nil
		}
		return out
	}
	a, b, other := pattern(42), pattern(42), pattern(43)
	assert.Equal(t, a, b, "the same seed gives the same faults")
	assert.NotEqual(t, a, other, "another seed gives other faults")
	n := 0
	for _, failed := range a {
		if failed {
			n++
		}
	}
	assert.InDelta(t, 300, n, 60, "about 30%% of 1000 calls fail")
}

func TestProbabilityWithTimes(t *testing.T) {
	s := newStore(t, faulty.Options{Seed: 7, Rules: []faulty.Rule{{Action: faulty.Fail, Probability: 0.5, Times: 5}}})
	failed := 0
	for range 200 {
		if err := s.Put(ctx, p, c, nil); err != nil {
			failed++
		}
	}
	assert.Equal(t, 5, failed)
}

func TestFirstFiringRuleDecides(t *testing.T) {
	first, second := errors.New("first"), errors.New("second")
	s := newStore(t, faulty.Options{Rules: []faulty.Rule{
		{Ops: []string{faulty.OpGet}, Action: faulty.Fail, Err: first, Times: 1},
		{Action: faulty.Fail, Err: second},
	}})
	_, _, err := s.Get(ctx, p, c)
	assert.ErrorIs(t, err, first)
	assert.NotErrorIs(t, err, second)
	_, _, err = s.Get(ctx, p, c)
	assert.ErrorIs(t, err, second, "the spent rule gives way")
	assert.ErrorIs(t, s.Put(ctx, p, c, nil), second)
}

func TestDelay(t *testing.T) {
	const d = 30 * time.Millisecond
	s := newStore(t, faulty.Options{Rules: []faulty.Rule{{Ops: []string{faulty.OpPut}, Action: faulty.Delay, Delay: d}}})
	start := time.Now()
	require.NoError(t, s.Put(ctx, p, c, []byte("v")))
	assert.GreaterOrEqual(t, time.Since(start), d)
	_, ok := get(t, s, c)
	assert.True(t, ok, "a delayed call goes on")

	require.NoError(t, s.SetRules(faulty.Rule{Ops: []string{faulty.OpPut}, Action: faulty.Delay, Delay: time.Hour}))
	tctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	err := s.Put(tctx, p, []byte("late"), []byte("v"))
	assert.ErrorIs(t, err, context.DeadlineExceeded, "the delay honours ctx")
	_, ok = get(t, s, []byte("late"))
	assert.False(t, ok, "a call whose ctx ended in the delay writes nothing")

	require.NoError(t, s.SetRules(faulty.Rule{Ops: []string{faulty.OpPut}, Action: faulty.Delay, Delay: time.Hour, AfterCall: true}))
	tctx2, cancel2 := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel2()
	err = s.Put(tctx2, p, []byte("applied"), []byte("v"))
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	_, ok = get(t, s, []byte("applied"))
	assert.True(t, ok, "a delay after the call: applied, yet the caller timed out")
}

func TestTimeoutBlocksUntilCtxIsDone(t *testing.T) {
	s := newStore(t, faulty.Options{Rules: []faulty.Rule{{Ops: []string{faulty.OpRead, faulty.OpCompareAndSwap}, Action: faulty.Timeout}}})
	require.NoError(t, s.Put(ctx, p, c, []byte("v")))
	tctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	called := false
	err := s.Read(tctx, p, nil, nil, func(_, _ []byte) error { called = true; return nil })
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorIs(t, err, faulty.ErrInjected)
	assert.False(t, called)

	cctx, cancelNow := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := s.CompareAndSwap(cctx, p, c, []byte("v"), []byte("w"), 0)
		done <- err
	}()
	cancelNow()
	assert.ErrorIs(t, <-done, context.Canceled)
	v, _ := get(t, s, c)
	assert.Equal(t, []byte("v"), v, "a timed-out call before the store writes nothing")
}

func TestCloseReleasesBlockedCalls(t *testing.T) {
	s, err := faulty.New(mem.New(mem.Options{}), faulty.Options{Rules: []faulty.Rule{
		{Ops: []string{faulty.OpGet}, Action: faulty.Timeout},
		{Ops: []string{faulty.OpPut}, Action: faulty.Delay, Delay: time.Hour},
	}})
	require.NoError(t, err)
	errs := make(chan error, 2)
	go func() { _, _, err := s.Get(ctx, p, c); errs <- err }()
	go func() { errs <- s.Put(ctx, p, c, nil) }()
	require.NoError(t, s.Close())
	for range 2 {
		assert.ErrorIs(t, <-errs, storage.ErrClosed)
	}
	assert.NoError(t, s.Close(), "Close again")
}

func TestRulesChangeConcurrently(t *testing.T) {
	s := newStore(t, faulty.Options{Seed: 1})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				err := s.Put(ctx, p, fmt.Appendf(nil, "%d/%d", w, i), nil)
				if err != nil && !errors.Is(err, faulty.ErrInjected) {
					t.Errorf("Put: %v", err)
					return
				}
			}
		}()
	}
	for i := range 200 {
		if i%2 == 0 {
			assert.NoError(t, s.SetRules(faulty.Rule{Action: faulty.Fail, Probability: 0.5}))
		} else {
			s.Clear()
		}
	}
	close(stop)
	wg.Wait()
}

func TestInvalidRules(t *testing.T) {
	bad := []faulty.Rule{
		{Ops: []string{"Gett"}, Action: faulty.Fail},
		{},
		{Action: faulty.Fail, Probability: 1.5},
		{Action: faulty.Fail, Times: -1},
		{Action: faulty.Delay},
		{Action: faulty.Timeout, Err: errors.New("x"), Delay: time.Second},
	}
	_, err := faulty.New(mem.New(mem.Options{}), faulty.Options{Rules: bad})
	require.ErrorIs(t, err, faulty.ErrInvalidRule)
	require.ErrorIs(t, err, storage.ErrInvalidArgument)
	for _, want := range []string{`"Gett"`, "rule 1: unknown Action(0)", "Probability 1.5", "Times -1", "rule 4: Delay 0s", "Err set on a Timeout", "Delay set on a Timeout"} {
		assert.Contains(t, err.Error(), want, "every problem is reported")
	}
	_, err = faulty.New(nil, faulty.Options{})
	assert.ErrorIs(t, err, storage.ErrInvalidArgument)

	s := newStore(t, faulty.Options{Rules: []faulty.Rule{{Ops: []string{faulty.OpGet}, Action: faulty.Fail}}})
	require.Error(t, s.SetRules(bad...))
	_, _, err = s.Get(ctx, p, c)
	assert.ErrorIs(t, err, faulty.ErrInjected, "invalid rules change nothing")
}

func TestOptionsDoNotAliasTheCallersRules(t *testing.T) {
	rules := []faulty.Rule{{Ops: []string{faulty.OpGet}, Action: faulty.Fail}}
	o := faulty.Options{Rules: rules}
	o.EnsureDefaults()
	assert.Equal(t, 1.0, o.Rules[0].Probability)
	assert.Zero(t, rules[0].Probability, "the caller's slice is unchanged")
	assert.Nil(t, rules[0].Err)
}

func TestCColsMatchesOneClusteringKey(t *testing.T) {
	other := []byte("other")
	s := newStore(t, faulty.Options{Rules: []faulty.Rule{{Action: faulty.Fail, CCols: c}}})
	require.NoError(t, s.Put(ctx, p, other, []byte("v")), "another key passes")
	_, _, err := s.Get(ctx, p, other)
	require.NoError(t, err)
	require.ErrorIs(t, s.Put(ctx, p, c, []byte("v")), faulty.ErrInjected, "the key fails")
	_, _, err = s.Get(ctx, p, c)
	require.ErrorIs(t, err, faulty.ErrInjected)
	_, err = s.CompareAndSwap(ctx, p, c, []byte("v"), []byte("w"), 0)
	require.ErrorIs(t, err, faulty.ErrInjected)
	require.NoError(t, s.PutBatch(ctx, []storage.Row{{PKey: p, CCols: c, Value: []byte("v")}}),
		"a call without a single clustering key never matches")
	require.NoError(t, s.Read(ctx, p, nil, nil, func(_, _ []byte) error { return nil }))
	assert.Equal(t, uint64(1), s.InjectedOn(faulty.OpPut))
	assert.Equal(t, uint64(1), s.InjectedOn(faulty.OpGet))
	assert.Equal(t, uint64(1), s.InjectedOn(faulty.OpCompareAndSwap))
	assert.Zero(t, s.InjectedOn(faulty.OpPutBatch))
	assert.Equal(t, uint64(3), s.Injected())
}

// TestPassesApplyBatchesIfThrough: over a storage.MultiApplier, the store
// is one (storage.AsMultiApplier finds it through Unwrap) and its
// ApplyBatchesIf is under the store's rules (by its name, and under a rule
// for every operation); over another store it is not, and the call is
// refused.
func TestPassesApplyBatchesIfThrough(t *testing.T) {
	batch := func(cc string) []storage.CondBatch {
		return []storage.CondBatch{{PKey: p, Rows: []storage.Row{{PKey: p, CCols: []byte(cc)}}}}
	}
	for _, tc := range []struct {
		rule   faulty.Rule
		failed bool
	}{
		{faulty.Rule{Ops: []string{faulty.OpApplyBatchesIf}, Action: faulty.Fail}, true},
		{faulty.Rule{Action: faulty.Fail}, true},
		{faulty.Rule{Ops: []string{faulty.OpApplyBatchIf}, Action: faulty.Fail}, false},
		{faulty.Rule{Ops: []string{faulty.OpApplyBatchesIf}, Action: faulty.Fail, AfterCall: true}, true},
	} {
		s := newStore(t, faulty.Options{Rules: []faulty.Rule{tc.rule}})
		ma, ok := storage.AsMultiApplier(s)
		require.True(t, ok)
		applied := make([]bool, 1)
		err := ma.ApplyBatchesIf(ctx, batch("m"), applied)
		if tc.failed {
			require.ErrorIs(t, err, faulty.ErrInjected, "%+v", tc.rule)
			assert.Equal(t, []bool{false}, applied, "an error applies nothing, as far as the caller knows")
			assert.Equal(t, uint64(1), s.Injected())
		} else {
			require.NoError(t, err)
			assert.Equal(t, []bool{true}, applied)
		}
	}
	s, err := faulty.New(struct{ storage.Storage }{mem.New(mem.Options{})}, faulty.Options{})
	require.NoError(t, err)
	_, ok := storage.AsMultiApplier(s)
	assert.False(t, ok, "not over a store without it")
	assert.ErrorIs(t, s.ApplyBatchesIf(ctx, batch("m"), make([]bool, 1)), storage.ErrNotMultiApplier)
	assert.Zero(t, s.Injected(), "a refused call is not faulted")
}
