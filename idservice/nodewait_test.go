package idservice_test

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/idservice"
	v1 "github.com/cqlseq/cqlseq/idservice/gen/idservicev1"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/mem"
	"github.com/cqlseq/cqlseq/timeshard"
)

// leaseAll leases every node ID of generator name (layout l) in st, as
// other instances of the ID space would, and returns the generators; the
// test's cleanup releases those still open.
func leaseAll(t *testing.T, st storage.Storage, name string, l timeshard.Layout) []*timeshard.Generator {
	t.Helper()
	gs := make([]*timeshard.Generator, 0, l.Nodes())
	t.Cleanup(func() {
		for _, g := range gs {
			_ = g.Close()
		}
	})
	for n := range l.Nodes() {
		g, err := timeshard.Open(context.Background(), st, name, timeshard.Options{Layout: l, FirstNode: int64(n), Process: "other"})
		require.NoError(t, err)
		gs = append(gs, g)
	}
	_, err := timeshard.Open(context.Background(), st, name, timeshard.Options{Layout: l})
	require.ErrorIs(t, err, timeshard.ErrNoNode)
	return gs
}

// readyBody is /readyz's body.
type readyBody struct {
	Status  string   `json:"status"`
	Reason  string   `json:"reason"`
	Waiting []string `json:"waiting_layouts"`
}

func (s *server) readyz(t *testing.T) (int, readyBody) {
	t.Helper()
	r := s.do(t, "GET", "/readyz", nil)
	var b readyBody
	require.NoError(t, json.Unmarshal([]byte(r.body), &b), r.body)
	return r.status, b
}

// metricValue returns the value of the sample named by series (name and
// labels as the text format writes them) on s's /metrics, or -1.
func (s *server) metricValue(t *testing.T, series string) float64 {
	t.Helper()
	body := s.do(t, "GET", "/metrics", nil).body
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	return v
}

// TestServesWhileALayoutWaitsForANodeID (issue 52, defect 8): every node
// ID of the 53-bit layout is leased (a crash loop's leases waiting for
// their TTL, or a 33rd instance). The service starts anyway: it serves
// sequences, UUIDs, the 63-bit layout and Leaf's paths, answers 503
// no_node_lease on the 53-bit layout, says so in /readyz (200, degraded)
// and the metrics, and serves the layout once a node ID is released.
func TestServesWhileALayoutWaitsForANodeID(t *testing.T) {
	st := mem.New(mem.Options{})
	holders := leaseAll(t, st, "cqlseq/53", timeshard.JS53Layout())
	o := testOptions(st)
	o.LeaseRetryMax = 100 * time.Millisecond
	s := start(t, o, nil)

	s.create(t, `{"name":"orders"}`)
	assert.Equal(t, []int64{1, 2}, s.ids(t, "/v1/sequences/orders/next?count=2"))
	assert.Len(t, s.ids(t, "/v1/timeshard/63/next?count=3"), 3)
	assert.Equal(t, 200, s.do(t, "POST", "/v1/uuids", nil).status)
	r := s.do(t, "GET", "/api/snowflake/get/k", nil)
	assert.Equal(t, 200, r.status, "Leaf's snowflake path is the 63-bit layout: %s", r.body)
	r = s.do(t, "GET", "/api/segment/get/orders", nil)
	assert.Equal(t, "3", r.body)

	r = s.do(t, "POST", "/v1/timeshard/53/next", nil)
	require.Equal(t, http.StatusServiceUnavailable, r.status, r.body)
	assert.Equal(t, "no_node_lease", r.err(t).Code)
	assert.Contains(t, r.err(t).Message, "all 32 node IDs are leased")
	assert.Equal(t, "1", r.header.Get("Retry-After"))
	assert.Equal(t, "application/json", r.header.Get("Content-Type"))
	c := grpcClient(t, s, nil)
	_, err := c.NextTimeshard(t.Context(), req(&v1.NextTimeshardRequest{Layout: "53"}, ""))
	requireCode(t, err, connect.CodeUnavailable, "no_node_lease")
	tr, err := c.NextTimeshard(t.Context(), req(&v1.NextTimeshardRequest{Layout: "63"}, ""))
	require.NoError(t, err)
	assert.Len(t, tr.Msg.GetIds(), 1)
	_, ok := s.svc.Node("53")
	assert.False(t, ok)
	assert.Equal(t, []string{"53"}, s.svc.Waiting())
	assert.True(t, s.svc.Ready(), "a layout waiting for a node ID leaves the instance ready (degraded)")

	code, b := s.readyz(t)
	assert.Equal(t, 200, code)
	assert.Equal(t, "degraded", b.Status)
	assert.Equal(t, []string{"53"}, b.Waiting)
	assert.Contains(t, b.Reason, "layout 53")

	assert.Equal(t, 0.0, s.metricValue(t, `cqlseq_service_node_lease_held{layout="53"}`))
	assert.Equal(t, 1.0, s.metricValue(t, `cqlseq_service_node_lease_held{layout="63"}`))
	assert.Equal(t, 1.0, s.metricValue(t, `cqlseq_service_ready`))
	require.Eventually(t, func() bool {
		return s.metricValue(t, `cqlseq_service_node_lease_attempts_total{layout="53",result="no_free_node"}`) >= 2
	}, 10*time.Second, 20*time.Millisecond, "the lease is retried in the background")
	assert.Equal(t, 1.0, s.metricValue(t, `cqlseq_service_node_lease_attempts_total{layout="63",result="taken"}`))

	// Node 7 is released: the service takes it and serves the layout.
	require.NoError(t, holders[7].Close())
	require.Eventually(t, func() bool { _, ok := s.svc.Node("53"); return ok }, 20*time.Second, 20*time.Millisecond)
	node, _ := s.svc.Node("53")
	assert.Equal(t, uint32(7), node)
	ids := s.ids(t, "/v1/timeshard/53/next?count=2")
	require.Len(t, ids, 2)
	assert.Equal(t, uint32(7), timeshard.JS53Layout().Node(ids[0]))
	code, b = s.readyz(t)
	assert.Equal(t, 200, code)
	assert.Equal(t, "ready", b.Status)
	assert.Empty(t, b.Waiting)
	assert.Empty(t, s.svc.Waiting())
	assert.Equal(t, 1.0, s.metricValue(t, `cqlseq_service_node_lease_held{layout="53"}`))
	assert.Equal(t, 1.0, s.metricValue(t, `cqlseq_service_node_lease_attempts_total{layout="53",result="taken"}`))
}

