package timeshard_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cqlseq/cqlseq/elections"
	"github.com/cqlseq/cqlseq/elections/electionstest"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/faulty"
	"github.com/cqlseq/cqlseq/storage/mem"
	"github.com/cqlseq/cqlseq/timeshard"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// stepClock is a FakeClock whose Now can also be stepped back (a wall clock
// corrected by NTP); its timers follow the fake clock.
type stepClock struct {
	*electionstest.FakeClock
	offset atomic.Int64 // ns added to Now
}

var _ elections.Clock = (*stepClock)(nil)

func (c *stepClock) Now() time.Time { return c.FakeClock.Now().Add(time.Duration(c.offset.Load())) }

func (c *stepClock) step(d time.Duration) { c.offset.Add(int64(d)) }

var t0 = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

func newClock() *stepClock { return &stepClock{FakeClock: electionstest.NewFakeClock(t0)} }

// small4 makes 4 IDs per millisecond per node, 8 nodes.
func small4() timeshard.Layout {
	l := timeshard.DefaultLayout()
	l.TimeBits, l.NodeBits, l.CounterBits = 58, 3, 2
	return l
}

func open(t *testing.T, st storage.Storage, clk elections.Clock, o timeshard.Options) *timeshard.Generator {
	t.Helper()
	o.Clock = clk
	g, err := timeshard.Open(context.Background(), st, "ids", o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.Close() })
	return g
}

// nextAfter calls Next, which must wait on the clock, advances the clock
// by d once it waits, and returns Next's result.
func nextAfter(t *testing.T, g *timeshard.Generator, clk *stepClock, d time.Duration) (int64, error) {
	t.Helper()
	type res struct {
		id  int64
		err error
	}
	c := make(chan res, 1)
	go func() {
		id, err := g.Next(context.Background())
		c <- res{id, err}
	}()
	select {
	case r := <-c:
		t.Fatalf("Next returned (%d, %v) without waiting for the clock", r.id, r.err)
	case <-time.After(50 * time.Millisecond):
	}
	clk.WaitForTimers(2) // the lease renewal's and Next's
	clk.Advance(d)
	r := <-c
	return r.id, r.err
}

func TestLayoutValidate(t *testing.T) {
	require.NoError(t, timeshard.DefaultLayout().Validate())
	l := timeshard.DefaultLayout()
	l.CounterBits = 13 // 41+10+13 = 64
	err := l.Validate()
	assert.ErrorIs(t, err, timeshard.ErrInvalidLayout)
	assert.ErrorIs(t, err, storage.ErrInvalidArgument)
	assert.ErrorContains(t, err, "= 64, want 63")
	l = timeshard.Layout{TimeBits: 10, NodeBits: 0, CounterBits: 53}
	err = l.Validate()
	for _, w := range []string{"Epoch is zero", "TimeBits 10", "NodeBits 0", "CounterBits 53"} {
		assert.ErrorContains(t, err, w, "every problem at once")
	}
	_, err = timeshard.Open(context.Background(), mem.New(mem.Options{}), "x", timeshard.Options{Layout: l})
	assert.ErrorIs(t, err, timeshard.ErrInvalidLayout)
}

func TestDefaultLayoutLifetime(t *testing.T) {
	l := timeshard.DefaultLayout()
	assert.Equal(t, uint32(1024), l.Nodes())
	assert.Equal(t, uint64(4096), l.PerMillisecond())
	assert.Equal(t, time.Date(2094, 9, 7, 15, 47, 35, 552_000_000, time.UTC), l.RunsOut())
	last := l.Compose(l.MaxMillis(), l.Nodes()-1, l.PerMillisecond()-1)
	assert.Positive(t, last, "the largest ID is still a positive int64")
}

func TestExtract(t *testing.T) {
	l := timeshard.DefaultLayout()
	at := time.Date(2030, 1, 2, 3, 4, 5, 678_000_000, time.UTC)
	id := l.Compose(at.UnixMilli()-l.Epoch.UnixMilli(), 1001, 4095)
	assert.Equal(t, at, l.Time(id))
	assert.Equal(t, uint32(1001), l.Node(id))
	assert.Equal(t, uint64(4095), l.Counter(id))
	assert.Less(t, l.FromTime(at), id)
	assert.Greater(t, l.FromTime(at.Add(time.Millisecond)), id)
}

func TestNodesAreLeased(t *testing.T) {
	st, clk := mem.New(mem.Options{}), newClock()
	l := small4()
	l.TimeBits, l.NodeBits = 60, 1 // two nodes
	o := timeshard.Options{Layout: l, FirstNode: 0}
	a := open(t, st, clk, o)
	b := open(t, st, clk, o)
	assert.Equal(t, uint32(0), a.Node())
	assert.Equal(t, uint32(1), b.Node())
	_, err := timeshard.Open(context.Background(), st, "ids", timeshard.Options{Layout: l, Clock: clk})
	assert.ErrorIs(t, err, timeshard.ErrNoNode)
	require.NoError(t, a.Close())
	c := open(t, st, clk, timeshard.Options{Layout: l, FirstNode: 0})
	assert.Equal(t, uint32(0), c.Node(), "a released node is free again")
}

