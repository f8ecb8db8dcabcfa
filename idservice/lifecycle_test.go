package idservice_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/idservice"
	"github.com/cqlseq/cqlseq/storage/faulty"
	"github.com/cqlseq/cqlseq/storage/mem"
	"github.com/cqlseq/cqlseq/timeshard"
)

func newFaulty(t *testing.T) *faulty.Store {
	t.Helper()
	f, err := faulty.New(mem.New(mem.Options{}), faulty.Options{})
	require.NoError(t, err)
	return f
}

// TestGracefulShutdown: a request waiting for a chunk when shutdown begins
// completes with its ID; new connections are refused; Close releases the
// node leases, so a second instance takes the same node IDs at once.
func TestGracefulShutdown(t *testing.T) {
	st := newFaulty(t)
	o := testOptions(st)
	o.Timeshard = timeshard.Options{FirstNode: 0}
	s := start(t, o, nil)
	nodes := map[string]uint32{}
	for _, l := range []string{"63", "53"} {
		n, ok := s.svc.Node(l)
		require.True(t, ok)
		nodes[l] = n
	}
	// The first chunk's compare-and-swap takes 500 ms: the next request
	// waits for it.
	require.NoError(t, st.SetRules(faulty.Rule{Ops: []string{faulty.OpCompareAndSwap}, Action: faulty.Delay, Delay: 500 * time.Millisecond}))
	s.create(t, `{"name":"slow"}`)
	type result struct {
		r   response
		err error
	}
	inflight := make(chan result, 1)
	go func() {
		r, err := s.try("POST", "/v1/sequences/slow/next", nil, "")
		inflight <- result{r, err}
	}()
	require.Eventually(t, func() bool {
		q, err := s.svc.Sequence(context.Background(), "slow")
		return err == nil && q.Stats().Waits == 1
	}, 5*time.Second, time.Millisecond, "the request waits for the chunk")

	began := time.Now()
	shut := make(chan error, 1)
	go func() { s.stop(); shut <- <-s.served }()
	select {
	case err := <-shut:
		t.Fatalf("Serve returned (%v) with a request in flight", err)
	case res := <-inflight:
		require.NoError(t, res.err)
		assert.Equal(t, http.StatusOK, res.r.status, res.r.body)
		assert.JSONEq(t, `{"ids":[1]}`, res.r.body, "the request in flight got its ID")
	}
	require.NoError(t, <-shut)
	assert.Less(t, time.Since(began), 5*time.Second)
	_, err := s.try("GET", "/healthz", nil, "")
	assert.Error(t, err, "no new connection after shutdown")

	st.Clear()
	require.NoError(t, s.svc.Close())
	s.closed = true
	s.client.CloseIdleConnections()
	_, err = s.svc.NextTimeshard(context.Background(), "63", 1)
	assert.ErrorIs(t, err, idservice.ErrClosed)

	// A second instance on the store takes the same node IDs, without
	// waiting for the leases to expire (15 s).
	o2 := testOptions(st)
	o2.Timeshard = timeshard.Options{FirstNode: int64(nodes["63"])}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	svc2, err := idservice.New(ctx, o2)
	require.NoError(t, err)
	defer svc2.Close()
	for l, n := range nodes {
		got, ok := svc2.Node(l)
		assert.True(t, ok)
		assert.Equal(t, n, got, "layout %s: the released node is taken again", l)
	}
}

// TestShutdownIsBounded: a request that outlives ShutdownTimeout is cut
// off and Serve says so, within the bound.
func TestShutdownIsBounded(t *testing.T) {
	st := newFaulty(t)
	o := testOptions(st)
	o.ShutdownTimeout = 200 * time.Millisecond
	o.RequestTimeout = 10 * time.Second
	s := start(t, o, nil)
	require.NoError(t, st.SetRules(faulty.Rule{Ops: []string{faulty.OpCompareAndSwap}, Action: faulty.Timeout}))
	s.create(t, `{"name":"stuck"}`)
	inflight := make(chan error, 1)
	go func() {
		_, err := s.try("POST", "/v1/sequences/stuck/next", nil, "")
		inflight <- err
	}()
	require.Eventually(t, func() bool {
		q, err := s.svc.Sequence(context.Background(), "stuck")
		return err == nil && q.Stats().Waits == 1
	}, 5*time.Second, time.Millisecond)
	began := time.Now()
	s.stop()
	err := <-s.served
	assert.ErrorContains(t, err, "cut off")
	assert.Less(t, time.Since(began), 2*time.Second)
	assert.Error(t, <-inflight, "the client sees its connection closed")
	st.Clear()
	s.served <- nil // for the cleanup
}

