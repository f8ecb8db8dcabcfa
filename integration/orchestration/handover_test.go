package orchestration

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/apppart"
	"github.com/cqlseq/cqlseq/apppart/appparttest"
	"github.com/cqlseq/cqlseq/elections"
	"github.com/cqlseq/cqlseq/integration/itest"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/orchestration"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/faulty"
)

const (
	// pause is a command loop's pace after a failed call (a partition
	// busy actualizing): it keeps the loop from spinning.
	pause = 5 * time.Millisecond
)

// partitionsService is a Service that opens the fenced partitions of its
// Assignment under the slot's lease and runs commands on each until its
// context is cancelled, recording the acknowledged ones.
type partitionsService struct {
	name    string
	st      storage.Storage
	started chan orchestration.Assignment // receives the assignment once all partitions are open
	stopped chan time.Time                // receives when run returns
	mu      struct {
		sync.Mutex
		acked   map[isequencer.PartitionID][]appparttest.Acked
		epochs  map[isequencer.PartitionID]uint64
		total   int
		began   time.Time // when run was called
		waiters []ackWaiter
		errs    []error // unexpected command errors
	}
}

type ackWaiter struct {
	n  int
	ch chan struct{}
}

func newPartitionsService(name string, st storage.Storage) *partitionsService {
	s := &partitionsService{name: name, st: st, started: make(chan orchestration.Assignment, 1), stopped: make(chan time.Time, 1)}
	s.mu.acked = map[isequencer.PartitionID][]appparttest.Acked{}
	s.mu.epochs = map[isequencer.PartitionID]uint64{}
	return s
}

func (s *partitionsService) service() orchestration.Service {
	return orchestration.Service{Name: s.name, Run: s.run}
}

// run opens the partitions, runs one command loop per partition until ctx
// is cancelled, waits for the loops and closes the partitions.
func (s *partitionsService) run(ctx context.Context, a orchestration.Assignment) error {
	s.mu.Lock()
	s.mu.began = time.Now()
	s.mu.Unlock()
	parts := make([]*apppart.Partition, 0, len(a.Partitions))
	defer func() {
		for _, p := range parts {
			_ = p.Close()
		}
		s.stopped <- time.Now()
	}()
	for _, id := range a.Partitions {
		o := appparttest.Options(s.st, id, plog.ModeFenced)
		o.LeaseDeadline = a.Leadership.Deadline
		p, err := apppart.Open(ctx, o)
		if err != nil {
			return fmt.Errorf("%s: opening partition %d: %w", s.name, id, err)
		}
		parts = append(parts, p)
		s.mu.Lock()
		s.mu.epochs[id] = p.Epoch()
		s.mu.Unlock()
	}
	s.started <- a
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.loop(ctx, a.Partitions[i], p, a.Leadership.Deadline)
		}()
	}
	wg.Wait()
	return ctx.Err()
}

// loop runs commands on partition id until ctx is done. ErrBusy is
// retried; ErrNotLeader is expected once the lease deadline has passed (the
// partition refuses before the host has cancelled ctx) and a failure before
// it; every other error is a failure.
func (s *partitionsService) loop(ctx context.Context, id isequencer.PartitionID, p *apppart.Partition, deadline func() time.Time) {
	for i := 1; ctx.Err() == nil; i++ {
		cmd := appparttest.Cmd(appparttest.WS(id, 1+i%5))
		payload := fmt.Sprintf("%s-p%d-%d", s.name, id, i)
		cmd.Payload = []byte(payload)
		r, err := p.Do(ctx, cmd)
		switch {
		case err == nil:
			s.ack(id, appparttest.Acked{Owner: s.name, Cmd: cmd, Result: r, Payload: payload})
			continue
		case ctx.Err() != nil:
			return
		case errors.Is(err, apppart.ErrNotLeader) && !time.Now().Before(deadline()):
		case !errors.Is(err, apppart.ErrBusy):
			s.mu.Lock()
			s.mu.errs = append(s.mu.errs, fmt.Errorf("partition %d: %w", id, err))
			s.mu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
	}
}

func (s *partitionsService) ack(id isequencer.PartitionID, a appparttest.Acked) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.acked[id] = append(s.mu.acked[id], a)
	s.mu.total++
	kept := s.mu.waiters[:0]
	for _, w := range s.mu.waiters {
		if s.mu.total >= w.n {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	s.mu.waiters = kept
}

// acks returns a channel closed once n more commands than now have been
// acknowledged.
func (s *partitionsService) acks(n int) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan struct{})
	s.mu.waiters = append(s.mu.waiters, ackWaiter{n: s.mu.total + n, ch: ch})
	return ch
}

// startedAt returns when run was called.
func (s *partitionsService) startedAt() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.began
}

// result returns copies of what the service recorded.
func (s *partitionsService) result() (map[isequencer.PartitionID][]appparttest.Acked, map[isequencer.PartitionID]uint64, []error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	acked := map[isequencer.PartitionID][]appparttest.Acked{}
	for k, v := range s.mu.acked {
		acked[k] = append([]appparttest.Acked(nil), v...)
	}
	epochs := map[isequencer.PartitionID]uint64{}
	for k, v := range s.mu.epochs {
		epochs[k] = v
	}
	return acked, epochs, append([]error(nil), s.mu.errs...)
}