// TestLeafSnowflakeWaitsForANodeID: when the layout of Leaf's snowflake
// path waits for a node ID, that path answers as Leaf does without a
// worker ID (500, Result id -3 in Spring's error body); the segment path
// and the other layout are served.
func TestLeafSnowflakeWaitsForANodeID(t *testing.T) {
	st := mem.New(mem.Options{})
	leaseAll(t, st, "cqlseq/63", timeshard.DefaultLayout())
	s := start(t, testOptions(st), nil)
	r := s.do(t, "GET", "/api/snowflake/get/k", nil)
	assert.Equal(t, 500, r.status)
	assert.Contains(t, r.body, "Result{id=-3, status=EXCEPTION}")
	s.create(t, `{"name":"orders"}`)
	assert.Equal(t, "1", s.do(t, "GET", "/api/segment/get/orders", nil).body)
	assert.Len(t, s.ids(t, "/v1/timeshard/53/next"), 1)
	assert.Equal(t, []string{"63"}, s.svc.Waiting())
}

// TestLeaseRetriesBackOff: a layout without a free node ID is retried with
// back-off (from ProbeInterval, doubling, up to LeaseRetryMax), not at
// every probe; Close stops the retries at once (goleak checks the
// goroutine is gone).
func TestLeaseRetriesBackOff(t *testing.T) {
	st := mem.New(mem.Options{})
	leaseAll(t, st, "cqlseq/53", timeshard.JS53Layout())
	o := testOptions(st) // probes every 20 ms
	o.LeaseRetryMax = 400 * time.Millisecond
	s := start(t, o, nil)
	time.Sleep(2 * time.Second)
	// Waits of at least half of 20, 40, 80, 160, 320, 400, 400, ... ms:
	// fewer than 15 tries in 2 s (a try per probe would be about 100).
	n := s.metricValue(t, `cqlseq_service_node_lease_attempts_total{layout="53",result="no_free_node"}`)
	assert.GreaterOrEqual(t, n, 2.0)
	assert.Less(t, n, 15.0)
	began := time.Now()
	require.NoError(t, s.shutdown(t))
	assert.Less(t, time.Since(began), 5*time.Second)
}

// TestOptionsLeaseRetryMax: a negative LeaseRetryMax is refused.
func TestOptionsLeaseRetryMax(t *testing.T) {
	o := idservice.Options{Store: mem.New(mem.Options{}), LeaseRetryMax: -time.Second}
	_, err := idservice.New(context.Background(), o)
	assert.ErrorIs(t, err, idservice.ErrInvalidOptions)
	assert.ErrorContains(t, err, "LeaseRetryMax")
}
