// Package electionstest holds the elections suite every storage driver
// runs and a FakeClock; the suite injects storage faults with package
// faulty. It imports testing; production code must not import it.
package electionstest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cqlseq/cqlseq/elections"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/faulty"
	"github.com/cqlseq/cqlseq/testenv/leakcheck"
)

// Harness describes the driver under test.
type Harness struct {
	// New returns an open storage; the suite closes it. Storages returned
	// by one Harness may share data: every test uses keys of its own.
	New func(t testing.TB) storage.Storage
	// Advance moves time by d for the storage's TTLs and for Clock (with a
	// real store and the system clock: sleeps).
	Advance func(t testing.TB, d time.Duration)
	// Clock is the elections' clock. Nil: the system clock. With a
	// *FakeClock, time stands still between Advance calls and the suite
	// also checks leases at exact instants.
	Clock elections.Clock
	// Lease is the lease duration the suite uses (whole seconds). Default
	// 10 s.
	Lease time.Duration
	// Skew is the elections' Options.Skew. Default 1 s.
	Skew time.Duration
	// LeakOptions are added to the goroutine leak checks (e.g. to ignore
	// a driver's own background goroutines).
	LeakOptions []goleak.Option
}

// eventTimeout bounds every wait for an event, in real time.
const eventTimeout = 30 * time.Second

var errUnavailable = fmt.Errorf("electionstest: injected: %w", storage.ErrUnavailable)

var errUnknown = fmt.Errorf("electionstest: injected: %w", storage.ErrUnknownOutcome)

// Run runs the suite.
func Run(t *testing.T, h Harness) {
	if h.Clock == nil {
		h.Clock = elections.SystemClock()
	}
	if h.Lease == 0 {
		h.Lease = 10 * time.Second
	}
	if h.Skew == 0 {
		h.Skew = time.Second
	}
	o := elections.Options{Clock: h.Clock, Skew: h.Skew}
	tm, err := o.TimingFor(h.Lease)
	require.NoError(t, err)
	s := &suite{h: h, tm: tm}
	_, s.exact = h.Clock.(*FakeClock)

	t.Run("OneWinner", s.oneWinner)
	t.Run("HeldHere", s.heldHere)
	t.Run("RenewalKeepsIt", s.renewalKeepsIt)
	t.Run("TransientFailuresAreRetried", s.transientFailures)
	t.Run("ExpiryHandsOver", s.expiryHandsOver)
	t.Run("ReleaseHandsOverAtOnce", s.releaseHandsOver)
	t.Run("StolenLeaseCancelsContext", s.stolen)
	t.Run("EpochGrowsOverHandOvers", s.epochGrows)
	t.Run("UnknownOutcomes", s.unknownOutcomes)
	t.Run("SpecShape", s.specShape)
	t.Run("Cleanup", s.cleanup)
	t.Run("CleanupWhileStorageFails", s.cleanupWhileFailing)
}

type suite struct {
	h     Harness
	tm    elections.Timing
	exact bool
}

// recorder collects events; wait returns them per key, in order.
type recorder struct {
	ch      chan elections.Event
	dropped sync.Once
	backlog []elections.Event // other keys' events read by wait, in order
}

func newRecorder() *recorder { return &recorder{ch: make(chan elections.Event, 4096)} }

func (r *recorder) on(ev elections.Event) {
	select {
	case r.ch <- ev:
	default:
		r.dropped.Do(func() { panic("electionstest: event buffer full") })
	}
}

// wait returns the next event of key of kind want. Acquisitions and failed
// renewals (unless wanted), and renewals while waiting for a loss, are
// skipped; any other event of key fails the test. Other keys' events are
// kept for later waits. Only the test's goroutine calls wait.
func (r *recorder) wait(t testing.TB, key uint32, want elections.EventKind) elections.Event {
	t.Helper()
	timeout := time.NewTimer(eventTimeout)
	defer timeout.Stop()
	for {
		var ev elections.Event
		if i := slices.IndexFunc(r.backlog, func(ev elections.Event) bool { return ev.Key == key }); i >= 0 {
			ev = r.backlog[i]
			r.backlog = slices.Delete(r.backlog, i, i+1)
		} else {
			select {
			case ev = <-r.ch:
			case <-timeout.C:
				t.Fatalf("key %d: no %v event within %v", key, want, eventTimeout)
			}
		}
		switch {
		case ev.Key != key:
			r.backlog = append(r.backlog, ev)
		case ev.Kind == want:
			return ev
		case ev.Kind == elections.EventAcquired, ev.Kind == elections.EventRenewFailed,
			ev.Kind == elections.EventRenewed && want == elections.EventLost:
		default:
			t.Fatalf("key %d: waiting for %v, got %v (%v)", key, want, ev.Kind, ev.Err)
		}
	}
}

