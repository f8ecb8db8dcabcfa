// Package idservice is the ID service that `cqlseq serve` runs: one HTTP/JSON
// API over galloc's named sequences, timeshard's time-sharded IDs (a 63-bit
// and a 53-bit layout) and ksuuid's UUIDv7s, with Meituan Leaf's two paths
// and monitor pages beside it. docs/service.md describes the API; this package holds its one
// definition: the routes (Handler), the service logic (Service) and the
// server's life (Serve).
//
// Many instances may serve one store: the sequences' chunks are allocated
// by compare-and-swap (galloc) and each instance leases its own node ID of
// each layout (timeshard), released by Close. A layout whose node IDs are
// all leased (more instances than node IDs, or a crash loop's leases not
// expired yet) does not stop the others: it is answered 503 no_node_lease
// while a node ID is sought in the background (Waiting).
//
// A request that is refused for its input (a bad count, name, ID, body or
// token, an unknown route or layout) costs nothing: it is refused before
// any ID is taken and before any store call. An unknown sequence costs one
// read of its record, and then none for Options.UnknownTTL.
package idservice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/cqlseq/cqlseq/galloc"
	"github.com/cqlseq/cqlseq/ksuuid"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/timeshard"
)

// errNoGenerator: the layout has no generator (no node ID was free, or its
// node lease was lost, and none is leased yet).
var errNoGenerator = errors.New("idservice: no node lease held for the layout")

// probeName is the sequence whose record the store probe reads (it need
// not exist).
const probeName = "cqlseq.readyz-probe"

// Service hands out the IDs. Its methods are safe for concurrent use.
// Close must be called to stop its background checks and release its node
// leases.
type Service struct {
	o       Options
	st      storage.Storage
	log     *slog.Logger
	layouts map[string]*layoutSlot
	m       *serviceMetrics

	storeUp  atomic.Bool
	draining atomic.Bool
	closed   atomic.Bool

	open singleflight.Group
	// seqs holds the open sequences, name -> *galloc.Sequence: written
	// once per name (openSequence) and cleared by Close, both under mu;
	// read without a lock on every request (a mutex there, held by a
	// thread the OS preempts, stalls every other request: the p99 at half
	// rate of make bench-service).
	seqs sync.Map
	mu   struct {
		sync.Mutex
		unknown map[string]time.Time // name -> until when it is answered unknown without a read
		// retired counts, per retired sequence, the requests for its
		// values (answered sequence_retired): callers not moved off it.
		retired map[string]uint64
	}

	ctx    context.Context // cancelled first by Close
	cancel context.CancelFunc
	kick   chan struct{} // wakes keep; capacity 1
	done   chan struct{} // closed when keep returns
	// leasing counts the running leaseLoops. Added to by New and keep
	// only, so that Close's Wait, after keep has returned, sees them all.
	leasing sync.WaitGroup
}

// layoutSlot is a layout's generator: replaced when its lease is lost.
type layoutSlot struct {
	name        string
	layout      timeshard.Layout
	randomStart uint64
	genName     string
	cur         atomic.Pointer[generator] // nil: none held
	// seeking is true while a leaseLoop runs for the slot (at most one).
	seeking atomic.Bool
	// lastErr is the last failed lease attempt's error (nil once one
	// succeeds), quoted by the 503 of a layout without a generator.
	lastErr atomic.Pointer[error]
	// attempts counts lease attempts by leaseResult.
	attempts [numLeaseResults]atomic.Uint64
}

// leaseResult is the outcome of one attempt to lease a layout's node ID
// (the result label of cqlseq_service_node_lease_attempts_total).
type leaseResult int

const (
	leaseTaken      leaseResult = iota // a node ID was leased
	leaseNoFreeNode                    // every node ID was leased (timeshard.ErrNoNode)
	leaseFailed                        // another error (the store)
	numLeaseResults
)

func (r leaseResult) String() string {
	return [...]string{"taken", "no_free_node", "failed"}[r]
}

// generator is one leased node of a layout.
type generator struct {
	g    *timeshard.Generator
	lost atomic.Bool // its lease was seen lost: keep replaces it
}

