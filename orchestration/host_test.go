package orchestration_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cqlseq/cqlseq/elections"
	"github.com/cqlseq/cqlseq/elections/electionstest"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/orchestration"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/faulty"
	"github.com/cqlseq/cqlseq/storage/mem"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	lease      = 10 * time.Second // validity 9 s, renewals every 3 s
	acqTimeout = 20 * time.Second
	waitLimit  = 30 * time.Second // real-time bound on every wait
)

type fixture struct {
	clock  *electionstest.FakeClock
	st     storage.Storage
	kills  chan error
	events chan elections.Event
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{clock: electionstest.NewFakeClock(time.Unix(1_750_000_000, 0)), kills: make(chan error, 4), events: make(chan elections.Event, 1024)}
	f.st = mem.New(mem.Options{Now: f.clock.Now})
	t.Cleanup(func() { _ = f.st.Close() })
	return f
}

func (f *fixture) config(services ...orchestration.Service) orchestration.Config {
	return orchestration.Config{
		Storage:            f.st,
		NumPartitions:      10,
		IP:                 net.IPv4(10, 0, 0, 1),
		LeadershipDuration: lease,
		AcquisitionTimeout: acqTimeout,
		Services:           services,
		Clock:              f.clock,
		Kill:               func(err error) { f.kills <- err },
		Logger:             slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnEvent:            func(ev elections.Event) { f.events <- ev },
	}
}

// waitEvent returns the next event of kind want, skipping the others.
func (f *fixture) waitEvent(t *testing.T, want elections.EventKind) elections.Event {
	t.Helper()
	for {
		if ev := recv(t, f.events, want.String()+" event"); ev.Kind == want {
			return ev
		}
	}
}

func newHost(t *testing.T, c orchestration.Config) *orchestration.Host {
	h, err := orchestration.New(c)
	require.NoError(t, err)
	return h
}

// holdSlot takes slot for another holder with a one-hour lease (no renewal
// falls due while the tests move the clock) and returns its cleanup.
func (f *fixture) holdSlot(t *testing.T, slot uint32) func() {
	e, err := elections.NewOverStorage(f.st, elections.Options{Clock: f.clock})
	require.NoError(t, err)
	_, err = e.Acquire(context.Background(), slot, []byte("other"), time.Hour)
	require.NoError(t, err)
	t.Cleanup(e.Cleanup)
	return e.Cleanup
}

// probe is a service that reports its start and the cause of its stop.
type probe struct {
	started chan orchestration.Assignment
	stopped chan error
}

func newProbe() *probe {
	return &probe{started: make(chan orchestration.Assignment, 1), stopped: make(chan error, 1)}
}

func (p *probe) service(name string) orchestration.Service {
	return orchestration.Service{Name: name, Run: func(ctx context.Context, a orchestration.Assignment) error {
		p.started <- a
		<-ctx.Done()
		p.stopped <- context.Cause(ctx)
		return ctx.Err()
	}}
}

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitLimit):
		t.Fatalf("no %s within %v", what, waitLimit)
	}
	panic("unreachable")
}

func requireLive(t *testing.T, ctx context.Context) {
	t.Helper()
	require.NoError(t, ctx.Err(), "cause: %v", context.Cause(ctx))
}

func requireProblem(t *testing.T, ctx context.Context, want error) error {
	t.Helper()
	recv(t, ctx.Done(), "problem")
	cause := context.Cause(ctx)
	require.ErrorIs(t, cause, want)
	return cause
}

func holder(t *testing.T, st storage.Storage, slot uint32) (elections.Holder, bool) {
	e, err := elections.NewOverStorage(st, elections.Options{})
	require.NoError(t, err)
	defer e.Cleanup()
	h, ok, err := e.Holder(context.Background(), slot)
	require.NoError(t, err)
	return h, ok
}

