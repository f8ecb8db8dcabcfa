package elections_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/elections"
	"github.com/cqlseq/cqlseq/elections/electionstest"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/mem"
)

func TestOptionsValidate(t *testing.T) {
	o := elections.Options{Skew: -time.Second, ReleaseTimeout: -1}
	err := o.Validate()
	require.ErrorIs(t, err, storage.ErrInvalidArgument)
	for _, want := range []string{"Clock is nil", "Skew -1s is negative", "ReleaseTimeout -1ns is not positive"} {
		assert.ErrorContains(t, err, want)
	}
	o = elections.Options{}
	o.EnsureDefaults()
	require.NoError(t, o.Validate())
	assert.Equal(t, elections.DefaultSkew, o.Skew)
	assert.Equal(t, elections.DefaultReleaseTimeout, o.ReleaseTimeout)

	_, err = elections.New(nil, elections.Options{Skew: -1})
	require.ErrorIs(t, err, storage.ErrInvalidArgument)
	assert.ErrorContains(t, err, "nil ITTLStorage")
	assert.ErrorContains(t, err, "Skew")
	_, err = elections.NewOverStorage(nil, elections.Options{})
	require.ErrorIs(t, err, storage.ErrInvalidArgument)
}

func TestTimingFor(t *testing.T) {
	o := elections.Options{Skew: time.Second}
	tm, err := o.TimingFor(10 * time.Second)
	require.NoError(t, err)
	assert.Equal(t, elections.Timing{Duration: 10 * time.Second, Validity: 9 * time.Second, RenewEvery: 3 * time.Second, RetryEvery: 750 * time.Millisecond}, tm)
	for _, d := range []time.Duration{0, -time.Second, 1500 * time.Millisecond, time.Second, storage.MaxTTL + time.Second} {
		_, err := o.TimingFor(d)
		assert.ErrorIs(t, err, storage.ErrInvalidArgument, "%v", d)
	}
}

// blocking makes chosen calls block until their context is done.
type blocking struct {
	storage.Storage
	insert, cas atomic.Bool
	entered     chan struct{}
}

func newBlocking(st storage.Storage) *blocking {
	return &blocking{Storage: st, entered: make(chan struct{}, 16)}
}

func (b *blocking) block(ctx context.Context) error {
	b.entered <- struct{}{}
	<-ctx.Done()
	return fmt.Errorf("blocking: %w", ctx.Err())
}

func (b *blocking) InsertIfNotExists(ctx context.Context, pKey, cCols, value []byte, ttl time.Duration) (bool, error) {
	if b.insert.Load() {
		return false, b.block(ctx)
	}
	return b.Storage.InsertIfNotExists(ctx, pKey, cCols, value, ttl)
}

func (b *blocking) CompareAndSwap(ctx context.Context, pKey, cCols, oldValue, newValue []byte, ttl time.Duration) (bool, error) {
	if b.cas.Load() {
		return false, b.block(ctx)
	}
	return b.Storage.CompareAndSwap(ctx, pKey, cCols, oldValue, newValue, ttl)
}

func newFake(t *testing.T) (*electionstest.FakeClock, storage.Storage) {
	clock := electionstest.NewFakeClock(time.Unix(1_750_000_000, 0))
	st := mem.New(mem.Options{Now: clock.Now})
	t.Cleanup(func() { _ = st.Close() })
	return clock, st
}

func newElections(t *testing.T, st storage.Storage, o elections.Options) *elections.Elections {
	e, err := elections.NewOverStorage(st, o)
	require.NoError(t, err)
	t.Cleanup(e.Cleanup)
	return e
}

func TestAcquisitionSlowerThanValidityFails(t *testing.T) {
	clock, st := newFake(t)
	b := newBlocking(st)
	b.insert.Store(true)
	e := newElections(t, b, elections.Options{Clock: clock})
	errc := make(chan error, 1)
	go func() {
		_, err := e.Acquire(context.Background(), 1, []byte("a"), 10*time.Second)
		errc <- err
	}()
	<-b.entered
	clock.Advance(9 * time.Second)
	err := <-errc
	require.Error(t, err)
	assert.ErrorContains(t, err, "within the lease's validity")
	b.insert.Store(false)
	_, err = e.Acquire(context.Background(), 1, []byte("a"), 10*time.Second)
	require.NoError(t, err, "a failed acquisition leaves the key free here")
}

func TestCleanupAbortsAcquisition(t *testing.T) {
	clock, st := newFake(t)
	b := newBlocking(st)
	b.insert.Store(true)
	e := newElections(t, b, elections.Options{Clock: clock})
	errc := make(chan error, 1)
	go func() {
		_, err := e.Acquire(context.Background(), 1, []byte("a"), 10*time.Second)
		errc <- err
	}()
	<-b.entered
	e.Cleanup()
	require.ErrorIs(t, <-errc, elections.ErrClosed)
}

func TestRenewalStuckPastDeadlineLoses(t *testing.T) {
	clock, st := newFake(t)
	b := newBlocking(st)
	e := newElections(t, b, elections.Options{Clock: clock})
	l, err := e.Acquire(context.Background(), 1, []byte("a"), 10*time.Second)
	require.NoError(t, err)
	b.cas.Store(true)
	clock.Advance(3 * time.Second)
	<-b.entered
	require.NoError(t, l.Ctx.Err(), "a renewal in flight within the validity")
	clock.Advance(6 * time.Second)
	<-l.Ctx.Done()
	require.ErrorIs(t, context.Cause(l.Ctx), elections.ErrLost)
	assert.ErrorContains(t, context.Cause(l.Ctx), "not renewed by its local deadline")
	ttl, ok, err := st.QueryTTL(context.Background(), elections.PKey(1), elections.CCols(elections.RowLease))
	require.NoError(t, err)
	require.True(t, ok, "the store still holds the lease when it is lost locally")
	assert.Equal(t, time.Second, ttl, "Skew is left")
}