// New leases a node ID of every layout in o.Store and starts the
// background checks. It fails when the options are invalid or a lease
// attempt fails for another reason than every node ID of the layout being
// leased (the store cannot be reached). A layout none of whose node IDs is
// free is not an error: the service starts without it, answers its IDs
// 503 no_node_lease (Waiting lists it) and retries in the background, with
// back-off, until it leases one or Close.
func New(ctx context.Context, o Options) (*Service, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	s := &Service{o: o, st: o.Store, log: o.Logger, layouts: map[string]*layoutSlot{},
		kick: make(chan struct{}, 1), done: make(chan struct{})}
	s.mu.unknown = map[string]time.Time{}
	s.mu.retired = map[string]uint64{}
	for name, lo := range o.Layouts {
		s.layouts[name] = &layoutSlot{name: name, layout: lo.Layout, randomStart: lo.RandomStart, genName: o.Name + "/" + name}
	}
	var waiting []*layoutSlot
	for _, name := range layoutNames {
		slot := s.layouts[name]
		err := s.openGenerator(ctx, slot)
		switch {
		case err == nil:
		case errors.Is(err, timeshard.ErrNoNode):
			s.log.Warn("idservice: no free node ID: serving without the layout, retrying in the background",
				"layout", name, "generator", slot.genName, "err", err)
			waiting = append(waiting, slot)
		default:
			_ = s.closeGenerators()
			return nil, err
		}
	}
	m, err := newServiceMetrics(s, o.Registry)
	if err != nil {
		_ = s.closeGenerators()
		return nil, err
	}
	s.m = m
	s.storeUp.Store(true)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	for _, slot := range waiting {
		s.seek(slot, true)
	}
	go s.keep()
	return s, nil
}

// openGenerator leases a node of slot's layout and installs its generator,
// counting the attempt by its result.
func (s *Service) openGenerator(ctx context.Context, slot *layoutSlot) error {
	o := s.o.Timeshard
	o.Layout, o.RandomStart = slot.layout, slot.randomStart
	g, err := timeshard.Open(ctx, s.st, slot.genName, o)
	if err != nil {
		err = fmt.Errorf("idservice: layout %s: %w", slot.name, err)
		r := leaseFailed
		if errors.Is(err, timeshard.ErrNoNode) {
			r = leaseNoFreeNode
		}
		slot.attempts[r].Add(1)
		slot.lastErr.Store(&err)
		return err
	}
	slot.attempts[leaseTaken].Add(1)
	slot.lastErr.Store(nil)
	slot.cur.Store(&generator{g: g})
	s.log.Info("idservice: node lease taken", "layout", slot.name, "generator", slot.genName, "node", g.Node())
	return nil
}

// seek starts slot's leaseLoop unless one runs; after is true when the
// first attempt is to wait a back-off step (one just failed). Called by
// New and keep only (see Service.leasing).
func (s *Service) seek(slot *layoutSlot, after bool) {
	if !slot.seeking.CompareAndSwap(false, true) {
		return
	}
	s.leasing.Add(1)
	go s.leaseLoop(slot, after)
}

// leaseLoop tries to lease a node ID of slot's layout until it does or
// Close: the waits between attempts start at ProbeInterval and double up
// to max(LeaseRetryMax, ProbeInterval), each drawn in [w/2, w] so that
// instances started together spread their attempts. An attempt is bounded
// by the longer of RequestTimeout and the lease's TTL: over a full layout
// it makes one conditional write per node ID (1,024 in layout 63), which
// must not time out as a store failure would.
func (s *Service) leaseLoop(slot *layoutSlot, wait bool) {
	defer s.leasing.Done()
	defer slot.seeking.Store(false)
	step, ceil := s.o.ProbeInterval, max(s.o.LeaseRetryMax, s.o.ProbeInterval)
	ttl := s.o.Timeshard.LeaseDuration
	if ttl == 0 {
		ttl = timeshard.DefaultLeaseDuration
	}
	bound := max(s.o.RequestTimeout, ttl)
	var lastLogged string // the error last logged (New logs the first)
	if e := slot.lastErr.Load(); e != nil {
		lastLogged = (*e).Error()
	}
	for {
		if wait {
			t := time.NewTimer(step/2 + rand.N(step/2+1))
			select {
			case <-s.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			step = min(2*step, ceil)
		}
		wait = true
		ctx, cancel := context.WithTimeout(s.ctx, bound)
		err := s.openGenerator(ctx, slot)
		cancel()
		switch {
		case err == nil:
			return
		case s.ctx.Err() != nil:
			return
		case err.Error() != lastLogged:
			// Logged when it changes, not at every attempt.
			lastLogged = err.Error()
			s.log.Warn("idservice: taking a node lease failed; retrying", "layout", slot.name, "err", err)
		}
	}
}

// keep checks the store and the node leases every ProbeInterval (or when
// kicked) until Close, and starts a leaseLoop for a layout whose lease is
// lost.
func (s *Service) keep() {
	defer close(s.done)
	t := time.NewTicker(s.o.ProbeInterval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		case <-s.kick:
		}
		s.check(s.ctx)
	}
}