// TestReadyz: /readyz is 503 while the store is down (no sequence holds a
// chunk) and 200 again once it is back; /healthz stays 200.
func TestReadyz(t *testing.T) {
	st := newFaulty(t)
	s := start(t, testOptions(st), nil)
	ready := func() (int, string) {
		r := s.do(t, "GET", "/readyz", nil)
		var b struct {
			Reason string `json:"reason"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.body), &b))
		return r.status, b.Reason
	}
	code, _ := ready()
	require.Equal(t, 200, code)

	require.NoError(t, st.SetRules(faulty.Rule{Action: faulty.Fail}))
	require.Eventually(t, func() bool { c, _ := ready(); return c == 503 }, 5*time.Second, 10*time.Millisecond)
	_, why := ready()
	assert.Equal(t, "store unreachable and no chunk in hand", why)
	assert.Equal(t, 200, s.do(t, "GET", "/healthz", nil).status, "the process is up")
	r := s.do(t, "POST", "/v1/sequences", []byte(`{"name":"x"}`))
	assert.Equal(t, 503, r.status)
	assert.Equal(t, "unavailable", r.err(t).Code)
	assert.Equal(t, "1", r.header.Get("Retry-After"))

	st.Clear()
	require.Eventually(t, func() bool { c, _ := ready(); return c == 200 }, 5*time.Second, 10*time.Millisecond)
}

// TestReadyWithChunkInHand: with the store down, an instance that holds a
// chunk stays ready and hands out its values.
func TestReadyWithChunkInHand(t *testing.T) {
	st := newFaulty(t)
	s := start(t, testOptions(st), nil)
	s.create(t, `{"name":"held","chunk_size":1000}`)
	require.Equal(t, []int64{1}, s.ids(t, "/v1/sequences/held/next"))
	require.NoError(t, st.SetRules(faulty.Rule{Action: faulty.Fail}))
	time.Sleep(100 * time.Millisecond) // several probes
	assert.Equal(t, 200, s.do(t, "GET", "/readyz", nil).status)
	assert.Equal(t, []int64{2, 3}, s.ids(t, "/v1/sequences/held/next?count=2"))
	st.Clear()
}

// TestLeaseLostIsTakenAgain: with the store down past the node lease's
// local deadline the lease is lost: /readyz lists the layout as waiting
// and timeshard requests are 503 no_node_lease; once the store is back a
// node is leased again and IDs are made again.
func TestLeaseLostIsTakenAgain(t *testing.T) {
	st := newFaulty(t)
	o := testOptions(st)
	o.Timeshard = timeshard.Options{LeaseDuration: 2 * time.Second} // lost 1 s (TTL - skew) after the last renewal
	s := start(t, o, nil)
	before := s.ids(t, "/v1/timeshard/63/next")

	require.NoError(t, st.SetRules(faulty.Rule{Action: faulty.Fail}))
	require.Eventually(t, func() bool { _, ok := s.svc.Node("63"); return !ok }, 10*time.Second, 10*time.Millisecond)
	r := s.do(t, "GET", "/readyz", nil)
	assert.Equal(t, 503, r.status, "the store is down and no chunk is in hand")
	assert.Contains(t, r.body, `"waiting_layouts":["63"`)
	r = s.do(t, "POST", "/v1/timeshard/63/next", nil)
	require.Equal(t, 503, r.status, r.body)
	assert.Equal(t, "no_node_lease", r.err(t).Code)
	m := s.do(t, "GET", "/metrics", nil)
	assert.Contains(t, m.body, `cqlseq_service_node_lease_held{layout="63"} 0`)

	st.Clear()
	require.Eventually(t, func() bool { return s.svc.Ready() && len(s.svc.Waiting()) == 0 }, 10*time.Second, 10*time.Millisecond)
	after := s.ids(t, "/v1/timeshard/63/next")
	assert.Greater(t, after[0], before[0])
}
