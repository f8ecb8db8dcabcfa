package elections

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/elections"
	"github.com/cqlseq/cqlseq/integration/itest"
	"github.com/cqlseq/cqlseq/orchestration"
	"github.com/cqlseq/cqlseq/storage/faulty"
)

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

// waitRenewals waits for n renewals reported on events.
func waitRenewals(t *testing.T, events <-chan elections.Event, n int) {
	for n > 0 {
		if itest.Recv(t, events, "renewal").Kind == elections.EventRenewed {
			n--
		}
	}
}

// TestHandOverOnShutdown is the reference platform's manual flow: host 1
// holds the only slot, host 2 waits for it, host 1 stops, host 2 takes over
// with a greater epoch.
func TestHandOverOnShutdown(t *testing.T) {
	itest.NoLeaks(t)
	st := open(t)
	ev1, ev2 := make(chan elections.Event, 256), make(chan elections.Event, 256)
	s1, s2 := make(chan started, 1), make(chan started, 1)

	h1, p1 := itest.Launch(t, itest.HostConfig(st, 1, probe(s1), ev1))
	live1 := itest.Recv(t, p1, "host 1 launch")
	require.NoError(t, live1.Err())
	a1 := itest.Recv(t, s1, "host 1 service").a
	assert.Equal(t, uint32(1), a1.Slot)

	h2, p2 := itest.Launch(t, itest.HostConfig(st, 2, probe(s2), ev2))
	waitRenewals(t, ev1, 6) // host 1 keeps the slot for a lease and more
	require.Empty(t, s2, "host 2 runs nothing while host 1 holds the slot")

	require.NoError(t, h1.Shutdown())
	live2 := itest.Recv(t, p2, "host 2 launch")
	require.NoError(t, live2.Err())
	a2 := itest.Recv(t, s2, "host 2 service").a
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
	itest.NoLeaks(t)
	st := open(t)
	fst, err := faulty.New(st, faulty.Options{})
	require.NoError(t, err)
	ev1, ev2 := make(chan elections.Event, 256), make(chan elections.Event, 256)
	s1, s2 := make(chan started, 1), make(chan started, 1)
	stopped1 := make(chan time.Time, 1)
	svc1 := orchestration.Service{Name: "probe", Run: func(ctx context.Context, a orchestration.Assignment) error {
		s1 <- started{a, time.Now()}
		<-ctx.Done()
		stopped1 <- time.Now()
		return ctx.Err()
	}}

	h1, p1 := itest.Launch(t, itest.HostConfig(fst, 1, svc1, ev1))
	problem1 := itest.Recv(t, p1, "host 1 launch")
	a1 := itest.Recv(t, s1, "host 1 service").a
	h2, p2 := itest.Launch(t, itest.HostConfig(st, 2, probe(s2), ev2))
	waitRenewals(t, ev1, 2)

	require.NoError(t, fst.SetRules(faulty.Rule{Ops: []string{faulty.OpCompareAndSwap}, Action: faulty.Fail}))
	itest.Recv(t, problem1.Done(), "host 1 problem")
	require.ErrorIs(t, context.Cause(problem1), orchestration.ErrLeadershipLost)
	stop1 := itest.Recv(t, stopped1, "host 1 service stop")

	require.NoError(t, itest.Recv(t, p2, "host 2 launch").Err())
	s := itest.Recv(t, s2, "host 2 service")
	assert.Greater(t, s.a.Epoch, a1.Epoch)
	assert.True(t, stop1.Before(s.at), "host 1 stopped (%v) before host 2 started (%v)", stop1, s.at)
	t.Logf("host 2 started %v after host 1's services stopped", s.at.Sub(stop1))
	require.ErrorIs(t, h1.Shutdown(), orchestration.ErrLeadershipLost)
	require.NoError(t, h2.Shutdown())
}