func newKey() uint32 { return rand.Uint32() }

// newFaulty wraps st in a faulty.Store without rules. Closing it would
// close st: the test's cleanup closes st instead.
func newFaulty(t *testing.T, st storage.Storage) *faulty.Store {
	t.Helper()
	f, err := faulty.New(st, faulty.Options{})
	require.NoError(t, err)
	return f
}

// rule builds a faulty.Rule.
type rule faulty.Rule

// fail is a rule failing every call of ops with err.
func fail(err error, ops ...string) rule {
	return rule{Ops: ops, Action: faulty.Fail, Err: err}
}

// applied makes the call reach the store first: a write that is applied
// and still reported as failed.
func (r rule) applied() rule { r.AfterCall = true; return r }

// on limits the rule to one clustering key.
func (r rule) on(cCols []byte) rule { r.CCols = cCols; return r }

// times limits the rule to n calls.
func (r rule) times(n int) rule { r.Times = n; return r }

// setRules replaces f's rules.
func setRules(t *testing.T, f *faulty.Store, rules ...rule) {
	t.Helper()
	rs := make([]faulty.Rule, len(rules))
	for i, r := range rules {
		rs[i] = faulty.Rule(r)
	}
	require.NoError(t, f.SetRules(rs...))
}

// store returns a new storage (Harness.New) closed at the test's end.
func (s *suite) store(t *testing.T) storage.Storage {
	st := s.h.New(t)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// elections returns an Elections over st cleaned up at the test's end.
func (s *suite) elections(t *testing.T, st storage.Storage, r *recorder) *elections.Elections {
	o := elections.Options{Clock: s.h.Clock, Skew: s.h.Skew}
	if r != nil {
		o.OnEvent = r.on
	}
	e, err := elections.NewOverStorage(st, o)
	require.NoError(t, err)
	t.Cleanup(e.Cleanup)
	return e
}

func (s *suite) acquire(t *testing.T, e *elections.Elections, key uint32, val string) *elections.Leadership {
	t.Helper()
	l, err := e.Acquire(context.Background(), key, []byte(val), s.h.Lease)
	require.NoError(t, err)
	require.NotNil(t, l)
	require.NoError(t, l.Ctx.Err())
	return l
}

func (s *suite) requireTaken(t *testing.T, e *elections.Elections, key uint32) {
	t.Helper()
	l, err := e.Acquire(context.Background(), key, []byte("other"), s.h.Lease)
	require.ErrorIs(t, err, elections.ErrTaken)
	require.Nil(t, l)
}

func (s *suite) requireHolder(t *testing.T, e *elections.Elections, key uint32, l *elections.Leadership, val string) {
	t.Helper()
	h, ok, err := e.Holder(context.Background(), key)
	require.NoError(t, err)
	require.True(t, ok, "key %d has a holder", key)
	assert.Equal(t, val, string(h.Value))
	assert.Equal(t, l.Epoch, h.Epoch, "the stored epoch is the holder's")
}

func requireDone(t *testing.T, ctx context.Context, cause error) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(eventTimeout):
		t.Fatalf("context not cancelled within %v", eventTimeout)
	}
	require.ErrorIs(t, context.Cause(ctx), cause)
}