func TestCorruptEpochRow(t *testing.T) {
	clock, st := newFake(t)
	require.NoError(t, st.Put(context.Background(), elections.PKey(5), elections.CCols(elections.RowEpoch), []byte("bad")))
	e := newElections(t, st, elections.Options{Clock: clock})
	_, err := e.Acquire(context.Background(), 5, []byte("a"), 10*time.Second)
	require.ErrorIs(t, err, elections.ErrCorrupt)
	_, ok, err := st.Get(context.Background(), elections.PKey(5), elections.CCols(elections.RowLease))
	require.NoError(t, err)
	assert.False(t, ok, "no lease is left behind")
}

// TestConcurrentAcquireRelease races acquisitions and releases of a few
// keys from several Elections (time stands still: no lease expires) and
// checks that no key ever has two holders and that epochs grow.
func TestConcurrentAcquireRelease(t *testing.T) {
	clock, st := newFake(t)
	const keys, nodes, rounds = 3, 4, 200
	var holders [keys]atomic.Int32
	var epochs [keys]struct {
		sync.Mutex
		last uint64
	}
	var wg sync.WaitGroup
	for n := range nodes {
		e := newElections(t, st, elections.Options{Clock: clock})
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(n), 1))
			for range rounds {
				k := uint32(r.IntN(keys))
				l, err := e.Acquire(context.Background(), k, []byte{byte(n)}, 10*time.Second)
				if err != nil {
					assert.ErrorIs(t, err, elections.ErrTaken)
					continue
				}
				assert.Equal(t, int32(1), holders[k].Add(1), "key %d has two holders", k)
				epochs[k].Lock()
				assert.Greater(t, l.Epoch, epochs[k].last)
				epochs[k].last = l.Epoch
				epochs[k].Unlock()
				holders[k].Add(-1)
				assert.NoError(t, e.Release(context.Background(), k))
			}
		})
	}
	wg.Wait()
}

// TestAbandonLeavesTheLeaseToExpire: Abandon ends the leadership here
// without deleting the lease (nor does Cleanup afterwards); another
// holder gets the key only once the TTL has passed.
func TestAbandonLeavesTheLeaseToExpire(t *testing.T) {
	clock, st := newFake(t)
	e := newElections(t, st, elections.Options{Clock: clock})
	l, err := e.Acquire(context.Background(), 1, []byte("a"), 3*time.Second)
	require.NoError(t, err)
	e.Abandon(1)
	require.ErrorIs(t, context.Cause(l.Ctx), elections.ErrAbandoned)
	e.Abandon(1) // not held any more: a no-op
	e.Cleanup()
	h, ok, err := e.Holder(context.Background(), 1)
	require.NoError(t, err)
	require.True(t, ok, "the lease is still stored")
	assert.Equal(t, []byte("a"), h.Value)

	other := newElections(t, st, elections.Options{Clock: clock})
	_, err = other.Acquire(context.Background(), 1, []byte("b"), 3*time.Second)
	require.ErrorIs(t, err, elections.ErrTaken)
	clock.Advance(3 * time.Second)
	_, err = other.Acquire(context.Background(), 1, []byte("b"), 3*time.Second)
	require.NoError(t, err, "free once the TTL has passed")
}

// slowFailing fails the next compare-and-swap after advancing clock by
// took, as an attempt that waited out a silent coordinator does.
type slowFailing struct {
	storage.Storage
	clock *electionstest.FakeClock
	took  time.Duration
	fail  atomic.Bool
}

func (s *slowFailing) CompareAndSwap(ctx context.Context, pKey, cCols, oldValue, newValue []byte, ttl time.Duration) (bool, error) {
	if s.fail.CompareAndSwap(true, false) {
		s.clock.Advance(s.took)
		return false, fmt.Errorf("slow: %w", storage.ErrUnknownOutcome)
	}
	return s.Storage.CompareAndSwap(ctx, pKey, cCols, oldValue, newValue, ttl)
}

// TestSlowFailedRenewalIsRetriedAtOnce: a renewal is retried RetryEvery
// after the failed attempt began, so one that failed after longer than
// that is retried at once, without the clock moving on.
func TestSlowFailedRenewalIsRetriedAtOnce(t *testing.T) {
	clock, st := newFake(t)
	s := &slowFailing{Storage: st, clock: clock, took: 2 * time.Second}
	events := make(chan elections.Event, 16)
	e := newElections(t, s, elections.Options{Clock: clock, OnEvent: func(ev elections.Event) { events <- ev }})
	l, err := e.Acquire(context.Background(), 1, []byte("a"), 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, elections.EventAcquired, (<-events).Kind)
	s.fail.Store(true)
	clock.Advance(3 * time.Second) // the renewal begins, fails 2 s later
	require.Equal(t, elections.EventRenewFailed, (<-events).Kind)
	select {
	case ev := <-events:
		require.Equal(t, elections.EventRenewed, ev.Kind, "%+v", ev)
	case <-time.After(10 * time.Second):
		t.Fatal("the retry waited for the clock: want it at once, RetryEvery (750ms) after a 2 s attempt began")
	}
	require.NoError(t, l.Ctx.Err())
	assert.Equal(t, clock.Now().Add(9*time.Second), l.Deadline(), "the validity counts from the retry's start")
}