func TestLaunchRunsServicesWhileHoldingTheSlot(t *testing.T) {
	f := newFixture(t)
	p1, p2 := newProbe(), newProbe()
	h := newHost(t, f.config(p1.service("one"), p2.service("two")))
	problem := h.Launch()
	requireLive(t, problem)
	a := recv(t, p1.started, "service one start")
	recv(t, p2.started, "service two start")
	assert.Equal(t, uint32(1), a.Slot)
	assert.Equal(t, uint64(1), a.Epoch)
	assert.Equal(t, []isequencer.PartitionID{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, a.Partitions, "one slot owns every partition")
	hd, ok := holder(t, f.st, 1)
	require.True(t, ok)
	assert.Equal(t, []byte(net.IPv4(10, 0, 0, 1)), hd.Value, "the slot's value is the host's IP")
	assert.Equal(t, a.Epoch, hd.Epoch)

	for range 15 { // renewals keep the slot for 5 leases
		f.clock.Advance(lease / 3)
		f.waitEvent(t, elections.EventRenewed)
		requireLive(t, problem)
	}
	require.NoError(t, h.Shutdown())
	assert.ErrorIs(t, recv(t, p1.stopped, "service one stop"), orchestration.ErrShutdown)
	assert.ErrorIs(t, recv(t, p2.stopped, "service two stop"), orchestration.ErrShutdown)
	requireLive(t, problem)
	_, ok = holder(t, f.st, 1)
	assert.False(t, ok, "Shutdown releases the slot")
	goleak.VerifyNone(t)
}

func TestSecondHostTakesTheNextSlot(t *testing.T) {
	f := newFixture(t)
	p1, p2 := newProbe(), newProbe()
	c1, c2 := f.config(p1.service("s")), f.config(p2.service("s"))
	c1.NumVVM, c2.NumVVM = 2, 2
	c2.IP = net.IPv4(10, 0, 0, 2)
	h1, h2 := newHost(t, c1), newHost(t, c2)
	requireLive(t, h1.Launch())
	requireLive(t, h2.Launch())
	a1, a2 := recv(t, p1.started, "start"), recv(t, p2.started, "start")
	assert.Equal(t, uint32(1), a1.Slot)
	assert.Equal(t, uint32(2), a2.Slot)
	assert.Equal(t, []isequencer.PartitionID{0, 2, 4, 6, 8}, a1.Partitions)
	assert.Equal(t, []isequencer.PartitionID{1, 3, 5, 7, 9}, a2.Partitions)
	require.NoError(t, h1.Shutdown())
	require.NoError(t, h2.Shutdown())
}

// TestSecondHostFailsToStart is the reference platform's Basic test: with
// one slot, a second host gets no slot within the acquisition timeout.
func TestSecondHostFailsToStart(t *testing.T) {
	f := newFixture(t)
	p1 := newProbe()
	c1 := f.config(p1.service("s"))
	c1.LeadershipDuration = time.Hour // no renewal falls due while the clock moves
	h1 := newHost(t, c1)
	requireLive(t, h1.Launch())
	recv(t, p1.started, "start")

	p2 := newProbe()
	h2 := newHost(t, f.config(p2.service("s")))
	problems := make(chan context.Context, 1)
	go func() { problems <- h2.Launch() }()
	f.clock.WaitForTimers(2) // h1's renewal and h2's retry
	f.clock.Advance(acqTimeout)
	problem := recv(t, problems, "Launch return")
	cause := requireProblem(t, problem, orchestration.ErrAcquisitionTimeout)
	assert.ErrorContains(t, cause, "all 1 slots held")
	require.ErrorIs(t, h2.Shutdown(), orchestration.ErrAcquisitionTimeout)
	select {
	case <-p2.started:
		t.Fatal("services ran without the slot")
	default:
	}
	require.NoError(t, h1.Shutdown())
	goleak.VerifyNone(t)
}

func TestAcquisitionTimeoutReportsStorageErrors(t *testing.T) {
	f := newFixture(t)
	fst, err := faulty.New(f.st, faulty.Options{})
	require.NoError(t, err)
	require.NoError(t, fst.SetRules(faulty.Rule{Ops: []string{faulty.OpGet}, Action: faulty.Fail}))
	c := f.config()
	c.Storage = fst
	h := newHost(t, c)
	problems := make(chan context.Context, 1)
	go func() { problems <- h.Launch() }()
	f.clock.WaitForTimers(1)
	f.clock.Advance(acqTimeout)
	cause := requireProblem(t, recv(t, problems, "Launch return"), orchestration.ErrAcquisitionTimeout)
	assert.ErrorIs(t, cause, storage.ErrUnavailable)
	require.ErrorIs(t, h.Shutdown(), orchestration.ErrAcquisitionTimeout)
}

// TestLeadershipLossStopsServices is the reference platform's Shutdown
// test: another holder overwrites the lease, the clock moves on, the
// services stop and the loss is the problem; the killer fires after its
// threshold.
func TestLeadershipLossStopsServices(t *testing.T) {
	f := newFixture(t)
	p := newProbe()
	h := newHost(t, f.config(p.service("s")))
	problem := h.Launch()
	a := recv(t, p.started, "start")

	ts, err := elections.NewTTLStorage(f.st)
	require.NoError(t, err)
	k := elections.RowKey{Key: a.Slot, Row: elections.RowLease}
	cur, _, err := ts.Get(context.Background(), k)
	require.NoError(t, err)
	ok, err := ts.CompareAndSwap(context.Background(), k, cur, []byte("intruder10.9.9.9"), lease)
	require.NoError(t, err)
	require.True(t, ok)
	f.clock.Advance(lease / 3)

	cause := requireProblem(t, problem, orchestration.ErrLeadershipLost)
	assert.ErrorIs(t, cause, elections.ErrLost)
	assert.ErrorIs(t, recv(t, p.stopped, "service stop"), elections.ErrLost, "services stop on the loss, before Shutdown")
	require.ErrorIs(t, h.Shutdown(), orchestration.ErrLeadershipLost)
	hd, ok := holder(t, f.st, a.Slot)
	require.True(t, ok)
	assert.Equal(t, "10.9.9.9", string(hd.Value), "Shutdown leaves the new holder's lease alone")

	select {
	case err := <-f.kills:
		t.Fatalf("killed before the threshold: %v", err)
	default:
	}
	f.clock.Advance(lease / 4)
	kill := recv(t, f.kills, "kill")
	assert.ErrorIs(t, kill, orchestration.ErrLeadershipLost)
	goleak.VerifyNone(t) // the killer has returned
}

func TestLeadershipExpiryWithoutKiller(t *testing.T) {
	f := newFixture(t)
	fst, err := faulty.New(f.st, faulty.Options{})
	require.NoError(t, err)
	p := newProbe()
	c := f.config(p.service("s"))
	c.Storage = fst
	c.KillThreshold = -1
	h := newHost(t, c)
	problem := h.Launch()
	recv(t, p.started, "start")
	require.NoError(t, fst.SetRules(faulty.Rule{Ops: []string{faulty.OpCompareAndSwap}, Action: faulty.Fail}))
	f.clock.Advance(lease - time.Second - time.Millisecond)
	requireLive(t, problem)
	f.clock.Advance(time.Millisecond)
	cause := requireProblem(t, problem, orchestration.ErrLeadershipLost)
	assert.ErrorContains(t, cause, "not renewed by its local deadline")
	recv(t, p.stopped, "service stop")
	require.ErrorIs(t, h.Shutdown(), orchestration.ErrLeadershipLost)
	goleak.VerifyNone(t) // no killer
	select {
	case err := <-f.kills:
		t.Fatalf("killed with a negative threshold: %v", err)
	default:
	}
}

func TestShutdownImmediatelyAfterLaunch(t *testing.T) {
	f := newFixture(t)
	p := newProbe()
	h := newHost(t, f.config(p.service("s")))
	problem := h.Launch()
	require.NoError(t, h.Shutdown())
	requireLive(t, problem)
	_, ok := holder(t, f.st, 1)
	assert.False(t, ok)
	goleak.VerifyNone(t)
}

func TestShutdownWhileLaunchWaitsForASlot(t *testing.T) {
	f := newFixture(t)
	release := f.holdSlot(t, 1)
	p := newProbe()
	h := newHost(t, f.config(p.service("s")))
	problems := make(chan context.Context, 1)
	go func() { problems <- h.Launch() }()
	f.clock.WaitForTimers(2) // the holder's renewal and the host's retry
	require.NoError(t, h.Shutdown(), "an interrupted acquisition is no problem")
	requireLive(t, recv(t, problems, "Launch return"))
	release()
	goleak.VerifyNone(t)
}

func TestShutdownTwiceAndMisuse(t *testing.T) {
	f := newFixture(t)
	h := newHost(t, f.config(orchestration.Service{Name: "fails", Run: func(context.Context, orchestration.Assignment) error {
		return errors.New("boom")
	}}))
	require.ErrorIs(t, h.Shutdown(), orchestration.ErrNotLaunched)
	problem := h.Launch()
	assert.Panics(t, func() { h.Launch() })
	requireProblem(t, problem, orchestration.ErrServiceFailed)
	err1 := h.Shutdown()
	err2 := h.Shutdown()
	require.ErrorIs(t, err1, orchestration.ErrServiceFailed)
	assert.ErrorContains(t, err1, "boom")
	assert.Equal(t, err1, err2, "the same problem, reported once")
	goleak.VerifyNone(t)
}

// msgHandler is a slog.Handler that passes every message to a channel.
type msgHandler chan string

func (h msgHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h msgHandler) Handle(_ context.Context, r slog.Record) error {
	h <- r.Message
	return nil
}

func (h msgHandler) WithAttrs([]slog.Attr) slog.Handler { return h }

func (h msgHandler) WithGroup(string) slog.Handler { return h }

func TestFirstProblemWins(t *testing.T) {
	f := newFixture(t)
	p := newProbe()
	more := make(chan struct{})
	c := f.config(
		orchestration.Service{Name: "first", Run: func(context.Context, orchestration.Assignment) error {
			return errors.New("first failure")
		}},
		orchestration.Service{Name: "second", Run: func(context.Context, orchestration.Assignment) error {
			<-more
			panic("second failure")
		}},
		orchestration.Service{Name: "returns", Run: func(context.Context, orchestration.Assignment) error {
			<-more
			return nil
		}},
		p.service("healthy"),
	)
	msgs := make(msgHandler, 64)
	c.Logger = slog.New(msgs)
	h := newHost(t, c)
	problem := h.Launch()
	cause := requireProblem(t, problem, orchestration.ErrServiceFailed)
	assert.ErrorContains(t, cause, "first failure")
	close(more)
	for further := 0; further < 2; {
		if m := recv(t, msgs, "log message"); strings.Contains(m, "further problem") {
			further++
		}
	}
	recv(t, p.started, "start")
	assert.Empty(t, p.stopped, "the healthy service still runs")
	assert.Equal(t, cause, context.Cause(problem), "later problems change nothing")
	assert.Equal(t, cause, h.Shutdown())
	assert.ErrorIs(t, recv(t, p.stopped, "stop"), orchestration.ErrShutdown, "a failing service does not stop the others")
}

func TestConfigValidate(t *testing.T) {
	_, err := orchestration.New(orchestration.Config{
		NumPartitions:      -1,
		LeadershipDuration: 1500 * time.Millisecond,
		AcquisitionRetry:   -1,
		Services:           []orchestration.Service{{Name: "x"}},
	})
	require.ErrorIs(t, err, storage.ErrInvalidArgument)
	for _, want := range []string{"Storage is nil", "NumPartitions -1", "IP is empty", "not whole seconds", "AcquisitionRetry", `service 0 ("x") has no Run`} {
		assert.ErrorContains(t, err, want)
	}
	c := orchestration.Config{Storage: mem.New(mem.Options{}), IP: net.IPv4(10, 0, 0, 1)}
	c.EnsureDefaults()
	require.NoError(t, c.Validate())
	assert.Equal(t, uint32(1), c.NumVVM)
	assert.Equal(t, 2*c.LeadershipDuration, c.AcquisitionTimeout)
	assert.Equal(t, c.LeadershipDuration/4, c.KillThreshold)
	assert.NotNil(t, c.Kill)
}

func TestSlotPartitions(t *testing.T) {
	const numVVM, numParts = 3, 11
	seen := map[isequencer.PartitionID]uint32{}
	for slot := uint32(1); slot <= numVVM; slot++ {
		ps, err := orchestration.SlotPartitions(slot, numVVM, numParts)
		require.NoError(t, err)
		for _, p := range ps {
			_, dup := seen[p]
			require.False(t, dup, "partition %d owned twice", p)
			seen[p] = slot
			s, err := orchestration.PartitionSlot(p, numVVM)
			require.NoError(t, err)
			assert.Equal(t, slot, s)
		}
	}
	assert.Len(t, seen, numParts, "every partition has an owner")
	ps, err := orchestration.SlotPartitions(2, numVVM, numParts)
	require.NoError(t, err)
	assert.Equal(t, []isequencer.PartitionID{1, 4, 7, 10}, ps)
	ps, err = orchestration.SlotPartitions(1, 1, 65536)
	require.NoError(t, err)
	assert.Len(t, ps, 65536)

	for _, c := range []struct {
		slot, numVVM uint32
		parts        int
	}{{0, 3, 1}, {4, 3, 1}, {1, 0, 1}, {1, 1, -1}, {1, 1, 65537}} {
		_, err := orchestration.SlotPartitions(c.slot, c.numVVM, c.parts)
		assert.ErrorIs(t, err, storage.ErrInvalidArgument, "%+v", c)
	}
	_, err = orchestration.PartitionSlot(1, 0)
	assert.ErrorIs(t, err, storage.ErrInvalidArgument)
}