func (s *suite) oneWinner(t *testing.T) {
	const n = 8
	st := s.store(t)
	key := newKey()
	es := make([]*elections.Elections, n)
	for i := range es {
		es[i] = s.elections(t, st, nil)
	}
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		ls    = make([]*elections.Leadership, n)
		errs  = make([]error, n)
	)
	for i := range n {
		wg.Go(func() {
			<-start
			ls[i], errs[i] = es[i].Acquire(context.Background(), key, fmt.Appendf(nil, "node-%d", i), s.h.Lease)
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i := range n {
		if errs[i] == nil {
			require.Equal(t, -1, winner, "two winners: %d and %d", winner, i)
			winner = i
			continue
		}
		assert.ErrorIs(t, errs[i], elections.ErrTaken, "loser %d", i)
	}
	require.NotEqual(t, -1, winner, "no winner: %v", errs)
	assert.Positive(t, ls[winner].Epoch)
	s.requireHolder(t, es[0], key, ls[winner], fmt.Sprintf("node-%d", winner))
}

func (s *suite) heldHere(t *testing.T) {
	st := s.store(t)
	e := s.elections(t, st, nil)
	key := newKey()
	l := s.acquire(t, e, key, "a")
	_, err := e.Acquire(context.Background(), key, []byte("a"), s.h.Lease)
	require.ErrorIs(t, err, elections.ErrHeld)
	require.NoError(t, e.Release(context.Background(), key))
	requireDone(t, l.Ctx, elections.ErrReleased)
	l2 := s.acquire(t, e, key, "a")
	assert.Greater(t, l2.Epoch, l.Epoch)
}

func (s *suite) renewalKeepsIt(t *testing.T) {
	st := s.store(t)
	r := newRecorder()
	a, b := s.elections(t, st, r), s.elections(t, st, nil)
	key := newKey()
	l := s.acquire(t, a, key, "a")
	deadline := l.Deadline()
	for elapsed := time.Duration(0); elapsed < 2*s.h.Lease; elapsed += s.tm.RenewEvery {
		s.h.Advance(t, s.tm.RenewEvery)
		r.wait(t, key, elections.EventRenewed)
		require.NoError(t, l.Ctx.Err(), "renewed leadership is held")
		d := l.Deadline()
		require.True(t, d.After(deadline), "every renewal moves the deadline on")
		deadline = d
	}
	s.requireTaken(t, b, key)
	s.requireHolder(t, b, key, l, "a")
}

func (s *suite) transientFailures(t *testing.T) {
	st := s.store(t)
	f := newFaulty(t, st)
	r := newRecorder()
	a := s.elections(t, f, r)
	key := newKey()
	l := s.acquire(t, a, key, "a")
	deadline := l.Deadline()
	setRules(t, f, fail(errUnavailable, faulty.OpCompareAndSwap).times(2))
	s.h.Advance(t, s.tm.RenewEvery)
	ev := r.wait(t, key, elections.EventRenewFailed)
	require.ErrorIs(t, ev.Err, storage.ErrUnavailable)
	s.h.Advance(t, s.tm.RetryEvery)
	r.wait(t, key, elections.EventRenewFailed)
	s.h.Advance(t, s.tm.RetryEvery)
	r.wait(t, key, elections.EventRenewed)
	require.NoError(t, l.Ctx.Err())
	assert.True(t, l.Deadline().After(deadline))
	assert.Equal(t, uint64(2), f.InjectedOn(faulty.OpCompareAndSwap))
}

func (s *suite) expiryHandsOver(t *testing.T) {
	st := s.store(t)
	f := newFaulty(t, st)
	r := newRecorder()
	a, b := s.elections(t, f, r), s.elections(t, st, nil)
	key := newKey()
	la := s.acquire(t, a, key, "a")
	deadline := la.Deadline()
	setRules(t, f, fail(errUnavailable, faulty.OpCompareAndSwap))
	if s.exact {
		s.h.Advance(t, s.tm.Validity-time.Millisecond)
		require.NoError(t, la.Ctx.Err(), "held until the local deadline")
		s.h.Advance(t, time.Millisecond)
	} else {
		s.h.Advance(t, s.tm.Validity)
	}
	ev := r.wait(t, key, elections.EventLost)
	require.ErrorIs(t, ev.Err, elections.ErrLost)
	requireDone(t, la.Ctx, elections.ErrLost)
	if s.exact {
		assert.True(t, deadline.Equal(s.h.Clock.Now()), "lost exactly at the deadline")
	}
	// Lost locally before the store lets anyone else in.
	s.requireTaken(t, b, key)

	s.h.Advance(t, s.h.Skew+s.h.Lease/10)
	lb := s.acquire(t, b, key, "b")
	assert.Greater(t, lb.Epoch, la.Epoch)
	s.requireHolder(t, b, key, lb, "b")
	f.Clear()
	s.requireTaken(t, a, key)
}

func (s *suite) releaseHandsOver(t *testing.T) {
	st := s.store(t)
	a, b := s.elections(t, st, nil), s.elections(t, st, nil)
	key := newKey()
	la := s.acquire(t, a, key, "a")
	require.NoError(t, a.Release(context.Background(), key))
	requireDone(t, la.Ctx, elections.ErrReleased)
	lb := s.acquire(t, b, key, "b")
	assert.Equal(t, la.Epoch+1, lb.Epoch)
	require.NoError(t, a.Release(context.Background(), key), "releasing a key not held is a no-op")
	s.requireHolder(t, b, key, lb, "b")
}

func (s *suite) stolen(t *testing.T) {
	st := s.store(t)
	r := newRecorder()
	a := s.elections(t, st, r)
	key := newKey()
	l := s.acquire(t, a, key, "a")
	ts, err := elections.NewTTLStorage(st)
	require.NoError(t, err)
	lease := elections.RowKey{Key: key, Row: elections.RowLease}
	cur, ok, err := ts.Get(context.Background(), lease)
	require.NoError(t, err)
	require.True(t, ok)
	intruder := []byte("intruderintruder")
	ok, err = ts.CompareAndSwap(context.Background(), lease, cur, intruder, s.h.Lease)
	require.NoError(t, err)
	require.True(t, ok)

	s.h.Advance(t, s.tm.RenewEvery)
	ev := r.wait(t, key, elections.EventLost)
	require.ErrorIs(t, ev.Err, elections.ErrLost)
	requireDone(t, l.Ctx, elections.ErrLost)
	h, ok, err := a.Holder(context.Background(), key)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "intruder", string(h.Value))
	assert.Zero(t, h.Epoch, "the intruder recorded no epoch")
	require.NoError(t, a.Release(context.Background(), key))
	cur, ok, err = ts.Get(context.Background(), lease)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, intruder, cur, "a lost leadership never deletes another holder's lease")
}

