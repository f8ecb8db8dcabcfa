// Package timeshard owns time-sharded 64-bit IDs: milliseconds since an
// epoch, a node ID and a per-millisecond counter, in a configurable and
// validated bit split (Layout), like BDR's timeshard sequences but without
// their weak spots. Node IDs are not configured by hand: each generator
// leases one through package elections on the storage contract (mem, bbolt,
// CQL), so restarted containers never collide.
//
// Guarantees, for the IDs of one generator name:
//   - No duplicate while the node lease is held: within a node, IDs
//     strictly increase. A counter exhausted within a millisecond waits for
//     the next one (it never wraps); a clock that steps back waits until it
//     has caught up with the last ID's millisecond, or fails with
//     ErrClockBackwards when the step exceeds Options.MaxBackwards.
//   - Generation stops when the lease is lost, at the lease's local
//     deadline, which passes before the store lets another process take the
//     node ID (elections.Options.Skew earlier).
//   - A node ID handed over: Close records the last millisecond used, and
//     the next holder starts after it. After a crash, or a Close that could
//     not record it (the lease then stays until it expires), the next
//     holder can only start once the lease has expired in the store, at
//     least Skew after the previous holder stopped; clocks of different
//     machines must differ by less than that.
//   - IDs are non-negative int64s (the sign bit is never set) and sort by
//     time to the millisecond; within a millisecond, by node, then counter.
//   - A layout change does not make IDs repeat or go back: the name's
//     layout is recorded in the store, and Open refuses another one
//     (ErrLayoutChange) unless its IDs from now on exceed every ID the
//     recorded one can make until LayoutChangeMargin from now
//     (CheckLayoutChange).
package timeshard

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/cqlseq/cqlseq/elections"
	"github.com/cqlseq/cqlseq/storage"
)

// Defaults of Options.
const (
	DefaultMaxBackwards   = time.Second
	DefaultLeaseDuration  = 15 * time.Second
	DefaultReleaseTimeout = 5 * time.Second
)

// Options configure a Generator.
type Options struct {
	// Layout is the bit split and epoch. Default DefaultLayout().
	Layout Layout
	// Clock gives the time of IDs and measures the node lease. Default
	// elections.SystemClock().
	Clock elections.Clock
	// MaxBackwards is the largest backwards clock step Next waits out;
	// beyond it Next fails with ErrClockBackwards. Default 1 s.
	MaxBackwards time.Duration
	// LeaseDuration is the node lease's TTL: whole seconds, more than Skew.
	// Default 15 s.
	LeaseDuration time.Duration
	// Skew is elections.Options.Skew: how long before the store's expiry
	// the lease counts as lost locally. Default elections' (1 s).
	Skew time.Duration
	// FirstNode is the node ID tried first (default 0); the others follow
	// in order. -1 starts at a random one, which spreads the acquisitions
	// of processes that start together.
	FirstNode int64
	// Process is stored as the lease's value. Default "host:pid".
	Process string
	// ReleaseTimeout bounds Close's storage calls. Default 5 s.
	ReleaseTimeout time.Duration
	// RandomStart, when above 1, starts each millisecond's counter at a
	// uniformly random value in [0, RandomStart) instead of 0, so that IDs
	// made at low rates do not all end in the same bits (Leaf's
	// SnowflakeIDGenImpl: LeafRandomStart, so id % 100 spreads over all
	// 100 buckets). The counter still only increases within a
	// millisecond: a start of r leaves PerMillisecond()-r values, after
	// which the next ID waits for the next millisecond as usual. At most
	// Layout.PerMillisecond(). Default 0: every millisecond starts at 0.
	RandomStart uint64
	// Rand draws the random starts (RandomStart); it is called with the
	// generator's lock held, so a Source of its own per generator needs no
	// lock (one shared by generators must be safe for concurrent use).
	// Default nil: math/rand/v2's global source. Tests give a seeded one.
	Rand rand.Source
}

