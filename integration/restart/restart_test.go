package restart

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cqlseq/cqlseq/apppart"
	"github.com/cqlseq/cqlseq/apppart/appparttest"
	"github.com/cqlseq/cqlseq/elections"
	"github.com/cqlseq/cqlseq/integration/itest"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/testenv/leakcheck"
)

// TestLeaseAcrossCassandraRestart crashes the private node under a fenced
// owner: once for longer than the lease (the lease is lost at its local
// deadline and a second owner takes over), once briefly (the lease and the
// owner survive).
func TestLeaseAcrossCassandraRestart(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, ignore) }) // runs last: after the node has stopped
	n := startNode(t)
	t.Run("down longer than the lease", func(t *testing.T) { leaseLost(t, n) })
	t.Run("down shorter than the validity left", func(t *testing.T) { leaseSurvives(t, n) })
}

// timedEvent is a leadership event and when it was emitted.
type timedEvent struct {
	elections.Event
	at time.Time
}

func eventsTo(ch chan<- timedEvent) func(elections.Event) {
	return func(ev elections.Event) {
		select {
		case ch <- timedEvent{ev, time.Now()}:
		default:
		}
	}
}

// nextEvent waits for the next event of kind emitted after since.
func nextEvent(t *testing.T, ch <-chan timedEvent, kind elections.EventKind, since time.Time, limit time.Duration) timedEvent {
	t.Helper()
	timeout := time.After(limit)
	for {
		select {
		case ev := <-ch:
			if ev.Kind == kind && ev.at.After(since) {
				return ev
			}
			if ev.Kind == elections.EventRenewFailed {
				t.Logf("%s: renewal failed: %v", ev.at.Format("15:04:05.000"), ev.Err)
			}
		case <-timeout:
			t.Fatalf("no %v event within %v", kind, limit)
		}
	}
}