func TestCounterExhaustionWaitsForNextMillisecond(t *testing.T) {
	clk := newClock()
	g := open(t, mem.New(mem.Options{}), clk, timeshard.Options{Layout: small4(), FirstNode: 0})
	l := g.Layout()
	first, err := nextAfter(t, g, clk, time.Millisecond) // a new holder starts after its start millisecond
	require.NoError(t, err)
	ids := []int64{first}
	for range 3 {
		id, err := g.Next(context.Background())
		require.NoError(t, err)
		ids = append(ids, id)
	}
	for i, id := range ids {
		assert.Equal(t, uint64(i), l.Counter(id))
		assert.Equal(t, l.Millis(first), l.Millis(id))
	}
	id, err := nextAfter(t, g, clk, time.Millisecond)
	require.NoError(t, err)
	assert.Equal(t, l.Millis(first)+1, l.Millis(id), "the fifth ID waited for the next millisecond")
	assert.Equal(t, uint64(0), l.Counter(id), "the counter starts again, it never wraps within a millisecond")
	assert.Greater(t, id, ids[3])
	assert.Equal(t, uint64(2), g.Stats().CounterWaits)
}

func TestClockBackwards(t *testing.T) {
	clk := newClock()
	g := open(t, mem.New(mem.Options{}), clk, timeshard.Options{Layout: small4(), FirstNode: 0, MaxBackwards: 100 * time.Millisecond})
	l := g.Layout()
	prev, err := nextAfter(t, g, clk, time.Millisecond)
	require.NoError(t, err)

	clk.step(-20 * time.Millisecond) // small: waits until the clock is back
	id, err := nextAfter(t, g, clk, 20*time.Millisecond)
	require.NoError(t, err)
	assert.Greater(t, id, prev, "no duplicate, no step back")
	assert.Equal(t, l.Millis(prev), l.Millis(id))
	assert.Equal(t, uint64(1), g.Stats().BackwardsWaits)

	clk.step(-2 * time.Second) // large: an error at once
	_, err = g.Next(context.Background())
	assert.ErrorIs(t, err, timeshard.ErrClockBackwards)
	clk.step(2 * time.Second)
	id2, err := g.Next(context.Background())
	require.NoError(t, err, "the clock back in place: IDs again")
	assert.Greater(t, id2, id)
}

func TestLeaseLossStopsGeneration(t *testing.T) {
	clk := newClock()
	fs, err := faulty.New(mem.New(mem.Options{Now: clk.Now}), faulty.Options{})
	require.NoError(t, err)
	o := timeshard.Options{Layout: small4(), FirstNode: 0, LeaseDuration: 3 * time.Second}
	g := open(t, fs, clk, o)
	_, err = nextAfter(t, g, clk, time.Millisecond)
	require.NoError(t, err)
	require.NoError(t, g.LeaseErr(), "a held lease")
	issued := g.Stats().Issued
	// Renewals fail from now on; the lease's local deadline is 2 s after
	// its write (3 s TTL - 1 s skew).
	require.NoError(t, fs.SetRules(faulty.Rule{Ops: []string{faulty.OpCompareAndSwap}, Action: faulty.Fail}))
	clk.Advance(2 * time.Second)
	assert.ErrorIs(t, g.LeaseErr(), timeshard.ErrLeaseLost, "LeaseErr sees the passed deadline")
	assert.Equal(t, issued, g.Stats().Issued, "LeaseErr takes no ID")
	_, err = g.Next(context.Background())
	assert.ErrorIs(t, err, timeshard.ErrLeaseLost)
	got, err := g.NextN(context.Background(), []int64{7}, 3)
	assert.ErrorIs(t, err, timeshard.ErrLeaseLost)
	assert.Equal(t, []int64{7}, got, "a batch after the loss adds nothing")
	fs.Clear()
	// The store still holds the lease (its TTL runs 1 s longer): node 0
	// is not free yet, so nobody else makes IDs with it while g could.
	h := open(t, fs, clk, o)
	assert.NotEqual(t, uint32(0), h.Node())
	clk.Advance(time.Second)
	k := open(t, fs, clk, o)
	assert.Equal(t, uint32(0), k.Node(), "once the TTL has passed node 0 is free")
	_, err = g.Next(context.Background())
	assert.ErrorIs(t, err, timeshard.ErrLeaseLost, "the lost generator stays stopped")
}

