package elections

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cqlseq/cqlseq/elections"
	"github.com/cqlseq/cqlseq/elections/electionstest"
	"github.com/cqlseq/cqlseq/orchestration"
	"github.com/cqlseq/cqlseq/storage"
)

const waitLimit = 30 * time.Second

// started is what a probe service saw: its assignment and when it began.
type started struct {
	a  orchestration.Assignment
	at time.Time
}

func probe(ch chan<- started) orchestration.Service {
	return orchestration.Service{Name: "probe", Run: func(ctx context.Context, a orchestration.Assignment) error {
		ch <- started{a, time.Now()}
		<-ctx.Done()
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

// hostConfig is a one-slot host with a 3 s lease on st.
func hostConfig(st storage.Storage, ip byte, svc orchestration.Service, events chan<- elections.Event) orchestration.Config {
	return orchestration.Config{
		Storage:            st,
		NumPartitions:      4,
		IP:                 net.IPv4(10, 0, 0, ip),
		LeadershipDuration: 3 * time.Second,
		Skew:               1500 * time.Millisecond,
		AcquisitionTimeout: 20 * time.Second,
		AcquisitionRetry:   200 * time.Millisecond,
		Services:           []orchestration.Service{svc},
		KillThreshold:      -1,
		Logger:             slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnEvent: func(ev elections.Event) {
			select {
			case events <- ev:
			default:
			}
		},
	}
}

func launch(t *testing.T, c orchestration.Config) (*orchestration.Host, <-chan context.Context) {
	h, err := orchestration.New(c)
	require.NoError(t, err)
	problems := make(chan context.Context, 1)
	go func() { problems <- h.Launch() }()
	return h, problems
}

// waitRenewals waits for n renewals reported on events.
func waitRenewals(t *testing.T, events <-chan elections.Event, n int) {
	for n > 0 {
		if recv(t, events, "renewal").Kind == elections.EventRenewed {
			n--
		}
	}
}

// TestHandOverOnShutdown is the reference platform's manual flow: host 1
// holds the only slot, host 2 waits for it, host 1 stops, host 2 takes over
// with a greater epoch.
func TestHandOverOnShutdown(t *testing.T) {
	st := open(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ev1, ev2 := make(chan elections.Event, 256), make(chan elections.Event, 256)
	s1, s2 := make(chan started, 1), make(chan started, 1)

	h1, p1 := launch(t, hostConfig(st, 1, probe(s1), ev1))
	live1 := recv(t, p1, "host 1 launch")
	require.NoError(t, live1.Err())
	a1 := recv(t, s1, "host 1 service").a
	assert.Equal(t, uint32(1), a1.Slot)

	h2, p2 := launch(t, hostConfig(st, 2, probe(s2), ev2))
	waitRenewals(t, ev1, 6) // host 1 keeps the slot for a lease and more
	require.Empty(t, s2, "host 2 runs nothing while host 1 holds the slot")

	require.NoError(t, h1.Shutdown())
	live2 := recv(t, p2, "host 2 launch")
	require.NoError(t, live2.Err())
	a2 := recv(t, s2, "host 2 service").a
	assert.Equal(t, uint32(1), a2.Slot)
	assert.Greater(t, a2.Epoch, a1.Epoch)
	assert.Equal(t, a1.Partitions, a2.Partitions)
	require.NoError(t, h2.Shutdown())
	require.NoError(t, live1.Err(), "a clean shutdown is no problem")
}

// TestHandOverOnLoss: host 1's renewals fail; it reports the loss by its
// local deadline, before the cluster lets host 2 in, and host 2 then takes
// the slot with a greater epoch.
func TestHandOverOnLoss(t *testing.T) {
	st := open(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	faulty := electionstest.NewFaulty(st)
	ev1, ev2 := make(chan elections.Event, 256), make(chan elections.Event, 256)
	s1, s2 := make(chan started, 1), make(chan started, 1)
	stopped1 := make(chan time.Time, 1)
	svc1 := orchestration.Service{Name: "probe", Run: func(ctx context.Context, a orchestration.Assignment) error {
		s1 <- started{a, time.Now()}
		<-ctx.Done()
		stopped1 <- time.Now()
		return ctx.Err()
	}}

	h1, p1 := launch(t, hostConfig(faulty, 1, svc1, ev1))
	problem1 := recv(t, p1, "host 1 launch")
	a1 := recv(t, s1, "host 1 service").a
	h2, p2 := launch(t, hostConfig(st, 2, probe(s2), ev2))
	waitRenewals(t, ev1, 2)

	faulty.Set(electionstest.OpCompareAndSwap, electionstest.Fault{Err: storage.ErrUnavailable})
	recv(t, problem1.Done(), "host 1 problem")
	require.ErrorIs(t, context.Cause(problem1), orchestration.ErrLeadershipLost)
	stop1 := recv(t, stopped1, "host 1 service stop")

	require.NoError(t, recv(t, p2, "host 2 launch").Err())
	s := recv(t, s2, "host 2 service")
	assert.Greater(t, s.a.Epoch, a1.Epoch)
	assert.True(t, stop1.Before(s.at), "host 1 stopped (%v) before host 2 started (%v)", stop1, s.at)
	t.Logf("host 2 started %v after host 1's services stopped", s.at.Sub(stop1))
	require.ErrorIs(t, h1.Shutdown(), orchestration.ErrLeadershipLost)
	require.NoError(t, h2.Shutdown())
}