// check probes the store and each layout's generator: one whose lease is
// lost is dropped and a new node ID sought (leaseLoop).
func (s *Service) check(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, min(s.o.RequestTimeout, max(s.o.ProbeInterval, 100*time.Millisecond)))
	defer cancel()
	_, _, err := galloc.ReadRecord(ctx, s.st, probeName)
	if up := err == nil; s.storeUp.Swap(up) != up {
		if up {
			s.log.Info("idservice: store reachable again")
		} else {
			s.log.Warn("idservice: store unreachable", "err", err)
		}
	}
	for _, name := range layoutNames {
		slot := s.layouts[name]
		cur := slot.cur.Load()
		if cur != nil && !cur.lost.Load() && errors.Is(cur.g.LeaseErr(), timeshard.ErrLeaseLost) {
			cur.lost.Store(true)
		}
		if cur != nil && !cur.lost.Load() || s.ctx.Err() != nil {
			continue
		}
		if cur != nil {
			s.log.Warn("idservice: node lease lost", "layout", name, "node", cur.g.Node())
			slot.cur.CompareAndSwap(cur, nil)
			_ = cur.g.Close()
		}
		s.seek(slot, false)
	}
	s.refreshRetired(ctx) // last: the leases come first
}

// wake asks keep to check now.
func (s *Service) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Ready reports whether /readyz answers 200: the service is not shutting
// down, and the store answered the last probe or a sequence holds values
// to hand out. A layout without a node lease leaves it ready (degraded:
// Waiting lists the layout, whose IDs are answered 503), so that the
// sequences, UUIDs and the other layout stay served.
func (s *Service) Ready() bool { return s.readiness() == "" }

// Waiting returns the layouts, in Layouts' order, of which the service
// holds no node lease (none was free, or the lease was lost): their
// timeshard IDs are answered 503 no_node_lease while a node ID is sought
// in the background. Empty when every layout is served.
func (s *Service) Waiting() []string {
	var out []string
	for _, name := range layoutNames {
		if g := s.layouts[name].cur.Load(); g == nil || g.lost.Load() {
			out = append(out, name)
		}
	}
	return out
}

// readiness returns why the service is not ready, or "" when it is.
func (s *Service) readiness() string {
	if s.closed.Load() || s.draining.Load() {
		return "shutting down"
	}
	if s.storeUp.Load() {
		return ""
	}
	ready := false
	s.seqs.Range(func(_, q any) bool {
		ready = q.(*galloc.Sequence).Stats().Held > 0
		return !ready
	})
	if ready {
		return ""
	}
	return "store unreachable and no chunk in hand"
}