// EnsureDefaults fills zero fields with their defaults.
func (o *Options) EnsureDefaults() {
	if o.Layout == (Layout{}) {
		o.Layout = DefaultLayout()
	}
	if o.Clock == nil {
		o.Clock = elections.SystemClock()
	}
	if o.MaxBackwards == 0 {
		o.MaxBackwards = DefaultMaxBackwards
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.Skew == 0 {
		o.Skew = elections.DefaultSkew
	}
	if o.Process == "" {
		h, _ := os.Hostname()
		o.Process = h + ":" + strconv.Itoa(os.Getpid())
	}
	if o.ReleaseTimeout == 0 {
		o.ReleaseTimeout = DefaultReleaseTimeout
	}
}

// Validate reports every problem at once.
func (o *Options) Validate() error {
	errs := []error{o.Layout.Validate()}
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, a...)...))
	}
	if o.Clock == nil {
		bad("Clock is nil")
	}
	if o.MaxBackwards < 0 {
		bad("MaxBackwards %v is negative", o.MaxBackwards)
	}
	if o.Skew < 0 {
		bad("Skew %v is negative", o.Skew)
	} else if _, err := (&elections.Options{Skew: o.Skew}).TimingFor(o.LeaseDuration); err != nil {
		bad("LeaseDuration: %v", err)
	}
	if o.FirstNode < -1 || o.Layout.NodeBits <= MaxNodeBits && o.FirstNode >= int64(o.Layout.Nodes()) {
		bad("FirstNode %d: want -1 (random) or a node ID below %d", o.FirstNode, o.Layout.Nodes())
	}
	if o.ReleaseTimeout <= 0 {
		bad("ReleaseTimeout %v is not positive", o.ReleaseTimeout)
	}
	if o.Layout.CounterBits <= MaxCounterBits && o.RandomStart > o.Layout.PerMillisecond() {
		bad("RandomStart %d: want at most %d (the layout's IDs per millisecond)", o.RandomStart, o.Layout.PerMillisecond())
	}
	return errors.Join(errs...)
}

// Stats are a Generator's counters.
type Stats struct {
	Node           uint32
	Issued         uint64
	CounterWaits   uint64 // waits for the next millisecond (a NextN batch may wait several times)
	BackwardsWaits uint64 // waits for a clock gone back
}

// Generator makes the IDs of one node of a generator name. Its methods are
// safe for concurrent use. Close must be called to release the node.
type Generator struct {
	o       Options
	l       Layout
	ls      nodes
	el      *elections.Elections
	lease   *elections.Leadership
	node    uint32
	lost    atomic.Bool // set when the lease's context ends
	stopAF  func() bool // stops the AfterFunc that sets lost
	epochMs int64
	perMs   uint64
	rnd     *rand.Rand // nil: the global source (Options.Rand)

	mu struct {
		sync.Mutex
		lastMs   int64     // ms since the epoch of the last ID (or of the start)
		deadline time.Time // the lease's local deadline as last read
		counter  uint64
		closed   bool
		stats    Stats
	}
}