func (s *suite) epochGrows(t *testing.T) {
	st := s.store(t)
	es := []*elections.Elections{s.elections(t, st, nil), s.elections(t, st, nil), s.elections(t, st, nil)}
	key := newKey()
	var prev uint64
	for i := range 10 {
		e := es[i%len(es)]
		val := fmt.Sprintf("node-%d", i%len(es))
		l := s.acquire(t, e, key, val)
		require.Greater(t, l.Epoch, prev, "hand-over %d", i)
		s.requireHolder(t, e, key, l, val)
		prev = l.Epoch
		require.NoError(t, e.Release(context.Background(), key))
	}
}

func (s *suite) unknownOutcomes(t *testing.T) {
	st := s.store(t)
	f := newFaulty(t, st)
	a, b := s.elections(t, f, nil), s.elections(t, st, nil)
	key := newKey()
	lease, epoch := elections.CCols(elections.RowLease), elections.CCols(elections.RowEpoch)
	ctx := context.Background()

	setRules(t, f, fail(errUnknown, faulty.OpInsertIfNotExists).applied().on(lease).times(1))
	l1 := s.acquire(t, a, key, "a")
	assert.Equal(t, uint64(1), f.InjectedOn(faulty.OpInsertIfNotExists))
	s.requireHolder(t, b, key, l1, "a")

	setRules(t, f, fail(errUnknown, faulty.OpCompareAndDelete).applied().times(1))
	require.NoError(t, a.Release(ctx, key), "an applied delete with an unknown outcome is resolved by reading")
	l2 := s.acquire(t, b, key, "b")
	require.NoError(t, b.Release(ctx, key))

	setRules(t, f, fail(errUnknown, faulty.OpCompareAndSwap).applied().on(epoch).times(1))
	l3 := s.acquire(t, a, key, "a")
	assert.Equal(t, l2.Epoch+1, l3.Epoch, "an applied epoch bump with an unknown outcome counts once")
	s.requireHolder(t, b, key, l3, "a")
	require.NoError(t, a.Release(ctx, key))

	setRules(t, f,
		fail(errUnknown, faulty.OpInsertIfNotExists).on(lease).times(1),
		fail(errUnknown, faulty.OpCompareAndSwap).on(epoch).times(1))
	l4 := s.acquire(t, a, key, "a")
	assert.Equal(t, l3.Epoch+1, l4.Epoch, "writes not applied are retried")
	s.requireHolder(t, b, key, l4, "a")
	assert.Equal(t, uint64(2), f.InjectedOn(faulty.OpInsertIfNotExists))
	assert.Equal(t, uint64(2), f.InjectedOn(faulty.OpCompareAndSwap))
}