// Sequence returns the open sequence name, opening it from its stored
// record when this instance has not yet. A name found missing is
// ErrUnknownSequence, also without a store call for UnknownTTL.
func (s *Service) Sequence(ctx context.Context, name string) (*galloc.Sequence, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	if q, ok := s.openSeq(name); ok {
		return q, nil
	}
	s.mu.Lock()
	until, unknown := s.mu.unknown[name]
	s.mu.Unlock()
	if unknown && time.Now().Before(until) {
		return nil, fmt.Errorf("%w: %q", ErrUnknownSequence, name)
	}
	v, err, _ := s.open.Do(name, func() (any, error) {
		r, found, err := galloc.ReadRecord(ctx, s.st, name)
		if err != nil {
			return nil, fmt.Errorf("idservice: reading sequence %q: %w", name, err)
		}
		if !found {
			s.mu.Lock()
			s.rememberUnknownLocked(name)
			s.mu.Unlock()
			return nil, fmt.Errorf("%w: %q", ErrUnknownSequence, name)
		}
		return s.openSequence(ctx, name, r, true)
	})
	if err != nil {
		return nil, err
	}
	return v.(*galloc.Sequence), nil
}

// maxUnknown bounds the names remembered as unknown: beyond it the expired
// ones are dropped, and when none has expired, all of them.
const maxUnknown = 10_000

// rememberUnknownLocked answers name unknown without a read for UnknownTTL.
func (s *Service) rememberUnknownLocked(name string) {
	now := time.Now()
	if len(s.mu.unknown) >= maxUnknown {
		for k, until := range s.mu.unknown {
			if !now.Before(until) {
				delete(s.mu.unknown, k)
			}
		}
		if len(s.mu.unknown) >= maxUnknown {
			clear(s.mu.unknown)
		}
	}
	s.mu.unknown[name] = now.Add(s.o.UnknownTTL)
}

// openSequence opens sequence name with definition def and registers it;
// an instance that has it open already returns that one. follow takes the
// stored chunk size whatever def's (an Alter may have changed it since def
// was read); without it another is galloc.ErrDefinitionMismatch.
func (s *Service) openSequence(ctx context.Context, name string, def galloc.Record, follow bool) (*galloc.Sequence, error) {
	if q, ok := s.openSeq(name); ok {
		return q, nil
	}
	o := s.o.Galloc
	o.Type, o.ChunkSize, o.Start, o.StartZero, o.Step = def.Type, def.ChunkSize, def.Start, def.Start == 0, def.Step
	o.Adaptive, o.StoredChunkSize = def.Adaptive, follow
	q, err := galloc.Open(ctx, s.st, name, o)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		_ = q.Close()
		return nil, ErrClosed
	}
	if prev, ok := s.openSeq(name); ok {
		_ = q.Close()
		return prev, nil
	}
	s.seqs.Store(name, q)
	delete(s.mu.unknown, name)
	s.log.Info("idservice: sequence opened", "sequence", name, "type", def.Type, "chunk", def.ChunkSize)
	return q, nil
}

// Definition is a sequence's definition, as the create call takes it.
type Definition struct {
	Type      galloc.Type
	Start     int64
	Step      int64
	ChunkSize int64
	Adaptive  bool
}

func (d Definition) record() galloc.Record {
	return galloc.Record{Type: d.Type, Start: d.Start, Step: d.Step, ChunkSize: d.ChunkSize, Adaptive: d.Adaptive}
}

// Create creates sequence name with definition d unless it exists; created
// is false when it existed with the same definition. Another definition is
// galloc.ErrDefinitionMismatch.
func (s *Service) Create(ctx context.Context, name string, d Definition) (created bool, err error) {
	if s.closed.Load() {
		return false, ErrClosed
	}
	r, found, err := galloc.ReadRecord(ctx, s.st, name)
	if err != nil {
		return false, fmt.Errorf("idservice: reading sequence %q: %w", name, err)
	}
	if found {
		if err := checkCreate(name, r, d); err != nil {
			return false, err
		}
		_, err := s.openSequence(ctx, name, r, true)
		return false, err
	}
	if _, err := s.openSequence(ctx, name, d.record(), false); err != nil {
		return false, err
	}
	s.log.Info("idservice: sequence created", "sequence", name)
	return true, nil
}

// NextSequence hands out n values of sequence name.
func (s *Service) NextSequence(ctx context.Context, name string, n int) ([]int64, error) {
	q, runs, err := s.nextRuns(ctx, name, n)
	if err != nil {
		s.countRetired(name, err)
		return nil, err
	}
	step := q.Definition().Step
	ids := make([]int64, 0, n)
	for _, r := range runs {
		for i := range r.Count {
			ids = append(ids, r.First+int64(i)*step)
		}
	}
	return ids, nil
}