// Open leases a free node ID of generator name in st and returns its
// Generator; it fails with ErrNoNode when every node ID is leased. st is
// not closed by Close.
func Open(ctx context.Context, st storage.Storage, name string, o Options) (*Generator, error) {
	o.EnsureDefaults()
	errs := []error{o.Validate()}
	if name == "" || len(name) > MaxNameLen || !utf8.ValidString(name) {
		errs = append(errs, fmt.Errorf("%w: name %q: want 1..%d bytes of UTF-8", ErrInvalidOptions, name, MaxNameLen))
	}
	if st == nil {
		errs = append(errs, fmt.Errorf("%w: nil storage", ErrInvalidOptions))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	ls, err := newNodes(st, name)
	if err != nil {
		return nil, err
	}
	g := &Generator{o: o, l: o.Layout, ls: ls, epochMs: o.Layout.Epoch.UnixMilli(), perMs: o.Layout.PerMillisecond()}
	if o.Rand != nil {
		g.rnd = rand.New(o.Rand)
	}
	if err := checkLayoutRecord(ctx, st, name, o.Layout, o.Clock.Now()); err != nil {
		return nil, err
	}
	el, err := elections.New(ls.leases, elections.Options{Clock: o.Clock, Skew: o.Skew, ReleaseTimeout: o.ReleaseTimeout})
	if err != nil {
		return nil, err
	}
	g.el = el
	if err := g.acquire(ctx); err != nil {
		el.Cleanup()
		if g.stopAF != nil {
			g.stopAF()
		}
		return nil, err
	}
	return g, nil
}

// acquire leases the first free node ID from FirstNode on and reads its
// high water.
func (g *Generator) acquire(ctx context.Context) error {
	n := g.l.Nodes()
	first := uint32(rand.N(n))
	if g.o.FirstNode >= 0 {
		first = uint32(g.o.FirstNode)
	}
	for i := range n {
		node := (first + i) % n
		l, err := g.el.Acquire(ctx, node, []byte(g.o.Process), g.o.LeaseDuration)
		if errors.Is(err, elections.ErrTaken) {
			continue
		}
		if err != nil {
			return fmt.Errorf("timeshard: leasing node %d: %w", node, err)
		}
		g.lease, g.node = l, node
		g.stopAF = context.AfterFunc(l.Ctx, func() { g.lost.Store(true) })
		g.mu.stats.Node = node
		hw, ok, err := g.ls.highWater(ctx, node)
		if err != nil {
			return err
		}
		// The previous holder may have used hw to its last counter value,
		// and this process may itself have used the current millisecond
		// under an earlier lease of this node: start after both.
		g.mu.lastMs = g.o.Clock.Now().UnixMilli() - g.epochMs
		if ok {
			g.mu.lastMs = max(g.mu.lastMs, hw-g.epochMs)
		}
		g.mu.counter = g.perMs - 1
		return nil
	}
	return fmt.Errorf("%w: all %d node IDs are leased", ErrNoNode, n)
}

// Node returns the leased node ID.
func (g *Generator) Node() uint32 { return g.node }

// Layout returns the generator's layout.
func (g *Generator) Layout() Layout { return g.l }

// Next returns a new ID. It waits for the next millisecond when this one's
// counter is used up, and for the clock to catch up when it went back by
// at most MaxBackwards; it fails with ErrClockBackwards beyond that, with
// ErrLeaseLost once the node lease is lost or past its local deadline,
// with ErrTimeRange outside the layout's time span, with ErrClosed after
// Close, and with ctx's error when ctx ends while it waits.
func (g *Generator) Next(ctx context.Context) (int64, error) {
	var one [1]int64
	ids, err := g.NextN(ctx, one[:0], 1)
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// MaxNextN is the largest count NextN takes.
const MaxNextN = 1 << 24

// NextN appends n new IDs (1 <= n <= MaxNextN) to dst, in increasing order,
// and returns the extended slice. It makes them as n calls of Next would,
// with its waits and errors, but takes the generator's lock, reads the
// clock and checks the lease once for each millisecond's run of IDs
// instead of once per ID. On error it returns dst as given: the IDs it
// had made are dropped, and never made again.
func (g *Generator) NextN(ctx context.Context, dst []int64, n int) ([]int64, error) {
	if n < 1 || n > MaxNextN {
		return dst, fmt.Errorf("timeshard: NextN(%d): %w: want 1..%d", n, storage.ErrInvalidArgument, MaxNextN)
	}
	out := dst
	g.mu.Lock()
	for {
		wait, err := g.step()
		if err != nil {
			g.mu.Unlock()
			return dst, err
		}
		if wait == 0 {
			// step took counter; the rest of this millisecond's counters
			// follow without another look at the clock: they carry the
			// millisecond the lease was checked at.
			k := min(uint64(n-(len(out)-len(dst))), g.perMs-g.mu.counter)
			for i := range k {
				out = append(out, g.l.Compose(g.mu.lastMs, g.node, g.mu.counter+i))
			}
			g.mu.counter += k - 1
			g.mu.stats.Issued += k
			if len(out)-len(dst) == n {
				g.mu.Unlock()
				return out, nil
			}
			continue
		}
		g.mu.Unlock()
		if err := g.sleep(ctx, wait); err != nil {
			return dst, err
		}
		g.mu.Lock()
	}
}

// step takes the next counter value of the current millisecond, or says
// how long to wait before one can be taken. Called with g.mu held; on a
// zero wait, g.mu.lastMs and g.mu.counter name the value taken.
func (g *Generator) step() (time.Duration, error) {
	if g.mu.closed {
		return 0, ErrClosed
	}
	now := g.o.Clock.Now()
	if err := g.leaseErr(now); err != nil {
		return 0, err
	}
	ms := now.UnixMilli() - g.epochMs
	if ms < 0 || ms > g.l.MaxMillis() {
		return 0, fmt.Errorf("%w: %v is outside [%v, %v)", ErrTimeRange, now.UTC(), g.l.Epoch.UTC(), g.l.RunsOut())
	}
	switch {
	case ms > g.mu.lastMs:
		g.mu.lastMs, g.mu.counter = ms, g.firstCounter()
		return 0, nil
	case ms == g.mu.lastMs && g.mu.counter+1 < g.perMs:
		g.mu.counter++
		return 0, nil
	case ms == g.mu.lastMs:
		g.mu.stats.CounterWaits++
		return time.UnixMilli(g.epochMs + ms + 1).Sub(now), nil
	default:
		behind := time.Duration(g.mu.lastMs-ms) * time.Millisecond
		if behind > g.o.MaxBackwards {
			return 0, fmt.Errorf("%w: %v behind the last ID (bound %v)", ErrClockBackwards, behind, g.o.MaxBackwards)
		}
		g.mu.stats.BackwardsWaits++
		return time.UnixMilli(g.epochMs + g.mu.lastMs).Sub(now), nil
	}
}

// firstCounter returns a new millisecond's first counter value: 0, or a
// random one below Options.RandomStart. Called with g.mu held.
func (g *Generator) firstCounter() uint64 {
	switch {
	case g.o.RandomStart <= 1:
		return 0
	case g.rnd != nil:
		return g.rnd.Uint64N(g.o.RandomStart)
	default:
		return rand.Uint64N(g.o.RandomStart)
	}
}

// LeaseErr returns nil while Next may hand out IDs as far as the node
// lease goes, an error wrapping ErrLeaseLost once the lease is lost or past
// its local deadline, and ErrClosed after Close. It takes no ID.
func (g *Generator) LeaseErr() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mu.closed {
		return ErrClosed
	}
	return g.leaseErr(g.o.Clock.Now())
}

// leaseErr reports a lost lease, or one whose local deadline has passed
// although its timer has not fired yet.
// Called with g.mu held; the deadline is re-read from the lease only
// when the cached one has passed (renewals only move it later).
func (g *Generator) leaseErr(now time.Time) error {
	if g.lost.Load() {
		return fmt.Errorf("%w: node %d: %w", ErrLeaseLost, g.node, context.Cause(g.lease.Ctx))
	}
	if !now.Before(g.mu.deadline) {
		g.mu.deadline = g.lease.Deadline()
		if !now.Before(g.mu.deadline) {
			return fmt.Errorf("%w: node %d: local deadline %v passed", ErrLeaseLost, g.node, g.mu.deadline)
		}
	}
	return nil
}

// sleep waits d on the Clock (at least a tick, so that a wait computed as
// 0 still lets the clock move), or until ctx or the lease ends.
func (g *Generator) sleep(ctx context.Context, d time.Duration) error {
	t := g.o.Clock.NewTimer(max(d, time.Microsecond))
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("timeshard: waiting for the clock: %w", ctx.Err())
	case <-g.lease.Ctx.Done():
		return fmt.Errorf("%w: node %d: %w", ErrLeaseLost, g.node, context.Cause(g.lease.Ctx))
	}
}