func (s *suite) specShape(t *testing.T) {
	st := s.store(t)
	var a, b elections.IElections[uint32, []byte] = s.elections(t, st, nil), s.elections(t, st, nil)
	key := newKey()
	ctx := a.AcquireLeadership(key, []byte("a"), s.h.Lease)
	require.NotNil(t, ctx)
	require.NoError(t, ctx.Err())
	require.Nil(t, b.AcquireLeadership(key, []byte("b"), s.h.Lease), "taken")
	require.Nil(t, a.AcquireLeadership(newKey(), []byte("a"), 1500*time.Millisecond), "not whole seconds")
	a.ReleaseLeadership(key)
	requireDone(t, ctx, elections.ErrReleased)
	require.NotNil(t, b.AcquireLeadership(key, []byte("b"), s.h.Lease))
}

// noLeaks checks at the end of t, after the cleanups registered later (the
// stores' Close among them), that t left no goroutine behind: Elections'
// goroutines must have ended at Cleanup, the stores' at Close. Taken before
// the store opens, so a driver's connections that open after Open returned
// (gocql fills its pools in the background) are not mistaken for leaks; the
// check waits, bounded, for the asynchronous end of closed connections.
func (s *suite) noLeaks(t *testing.T) {
	leak := append([]goleak.Option{goleak.IgnoreCurrent()}, s.h.LeakOptions...)
	t.Cleanup(func() { leakcheck.VerifyNone(t, leak...) })
}

func (s *suite) cleanup(t *testing.T) {
	s.noLeaks(t)
	st := s.store(t)
	r := newRecorder()
	a, b := s.elections(t, st, r), s.elections(t, st, nil)
	keys := []uint32{newKey(), newKey(), newKey()}
	var ls []*elections.Leadership
	for _, k := range keys {
		ls = append(ls, s.acquire(t, a, k, "a"))
	}
	a.Cleanup()
	for _, l := range ls {
		requireDone(t, l.Ctx, elections.ErrReleased)
	}
	for _, k := range keys {
		r.wait(t, k, elections.EventReleased)
		s.acquire(t, b, k, "b")
	}
	_, err := a.Acquire(context.Background(), newKey(), []byte("a"), s.h.Lease)
	require.ErrorIs(t, err, elections.ErrClosed)
	require.ErrorIs(t, err, storage.ErrClosed)
	a.Cleanup()
	b.Cleanup()
}

func (s *suite) cleanupWhileFailing(t *testing.T) {
	s.noLeaks(t)
	st := s.store(t)
	f := newFaulty(t, st)
	a := s.elections(t, f, nil)
	l1 := s.acquire(t, a, newKey(), "a")
	l2 := s.acquire(t, a, newKey(), "a")
	setRules(t, f, fail(errUnavailable, faulty.OpGet, faulty.OpInsertIfNotExists, faulty.OpCompareAndSwap, faulty.OpCompareAndDelete))
	s.h.Advance(t, s.tm.RenewEvery)
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Cleanup()
	}()
	select {
	case <-done:
	case <-time.After(eventTimeout):
		t.Fatal("Cleanup did not return while the storage fails")
	}
	require.Error(t, l1.Ctx.Err())
	require.Error(t, l2.Ctx.Err())
}