// acquire takes key, retrying while it is still taken (at most limit).
func acquire(t *testing.T, e *elections.Elections, key uint32, val string, lease, limit time.Duration) *elections.Leadership {
	t.Helper()
	end := time.Now().Add(limit)
	for {
		l, err := e.Acquire(context.Background(), key, []byte(val), lease)
		if err == nil {
			return l
		}
		if time.Now().After(end) {
			t.Fatalf("%s could not acquire key %d within %v: %v", val, key, limit, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// leaseLost: owner 1 runs commands under a 6 s lease; the node is crashed
// and kept down 8 s. Owner 1's leadership context is cancelled at its local
// deadline, while the node is still down; no command of owner 1 succeeds
// after it, and those begun after it fail with ErrNotLeader. Once the node
// is back, owner 2 (its own session) acquires a greater epoch, takes the
// partition over and continues. Owner 1, even when it ignores its lease,
// is refused (fenced). The PLog holds every acknowledged event, no number
// twice.
func leaseLost(t *testing.T, n *node) {
	const (
		lease = 6 * time.Second
		down  = 8 * time.Second
		key   = 1
		part  = isequencer.PartitionID(1)
	)
	st1 := n.open(t)
	e1, err := elections.NewOverStorage(st1, elections.Options{})
	require.NoError(t, err)
	t.Cleanup(e1.Cleanup)
	l1 := acquire(t, e1, key, "owner1", lease, 10*time.Second)
	lost := make(chan time.Time, 1)
	stopWatch := context.AfterFunc(l1.Ctx, func() { lost <- time.Now() })
	defer stopWatch()

	// lying makes owner 1 ignore its lease, as a process that has not
	// noticed its loss would.
	var lying atomic.Bool
	o1 := appparttest.Options(st1, part, plog.ModeFenced)
	o1.LeaseDeadline = func() time.Time {
		if lying.Load() {
			return time.Now().Add(time.Hour)
		}
		return l1.Deadline()
	}
	p1 := appparttest.Open(t, o1)
	w1 := itest.RunWorker("owner1", p1, part)
	defer w1.Stop()
	w1.WaitAcks(t, 50, 30*time.Second, "50 acknowledged commands of owner 1")

	crashed := n.restart(t, down)
	back := time.Now()
	t.Logf("node crashed, down %v, answered CQL %.1f s after its JVM started: back %.1f s after the crash",
		down, n.inst.StartupTime.Seconds(), back.Sub(crashed).Seconds())

	var lostAt time.Time
	select {
	case lostAt = <-lost:
	default:
		t.Fatalf("owner 1 still holds its %v lease after an outage of %v", lease, back.Sub(crashed))
	}
	require.ErrorIs(t, context.Cause(l1.Ctx), elections.ErrLost)
	deadline := l1.Deadline()
	t.Logf("owner 1 (epoch %d) lost its leadership %v after the crash, %v after its local deadline: %v",
		l1.Epoch, lostAt.Sub(crashed).Round(time.Millisecond), lostAt.Sub(deadline).Round(time.Millisecond), context.Cause(l1.Ctx))
	require.False(t, lostAt.Before(deadline), "lost before its local deadline")
	require.Less(t, lostAt.Sub(deadline), 3*time.Second, "the leadership context is cancelled at the local deadline (a busy core may delay the timer)")
	require.False(t, deadline.After(crashed.Add(l1.Timing().Validity)), "no renewal succeeded while the node was down")
	require.True(t, lostAt.Before(back), "owner 1 gave up while the node was down, before anyone could take the lease")

	st2 := n.open(t)
	e2, err := elections.NewOverStorage(st2, elections.Options{})
	require.NoError(t, err)
	t.Cleanup(e2.Cleanup)
	l2 := acquire(t, e2, key, "owner2", lease, 2*lease)
	require.Greater(t, l2.Epoch, l1.Epoch)
	o2 := appparttest.Options(st2, part, plog.ModeFenced)
	o2.LeaseDeadline = l2.Deadline
	p2 := appparttest.Open(t, o2)
	require.Greater(t, p2.Epoch(), p1.Epoch())
	w2 := itest.RunWorker("owner2", p2, part)
	defer w2.Stop()
	w2.WaitAcks(t, 50, 30*time.Second, "50 acknowledged commands of owner 2")
	w1.Stop()

	calls1, acked1 := w1.Snapshot()
	late := 0
	var afterCrash []itest.Call
	for _, c := range calls1 {
		if c.Err == nil {
			require.True(t, c.Ended.Before(deadline), "owner 1 acknowledged a command %v after its lease deadline", c.Ended.Sub(deadline))
		}
		if !c.Began.Before(deadline) {
			late++
			require.ErrorIs(t, c.Err, apppart.ErrNotLeader, "owner 1's command begun %v after its lease deadline", c.Began.Sub(deadline))
		}
		if c.Ended.After(crashed) {
			afterCrash = append(afterCrash, c)
		}
	}
	require.Positive(t, late, "owner 1 kept trying after its deadline")
	t.Logf("owner 1: %d commands acknowledged; calls after the crash: %v", len(acked1), itest.ErrorClasses(afterCrash))

	// Owner 1 ignores its lease: its partition may first be busy (its
	// session reconnects, its sequencer replays), but no write of its
	// epoch can land: the fence refuses it and the partition stops.
	lying.Store(true)
	end := time.Now().Add(30 * time.Second)
	var lieErr error
	for {
		_, err := p1.Do(context.Background(), appparttest.Cmd(appparttest.WS(part, 1)))
		require.Error(t, err, "owner 1 wrote after owner 2 had taken over")
		final := errors.Is(err, plog.ErrFenced) || errors.Is(err, apppart.ErrStopped)
		if final || !(errors.Is(err, apppart.ErrBusy) || errors.Is(err, apppart.ErrWrite)) {
			lieErr = err
			break
		}
		require.True(t, time.Now().Before(end), "owner 1's partition neither wrote nor was fenced within 30 s: %v", err)
		time.Sleep(20 * time.Millisecond)
	}
	require.True(t, errors.Is(lieErr, plog.ErrFenced) || errors.Is(lieErr, apppart.ErrStopped), "owner 1 refused as fenced: %v", lieErr)
	_, err = p1.Do(context.Background(), appparttest.Cmd(appparttest.WS(part, 2)))
	require.ErrorIs(t, err, apppart.ErrStopped, "owner 1 stays stopped")
	t.Logf("owner 1 ignoring its lease: %v", lieErr)

	w2.WaitAcks(t, 10, 30*time.Second, "owner 2 continuing after owner 1's refused write")
	w2.Stop()
	_, acked2 := w2.Snapshot()
	require.NoError(t, p1.Close())
	require.NoError(t, p2.Close())
	events := appparttest.VerifyPLog(t, st2, part, append(acked1, acked2...))
	t.Logf("PLog: %d events, %d acknowledged by owner 1 (epoch %d), %d by owner 2 (epoch %d)",
		events, len(acked1), p1.Epoch(), len(acked2), p2.Epoch())
}

// leaseSurvives: the node is crashed right after a renewal of a 60 s lease
// and kept down 1 s; crash, down time, JVM start (25 s seen on a busy
// 2-core machine) and the driver's reconnection fit in the 59 s of
// validity left, so the same leadership carries on: its
// context stays live, a renewal succeeds after the restart, and commands
// continue on the same partition.
func leaseSurvives(t *testing.T, n *node) {
	const (
		lease = 60 * time.Second
		down  = time.Second
		key   = 2
		part  = isequencer.PartitionID(2)
	)
	events := make(chan timedEvent, 1024)
	st := n.open(t)
	e, err := elections.NewOverStorage(st, elections.Options{OnEvent: eventsTo(events)})
	require.NoError(t, err)
	t.Cleanup(e.Cleanup)
	l := acquire(t, e, key, "owner", lease, 10*time.Second)
	o := appparttest.Options(st, part, plog.ModeFenced)
	o.LeaseDeadline = l.Deadline
	p := appparttest.Open(t, o)
	w := itest.RunWorker("owner", p, part)
	defer w.Stop()
	w.WaitAcks(t, 30, 30*time.Second, "30 acknowledged commands")

	// Crash right after a renewal: the lease's whole validity is left.
	nextEvent(t, events, elections.EventRenewed, time.Now(), 2*l.Timing().RenewEvery)
	crashed := n.restart(t, down)
	back := time.Now()
	t.Logf("crash at %s, back at %s", crashed.Format("15:04:05.000"), back.Format("15:04:05.000"))
	t.Logf("node crashed, down %v, answered CQL %.1f s after its JVM started: back %.1f s after the crash (validity %v)",
		down, n.inst.StartupTime.Seconds(), back.Sub(crashed).Seconds(), l.Timing().Validity)
	require.NoError(t, l.Ctx.Err(), "the lease did not survive an outage of %v: %v", back.Sub(crashed), context.Cause(l.Ctx))

	// The driver reconnects to a host it saw go down on its own schedule:
	// seconds on a quiet machine, tens of seconds on a busy one.
	w.WaitAcks(t, 30, 90*time.Second, "30 commands acknowledged after the restart")
	resumed := time.Now()
	renewed := nextEvent(t, events, elections.EventRenewed, back, 2*l.Timing().RenewEvery)
	require.NoError(t, l.Ctx.Err(), "the leadership carries on")
	require.True(t, l.Deadline().After(back), "renewed after the restart")
	t.Logf("commands resumed %.1f s after the node was back; first renewal after it %.1f s after; lease kept (epoch %d)",
		resumed.Sub(back).Seconds(), renewed.at.Sub(back).Seconds(), l.Epoch)

	w.Stop()
	calls, acked := w.Snapshot()
	var afterCrash []itest.Call
	for _, c := range calls {
		if c.Ended.After(crashed) {
			afterCrash = append(afterCrash, c)
		}
	}
	t.Logf("calls after the crash: %v", itest.ErrorClasses(afterCrash))
	require.NoError(t, p.Close())
	total := appparttest.VerifyPLog(t, st, part, acked)
	t.Logf("PLog: %d events, %d acknowledged", total, len(acked))
}