// nextRuns takes n values of sequence name, opening it first.
func (s *Service) nextRuns(ctx context.Context, name string, n int) (*galloc.Sequence, []galloc.Run, error) {
	q, err := s.Sequence(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	runs, err := q.NextN(ctx, n)
	return q, runs, err
}

// countRetired counts a request for sequence name's values that err
// answers retired (galloc.ErrRetired). The names counted are bounded by
// the sequences ever retired.
func (s *Service) countRetired(name string, err error) {
	if !errors.Is(err, galloc.ErrRetired) {
		return
	}
	s.mu.Lock()
	s.mu.retired[name]++
	s.mu.Unlock()
}

// retiredRequests returns a copy of the counts of countRetired.
func (s *Service) retiredRequests() map[string]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.mu.retired)
}

// current returns layout's current generator.
func (s *Service) current(layout string) (*generator, error) {
	slot, ok := s.layouts[layout]
	if !ok {
		return nil, newError(http.StatusNotFound, CodeUnknownLayout, "layout %q: want 63 or 53", layout)
	}
	g := slot.cur.Load()
	if g == nil || g.lost.Load() {
		if last := slot.lastErr.Load(); last != nil {
			return nil, fmt.Errorf("%w %s, retrying: %w", errNoGenerator, layout, *last)
		}
		return nil, fmt.Errorf("%w %s", errNoGenerator, layout)
	}
	return g, nil
}

// NextTimeshard makes n IDs of layout.
func (s *Service) NextTimeshard(ctx context.Context, layout string, n int) ([]int64, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	g, err := s.current(layout)
	if err != nil {
		return nil, err
	}
	ids, err := g.g.NextN(ctx, make([]int64, 0, n), n)
	if err != nil {
		if errors.Is(err, timeshard.ErrLeaseLost) {
			g.lost.Store(true)
			s.wake()
		}
		return nil, err
	}
	return ids, nil
}

// NextUUIDs makes n UUIDv7s.
func (s *Service) NextUUIDs(n int) ([]string, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	out := make([]string, 0, n)
	for range n {
		id, err := ksuuid.New()
		if err != nil {
			return nil, err
		}
		out = append(out, ksuuid.Format(id))
	}
	return out, nil
}

// Node returns the node ID this instance holds of layout; ok is false when
// it holds none.
func (s *Service) Node(layout string) (node uint32, ok bool) {
	slot, found := s.layouts[layout]
	if !found {
		return 0, false
	}
	g := slot.cur.Load()
	if g == nil || g.lost.Load() {
		return 0, false
	}
	return g.g.Node(), true
}

// sequences returns the open sequences.
func (s *Service) sequences() map[string]*galloc.Sequence {
	out := map[string]*galloc.Sequence{}
	s.seqs.Range(func(k, v any) bool {
		out[k.(string)] = v.(*galloc.Sequence)
		return true
	})
	return out
}

// Close stops the background checks and node lease retries (and waits for
// them), closes the sequences (their unused values are wasted) and
// releases the node leases, so that another instance can take the node
// IDs at once. Later calls fail with ErrClosed. It returns the generators'
// Close errors.
func (s *Service) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.cancel()
	<-s.done
	s.leasing.Wait()
	// Under mu: an openSequence that has not stored its sequence yet
	// sees closed and closes it itself.
	s.mu.Lock()
	seqs := s.sequences()
	s.seqs.Clear()
	s.mu.Unlock()
	for _, q := range seqs {
		_ = q.Close()
	}
	err := s.closeGenerators()
	s.log.Info("idservice: closed; node leases released")
	return err
}

// closeGenerators closes every layout's generator (releasing its lease).
func (s *Service) closeGenerators() error {
	var errs []error
	for _, name := range layoutNames {
		if g := s.layouts[name].cur.Swap(nil); g != nil {
			if err := g.g.Close(); err != nil {
				errs = append(errs, fmt.Errorf("idservice: layout %s: releasing node %d: %w", name, g.g.Node(), err))
			}
		}
	}
	return errors.Join(errs...)
}