func TestHandOverStartsAfterPreviousHolder(t *testing.T) {
	clk := newClock()
	st := mem.New(mem.Options{})
	o := timeshard.Options{Layout: small4(), FirstNode: 0}
	g := open(t, st, clk, o)
	last, err := nextAfter(t, g, clk, time.Millisecond)
	require.NoError(t, err)
	require.NoError(t, g.Close())
	_, err = g.Next(context.Background())
	assert.ErrorIs(t, err, timeshard.ErrClosed)

	clk.step(-5 * time.Millisecond) // the next holder's clock is behind
	h := open(t, st, clk, o)
	require.Equal(t, uint32(0), h.Node())
	id, err := nextAfter(t, h, clk, 6*time.Millisecond)
	require.NoError(t, err)
	assert.Greater(t, h.Layout().Millis(id), h.Layout().Millis(last), "the new holder starts after the old one's last millisecond")
}

// TestConcurrentUnique runs on the real clock with 16 IDs per millisecond:
// the counter is exhausted all the time, and no ID repeats.
func TestConcurrentUnique(t *testing.T) {
	l := timeshard.DefaultLayout()
	l.TimeBits, l.CounterBits = 49, 4
	g, err := timeshard.Open(context.Background(), mem.New(mem.Options{}), "ids", timeshard.Options{Layout: l})
	require.NoError(t, err)
	defer g.Close()
	const workers, per = 8, 300
	out := make([][]int64, workers)
	var wg sync.WaitGroup
	for w := range out {
		wg.Go(func() {
			for range per {
				id, err := g.Next(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				out[w] = append(out[w], id)
			}
		})
	}
	wg.Wait()
	var all []int64
	for _, ids := range out {
		assert.True(t, slices.IsSorted(ids))
		all = append(all, ids...)
	}
	slices.Sort(all)
	assert.Len(t, slices.Compact(all), workers*per, "no duplicate")
	for _, id := range all {
		assert.Less(t, l.Counter(id), uint64(16))
		assert.Equal(t, g.Node(), l.Node(id))
	}
}

// TestCloseWithoutHighWaterKeepsTheLease: issue 20 item 3. When Close
// cannot record the high water (one failed write), the node's lease must
// stay until its TTL expires, as after a crash: on the old code Close
// deleted it, and a next holder whose clock was 5 ms behind took node 0 at
// once and issued an ID the first holder had already issued.
func TestCloseWithoutHighWaterKeepsTheLease(t *testing.T) {
	clk := newClock()
	inner := mem.New(mem.Options{Now: clk.Now})
	fs, err := faulty.New(inner, faulty.Options{})
	require.NoError(t, err)
	o := timeshard.Options{Layout: small4(), FirstNode: 0, LeaseDuration: 3 * time.Second}
	g := open(t, fs, clk, o)
	first, err := nextAfter(t, g, clk, time.Millisecond)
	require.NoError(t, err)
	issued := []int64{first}
	for range 2 { // the same millisecond: counters 1 and 2
		id, err := g.Next(context.Background())
		require.NoError(t, err)
		issued = append(issued, id)
	}
	require.NoError(t, fs.SetRules(faulty.Rule{Ops: []string{faulty.OpPutBatch}, Action: faulty.Fail, Times: 1}))
	err = g.Close()
	require.ErrorIs(t, err, storage.ErrUnavailable, "Close reports the failed high-water write")
	require.Equal(t, uint64(1), fs.InjectedOn(faulty.OpPutBatch))

	clk.step(-5 * time.Millisecond) // the next holder's clock is behind
	h := open(t, fs, clk, o)
	assert.NotEqual(t, uint32(0), h.Node(), "node 0's lease stays until its TTL expires")
	if h.Node() == 0 {
		// Its clock reaches g's millisecond again.
		id, err := nextAfter(t, h, clk, 5*time.Millisecond)
		require.NoError(t, err)
		assert.NotContains(t, issued, id, "the next holder of node 0 repeated an ID")
	}

	// Once the TTL has passed (3 s after the lease's write, on a clock now
	// 5 ms behind), node 0 is free and its next holder starts after every
	// ID g issued.
	clk.Advance(3*time.Second + 5*time.Millisecond)
	k := open(t, fs, clk, o)
	require.Equal(t, uint32(0), k.Node())
	id, err := nextAfter(t, k, clk, time.Millisecond)
	require.NoError(t, err)
	assert.Greater(t, id, issued[len(issued)-1])
}

// TestCloseAfterTheLocalDeadlineKeepsTheLease: Close right after the
// lease's local deadline skips the high-water write (the lease may be
// another's by now); it must not delete the lease either, which the store
// still holds for Skew: g issued IDs up to its deadline, and a holder
// taking node 0 at once, with a clock up to Skew behind, could repeat them.
func TestCloseAfterTheLocalDeadlineKeepsTheLease(t *testing.T) {
	clk := newClock()
	fs, err := faulty.New(mem.New(mem.Options{Now: clk.Now}), faulty.Options{})
	require.NoError(t, err)
	o := timeshard.Options{Layout: small4(), FirstNode: 0, LeaseDuration: 3 * time.Second}
	g := open(t, fs, clk, o)
	_, err = nextAfter(t, g, clk, time.Millisecond)
	require.NoError(t, err)
	require.NoError(t, fs.SetRules(faulty.Rule{Ops: []string{faulty.OpCompareAndSwap}, Action: faulty.Fail}))
	clk.Advance(2 * time.Second) // the local deadline: 3 s TTL - 1 s skew
	require.NoError(t, g.Close())
	fs.Clear()
	assert.Zero(t, fs.InjectedOn(faulty.OpPut), "no high water written")

	h := open(t, fs, clk, o)
	assert.NotEqual(t, uint32(0), h.Node(), "the store still holds node 0's lease for its last second")
	clk.Advance(time.Second)
	k := open(t, fs, clk, o)
	assert.Equal(t, uint32(0), k.Node(), "once the TTL has passed node 0 is free")
}

// TestNextNSpansMilliseconds: a batch larger than what is left of a
// millisecond takes the rest of it, waits for the next millisecond, and so
// on; the IDs are appended after dst's, in increasing order, as Next would
// have made them.
func TestNextNSpansMilliseconds(t *testing.T) {
	clk := newClock()
	g := open(t, mem.New(mem.Options{}), clk, timeshard.Options{Layout: small4(), FirstNode: 0})
	l := g.Layout()
	first, err := nextAfter(t, g, clk, time.Millisecond)
	require.NoError(t, err)
	type res struct {
		ids []int64
		err error
	}
	c := make(chan res, 1)
	go func() {
		ids, err := g.NextN(context.Background(), []int64{-1}, 10)
		c <- res{ids, err}
	}()
	for range 2 { // 3 IDs left in this millisecond, 4 in the next, 3 in the third
		clk.WaitForTimers(2) // the lease renewal's and NextN's
		clk.Advance(time.Millisecond)
	}
	r := <-c
	require.NoError(t, r.err)
	require.Len(t, r.ids, 11)
	assert.Equal(t, int64(-1), r.ids[0], "dst's IDs are kept")
	wantCounter := []uint64{1, 2, 3, 0, 1, 2, 3, 0, 1, 2}
	wantMs := []int64{0, 0, 0, 1, 1, 1, 1, 2, 2, 2}
	prev := first
	for i, id := range r.ids[1:] {
		assert.Equal(t, wantCounter[i], l.Counter(id), "ID %d", i)
		assert.Equal(t, l.Millis(first)+wantMs[i], l.Millis(id), "ID %d", i)
		assert.Equal(t, g.Node(), l.Node(id))
		assert.Greater(t, id, prev, "ID %d", i)
		prev = id
	}
	st := g.Stats()
	assert.Equal(t, uint64(11), st.Issued)
	assert.Equal(t, uint64(1+2), st.CounterWaits, "the first ID's and the batch's two")
}

// TestNextNBadCountAndEndedContext: a count outside 1..MaxNextN and a
// context ending while NextN waits both return dst as given; the IDs a
// cancelled batch had made are never made again.
func TestNextNBadCountAndEndedContext(t *testing.T) {
	clk := newClock()
	g := open(t, mem.New(mem.Options{}), clk, timeshard.Options{Layout: small4(), FirstNode: 0})
	l := g.Layout()
	first, err := nextAfter(t, g, clk, time.Millisecond)
	require.NoError(t, err)
	dst := []int64{5}
	for _, n := range []int{0, -1, timeshard.MaxNextN + 1} {
		got, err := g.NextN(context.Background(), dst, n)
		assert.ErrorIs(t, err, storage.ErrInvalidArgument, "n=%d", n)
		assert.Equal(t, dst, got, "n=%d", n)
	}
	assert.Equal(t, uint64(1), g.Stats().Issued, "a bad count takes no ID")

	ctx, cancel := context.WithCancel(context.Background())
	c := make(chan error, 1)
	go func() {
		got, err := g.NextN(ctx, dst, 5) // 3 made in this millisecond, then a wait
		assert.Equal(t, dst, got)
		c <- err
	}()
	clk.WaitForTimers(2)
	cancel()
	assert.ErrorIs(t, <-c, context.Canceled)
	id, err := nextAfter(t, g, clk, time.Millisecond)
	require.NoError(t, err)
	assert.Equal(t, l.Millis(first)+1, l.Millis(id), "the cancelled batch's counters stay used")
	assert.Equal(t, uint64(0), l.Counter(id))
}