// Stats returns the generator's counters.
func (g *Generator) Stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mu.stats
}

// Close records the last millisecond used for the node's next holder and
// releases the node lease. Later calls (Next and the generator's other
// methods) fail with ErrClosed. It returns the error of recording the high
// water.
//
// The lease is released (deleted) only after the high water is recorded.
// When it is not (the write failed or its outcome is unknown, or the lease
// was lost or past its local deadline, when the high water is not written
// at all: the node may be another's by now), the lease is abandoned
// instead: it stays in the store until its TTL expires, as after a crash,
// so the node's next holder starts from its own clock, at least Skew after
// this generator's last ID.
func (g *Generator) Close() error {
	g.mu.Lock()
	if g.mu.closed {
		g.mu.Unlock()
		return nil
	}
	g.mu.closed = true
	last := g.mu.lastMs
	g.mu.Unlock()
	var err error
	recorded := false
	if g.lease.Ctx.Err() == nil && g.o.Clock.Now().Before(g.lease.Deadline()) {
		ctx, cancel := context.WithTimeout(context.Background(), g.o.ReleaseTimeout)
		err = g.ls.putHighWater(ctx, g.node, g.epochMs+last)
		cancel()
		recorded = err == nil
	}
	if !recorded {
		g.el.Abandon(g.node)
	}
	g.el.Cleanup()
	if g.stopAF != nil {
		g.stopAF()
	}
	return err
}