// waitRenewals waits for n renewals reported on events.
func waitRenewals(t *testing.T, events <-chan elections.Event, n int) {
	t.Helper()
	for n > 0 {
		if itest.Recv(t, events, "renewal").Kind == elections.EventRenewed {
			n--
		}
	}
}

// TestFencedPartitionsHandOver: host 1 takes the only slot and its service
// runs commands on the four fenced partitions; host 2 waits, running
// nothing, for a lease and more. Host 1 shuts down (or loses its lease:
// its renewals fail); host 2 takes the slot with a greater epoch, takes
// every partition over (greater partition epochs) and continues. Each
// partition's PLog holds every acknowledged event of both hosts, no number
// twice.
func TestFencedPartitionsHandOver(t *testing.T) {
	t.Run("shutdown", func(t *testing.T) { handOver(t, false) })
	t.Run("loss", func(t *testing.T) { handOver(t, true) })
}

func handOver(t *testing.T, loss bool) {
	itest.NoLeaks(t)
	st1, st2 := open(t), open(t)
	// Host 1's leases go through the faulty store; its partitions through st1.
	fst, err := faulty.New(st1, faulty.Options{})
	require.NoError(t, err)
	svc1, svc2 := newPartitionsService("host1", st1), newPartitionsService("host2", st2)
	ev1, ev2 := make(chan elections.Event, 256), make(chan elections.Event, 256)

	h1, p1 := itest.Launch(t, itest.HostConfig(fst, 1, svc1.service(), ev1))
	problem1 := itest.Recv(t, p1, "host 1 launch")
	require.NoError(t, problem1.Err())
	a1 := itest.Recv(t, svc1.started, "host 1 service")
	require.Equal(t, uint32(1), a1.Slot)
	require.Equal(t, []isequencer.PartitionID{0, 1, 2, 3}, a1.Partitions)

	h2, p2 := itest.Launch(t, itest.HostConfig(st2, 2, svc2.service(), ev2))
	itest.Recv(t, svc1.acks(200), "200 commands acknowledged by host 1")
	waitRenewals(t, ev1, 6) // host 1 keeps the slot for a lease and more
	select {
	case a := <-svc2.started:
		t.Fatalf("host 2 runs its service (epoch %d) while host 1 holds the slot", a.Epoch)
	default:
	}

	if loss {
		require.NoError(t, fst.SetRules(faulty.Rule{Ops: []string{faulty.OpCompareAndSwap}, Action: faulty.Fail}))
		itest.Recv(t, problem1.Done(), "host 1 problem")
		require.ErrorIs(t, context.Cause(problem1), orchestration.ErrLeadershipLost)
	} else {
		require.NoError(t, h1.Shutdown())
		require.NoError(t, problem1.Err(), "a clean shutdown is no problem")
	}
	stop1 := itest.Recv(t, svc1.stopped, "host 1 service stop")
	problem2 := itest.Recv(t, p2, "host 2 launch")
	require.NoError(t, problem2.Err())
	a2 := itest.Recv(t, svc2.started, "host 2 service")
	assert.Equal(t, a1.Slot, a2.Slot)
	assert.Greater(t, a2.Epoch, a1.Epoch)
	assert.Equal(t, a1.Partitions, a2.Partitions)
	itest.Recv(t, svc2.acks(200), "200 commands acknowledged by host 2")
	require.NoError(t, h2.Shutdown())
	require.NoError(t, problem2.Err())
	if loss {
		require.ErrorIs(t, h1.Shutdown(), orchestration.ErrLeadershipLost)
	}

	acked1, epochs1, errs1 := svc1.result()
	acked2, epochs2, errs2 := svc2.result()
	require.Empty(t, errs1, "host 1's commands failed")
	require.Empty(t, errs2, "host 2's commands failed")
	for _, id := range a1.Partitions {
		require.NotEmpty(t, acked1[id], "host 1 wrote to partition %d", id)
		require.NotEmpty(t, acked2[id], "host 2 wrote to partition %d", id)
		require.Greater(t, epochs2[id], epochs1[id], "partition %d taken over", id)
		n := appparttest.VerifyPLog(t, st2, id, append(acked1[id], acked2[id]...))
		t.Logf("partition %d: %d events; host 1 acknowledged %d at epoch %d, host 2 %d at epoch %d",
			id, n, len(acked1[id]), epochs1[id], len(acked2[id]), epochs2[id])
	}
	t.Logf("slot %d: host 1 epoch %d, host 2 epoch %d; host 1's service stopped %v before host 2's began",
		a1.Slot, a1.Epoch, a2.Epoch, svc2.startedAt().Sub(stop1).Round(time.Millisecond))
	require.True(t, stop1.Before(svc2.startedAt()), "host 1's service stopped before host 2's started")
}
