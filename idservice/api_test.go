package idservice_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/idservice"
	v1 "github.com/cqlseq/cqlseq/idservice/gen/idservicev1"
	"github.com/cqlseq/cqlseq/metrics"
	"github.com/cqlseq/cqlseq/storage/mem"
	"github.com/cqlseq/cqlseq/timeshard"
)

// TestBadInputCostsNothing sends every kind of bad input and checks each
// answer's status and code, that none reached the store (its calls are
// counted) and that none took an ID (the next one follows the last one
// handed out before).
func TestBadInputCostsNothing(t *testing.T) {
	mc, err := metrics.New(prometheus.NewRegistry())
	require.NoError(t, err)
	st := mc.Storage(mem.New(mem.Options{}))
	o := testOptions(st)
	o.ProbeInterval = time.Hour // no background probe during the count
	o.MaxBodyBytes = 256
	s := start(t, o, nil)
	s.create(t, `{"name":"orders","type":"bigint","start":1,"step":1,"chunk_size":1000}`)
	require.Equal(t, []int64{1}, s.ids(t, "/v1/sequences/orders/next"))
	require.Eventually(t, func() bool { // the first chunk only: no fetch in flight
		q, err := s.svc.Sequence(t.Context(), "orders")
		return err == nil && q.Stats().Fetches == 1
	}, 5*time.Second, 5*time.Millisecond)
	before, err := mc.StorageCalls()
	require.NoError(t, err)

	long := strings.Repeat("a", idservice.MaxNameLen+1)
	big := `{"name":"x","type":"bigint","pad":"` + strings.Repeat("p", 300) + `"}`
	for _, c := range []struct {
		method, path, body string
		wstatus            int
		wcode              string
	}{
		{"POST", "/v1/sequences/orders/next?count=0", "", 400, "invalid_count"},
		{"POST", "/v1/sequences/orders/next?count=-1", "", 400, "invalid_count"},
		{"POST", "/v1/sequences/orders/next?count=10001", "", 400, "invalid_count"},
		{"POST", "/v1/sequences/orders/next?count=99999999999999999999", "", 400, "invalid_count"},
		{"POST", "/v1/sequences/orders/next?count=abc", "", 400, "invalid_count"},
		{"POST", "/v1/sequences/orders/next?count=1.5", "", 400, "invalid_count"},
		{"POST", "/v1/sequences/orders/next?count=+5", "", 400, "invalid_count"},
		{"POST", "/v1/sequences/orders/next?count=", "", 400, "invalid_count"},
		{"POST", "/v1/sequences/orders/next?count=1&count=2", "", 400, "invalid_count"},
		{"POST", "/v1/sequences/" + long + "/next", "", 400, "invalid_name"},
		{"POST", "/v1/sequences/or%00ders/next", "", 400, "invalid_name"},
		{"POST", "/v1/sequences/or%20ders/next", "", 400, "invalid_name"},
		{"POST", "/v1/sequences/%C3%A9/next", "", 400, "invalid_name"},
		{"POST", "/v1/sequences/a%2Fb/next", "", 400, "invalid_name"},
		{"GET", "/v1/sequences/a%FFb", "", 400, "invalid_name"},
		{"GET", "/api/segment/get/" + long, "", 500, ""},
		{"POST", "/v1/timeshard/64/next", "", 404, "unknown_layout"},
		{"POST", "/v1/timeshard/53/next?count=0", "", 400, "invalid_count"},
		{"POST", "/v1/uuids?count=10001", "", 400, "invalid_count"},
		{"GET", "/v1/timeshard/53/ids/abc", "", 400, "invalid_id"},
		{"GET", "/v1/timeshard/53/ids/-1", "", 400, "invalid_id"},
		{"GET", "/v1/timeshard/53/ids/9007199254740992", "", 400, "invalid_id"}, // 2^53
		{"GET", "/v1/timeshard/63/ids/9223372036854775808", "", 400, "invalid_id"},
		{"GET", "/v1/timeshard/99/ids/1", "", 404, "unknown_layout"},
		{"POST", "/v1/sequences", big, 413, "body_too_large"},
		{"POST", "/v1/sequences", `{"name":"x",`, 400, "bad_request"},
		{"POST", "/v1/sequences", `{"name":"x","typo":1}`, 400, "bad_request"},
		{"POST", "/v1/sequences", `{"name":"x"} {}`, 400, "bad_request"},
		{"POST", "/v1/sequences", `{"name":"x y"}`, 400, "invalid_name"},
		{"POST", "/v1/sequences", `{"name":"x","type":"float"}`, 400, "invalid_definition"},
		{"POST", "/v1/sequences", `{"name":"x","step":-1}`, 400, "invalid_definition"},
		{"POST", "/v1/sequences", `{"name":"x","type":"smallint","start":40000}`, 400, "invalid_definition"},
		{"GET", "/v1/sequences/orders/next", "", 405, "method_not_allowed"},
		{"PUT", "/v1/sequences/orders", "", 405, "method_not_allowed"},
		{"DELETE", "/v1/sequences", "", 405, "method_not_allowed"},
		{"PATCH", "/v1/sequences/orders", `{"start":5}`, 400, "invalid_definition"},
		{"PATCH", "/v1/sequences/orders", `{"chunk_size":0}`, 400, "invalid_definition"},
		{"PATCH", "/v1/sequences/orders", `{}`, 400, "invalid_definition"},
		{"PATCH", "/v1/sequences/orders", `{"chunk":5}`, 400, "bad_request"},
		{"PATCH", "/v1/sequences/orders", `{"adaptive":"yes"}`, 400, "bad_request"},
		{"PATCH", "/v1/sequences/or%20ders", `{"chunk_size":5}`, 400, "invalid_name"},
		{"DELETE", "/v1/sequences/or%20ders", "", 400, "invalid_name"},
		{"DELETE", "/v1/sequences/orders", "{}", 400, "bad_request"},
		{"GET", "/v1/sequences?limit=0", "", 400, "bad_request"},
		{"GET", "/v1/sequences?limit=101", "", 400, "bad_request"},
		{"GET", "/v1/sequences?limit=1&limit=2", "", 400, "bad_request"},
		{"GET", "/v1/sequences?page=2", "", 400, "bad_request"},
		{"GET", "/v1/sequences?after=a%20b", "", 400, "invalid_name"},
		{"GET", "/v2/nothing", "", 404, "not_found"},
		{"GET", "/v1/sequences/", "", 404, "not_found"},
	} {
		var body []byte
		if c.body != "" {
			body = []byte(c.body)
		}
		r := s.do(t, c.method, c.path, body)
		if !assert.Equal(t, c.wstatus, r.status, "%s %s: %s", c.method, c.path, r.body) || c.wcode == "" {
			continue
		}
		e := r.err(t)
		assert.Equal(t, c.wcode, e.Code, "%s %s", c.method, c.path)
		assert.NotEmpty(t, e.Message, "%s %s", c.method, c.path)
		assert.Equal(t, "application/json", r.header.Get("Content-Type"))
	}
	after, err := mc.StorageCalls()
	require.NoError(t, err)
	assert.Equal(t, before, after, "no bad request reached the store")
	assert.Equal(t, []int64{2}, s.ids(t, "/v1/sequences/orders/next"), "no bad request took an ID")
}

// TestUnknownSequence: an unknown name is 404 unknown_sequence; it costs
// one read of the store, then none until UnknownTTL has passed; creating
// it ends that at once.
func TestUnknownSequence(t *testing.T) {
	mc, err := metrics.New(prometheus.NewRegistry())
	require.NoError(t, err)
	o := testOptions(mc.Storage(mem.New(mem.Options{})))
	o.ProbeInterval, o.UnknownTTL = time.Hour, time.Hour
	s := start(t, o, nil)
	gets := func() uint64 {
		c, err := mc.StorageCalls()
		require.NoError(t, err)
		return c["Get"]
	}
	g0 := gets()
	for range 3 {
		r := s.do(t, "POST", "/v1/sequences/nope/next", nil)
		require.Equal(t, 404, r.status)
		assert.Equal(t, "unknown_sequence", r.err(t).Code)
		assert.Contains(t, r.err(t).Message, `"nope"`)
	}
	assert.Equal(t, g0+1, gets(), "one read for three requests")
	s.create(t, `{"name":"nope"}`)
	assert.Equal(t, []int64{1}, s.ids(t, "/v1/sequences/nope/next"))
}

// TestCreateAndDescribe: create answers 201, the same definition again
// 200, another one 409; GET shows the definition and the state.
func TestCreateAndDescribe(t *testing.T) {
	s := start(t, testOptions(nil), nil)
	def := `{"name":"inv","type":"integer","start":100,"step":10,"chunk_size":5}`
	r := s.do(t, "POST", "/v1/sequences", []byte(def))
	require.Equal(t, 201, r.status, r.body)
	assert.JSONEq(t, `{"name":"inv","type":"integer","start":100,"step":10,"chunk_size":5,"max_value":2147483647,"capacity":214748355,"adaptive":false,"retired":false}`, r.body)
	r = s.do(t, "POST", "/v1/sequences", []byte(def))
	assert.Equal(t, 200, r.status, "the same definition again: %s", r.body)
	r = s.do(t, "POST", "/v1/sequences", []byte(`{"name":"inv","type":"integer","start":100,"step":10,"chunk_size":6}`))
	assert.Equal(t, 409, r.status, r.body)
	assert.Equal(t, "definition_mismatch", r.err(t).Code)

	assert.Equal(t, []int64{100, 110, 120, 130, 140, 150, 160}, s.ids(t, "/v1/sequences/inv/next?count=7"), "across a chunk boundary")
	r = s.do(t, "GET", "/v1/sequences/inv", nil)
	require.Equal(t, 200, r.status, r.body)
	var v struct {
		Type      string `json:"type"`
		Step      int64  `json:"step"`
		Allocated uint64 `json:"allocated"`
		Instance  struct {
			Issued uint64 `json:"issued"`
		} `json:"instance"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.body), &v))
	assert.Equal(t, "integer", v.Type)
	assert.Equal(t, int64(10), v.Step)
	assert.GreaterOrEqual(t, v.Allocated, uint64(10), "two chunks at least")
	assert.Equal(t, uint64(7), v.Instance.Issued)

	def0 := s.do(t, "POST", "/v1/sequences", []byte(`{"name":"defaults"}`))
	require.Equal(t, 201, def0.status, def0.body)
	assert.JSONEq(t, `{"name":"defaults","type":"bigint","start":1,"step":1,"chunk_size":1000000000,"max_value":9223372036854775807,"capacity":9223372036854775807,"adaptive":false,"retired":false}`, def0.body)
}

// TestExhaustedNeverWraps: a smallint sequence near its end hands out its
// last values, then answers 409 sequence_exhausted, also for a batch.
func TestExhaustedNeverWraps(t *testing.T) {
	s := start(t, testOptions(nil), nil)
	s.create(t, `{"name":"tiny","type":"smallint","start":32764,"chunk_size":2}`)
	assert.Equal(t, []int64{32764, 32765, 32766}, s.ids(t, "/v1/sequences/tiny/next?count=3"))
	assert.Equal(t, []int64{32767}, s.ids(t, "/v1/sequences/tiny/next"))
	for _, p := range []string{"/v1/sequences/tiny/next", "/v1/sequences/tiny/next?count=5"} {
		r := s.do(t, "POST", p, nil)
		require.Equal(t, 409, r.status, r.body)
		e := r.err(t)
		assert.Equal(t, "sequence_exhausted", e.Code)
		assert.Contains(t, e.Message, "tiny")
	}
}

// TestLeafPaths: Leaf's segment and snowflake paths answer the ID as a
// plain-text body, and an unknown key as Leaf does (500, Spring Boot 1.5's
// error body with Leaf's Result{id=-2, status=EXCEPTION}).
func TestLeafPaths(t *testing.T) {
	s := start(t, testOptions(nil), nil)
	s.create(t, `{"name":"leaf-segment-test","chunk_size":100}`)
	for _, want := range []string{"1", "2", "3"} {
		r := s.do(t, "GET", "/api/segment/get/leaf-segment-test", nil)
		require.Equal(t, 200, r.status, r.body)
		assert.Equal(t, want, r.body, "the ID alone, no newline")
		assert.Equal(t, "text/plain;charset=UTF-8", r.header.Get("Content-Type"))
	}
	r := s.do(t, "GET", "/api/segment/get/no-such-tag", nil)
	require.Equal(t, 500, r.status)
	var lb struct {
		Timestamp int64  `json:"timestamp"`
		Status    int    `json:"status"`
		Error     string `json:"error"`
		Exception string `json:"exception"`
		Message   string `json:"message"`
		Path      string `json:"path"`
		Code      string `json:"code"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.body), &lb), r.body)
	assert.Equal(t, 500, lb.Status)
	assert.Equal(t, "Internal Server Error", lb.Error)
	assert.Equal(t, "com.sankuai.inf.leaf.server.exception.LeafServerException", lb.Exception)
	assert.Equal(t, "Result{id=-2, status=EXCEPTION}", lb.Message)
	assert.Equal(t, "/api/segment/get/no-such-tag", lb.Path)
	assert.Equal(t, "unknown_sequence", lb.Code)
	assert.WithinDuration(t, time.Now(), time.UnixMilli(lb.Timestamp), time.Minute)

	node, ok := s.svc.Node("63")
	require.True(t, ok)
	var prev int64
	for range 3 {
		r := s.do(t, "GET", "/api/snowflake/get/any-key", nil)
		require.Equal(t, 200, r.status, r.body)
		assert.Equal(t, "text/plain;charset=UTF-8", r.header.Get("Content-Type"))
		id, err := strconv.ParseInt(r.body, 10, 64)
		require.NoError(t, err, "body %q", r.body)
		assert.Greater(t, id, prev)
		prev = id
		l := timeshard.DefaultLayout()
		assert.Equal(t, node, l.Node(id))
		assert.WithinDuration(t, time.Now(), l.Time(id), 2*time.Second)
	}
}

// TestTimeshardAndUUIDs: both layouts make IDs of their width that
// decompose into this instance's node and the current time; the layouts
// route shows each layout's lifetime; UUIDs are version 7.
func TestTimeshardAndUUIDs(t *testing.T) {
	s := start(t, testOptions(nil), nil)
	for _, c := range []struct {
		layout string
		l      timeshard.Layout
	}{{"63", timeshard.DefaultLayout()}, {"53", timeshard.JS53Layout()}} {
		ids := s.ids(t, "/v1/timeshard/"+c.layout+"/next?count=300")
		require.Len(t, ids, 300)
		for i, id := range ids {
			require.LessOrEqual(t, id, c.l.MaxID())
			if i > 0 {
				require.Greater(t, id, ids[i-1])
			}
		}
		r := s.do(t, "GET", "/v1/timeshard/"+c.layout+"/ids/"+strconv.FormatInt(ids[0], 10), nil)
		require.Equal(t, 200, r.status, r.body)
		var d struct {
			ID      int64     `json:"id"`
			Time    time.Time `json:"time"`
			Node    uint32    `json:"node"`
			Counter uint64    `json:"counter"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.body), &d))
		node, _ := s.svc.Node(c.layout)
		assert.Equal(t, ids[0], d.ID)
		assert.Equal(t, node, d.Node)
		assert.Equal(t, c.l.Counter(ids[0]), d.Counter)
		assert.WithinDuration(t, time.Now(), d.Time, 2*time.Second)
	}
	r := s.do(t, "GET", "/v1/timeshard", nil)
	require.Equal(t, 200, r.status)
	var ls struct {
		Layouts []struct {
			Name          string    `json:"name"`
			Bits          uint      `json:"bits"`
			RunsOut       time.Time `json:"runs_out"`
			LifetimeYears float64   `json:"lifetime_years"`
			MaxID         int64     `json:"max_id"`
			Nodes         uint32    `json:"nodes"`
		} `json:"layouts"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.body), &ls))
	require.Len(t, ls.Layouts, 2)
	assert.Equal(t, "63", ls.Layouts[0].Name)
	assert.Equal(t, uint(53), ls.Layouts[1].Bits)
	assert.Equal(t, int64(1<<53-1), ls.Layouts[1].MaxID)
	assert.Equal(t, uint32(32), ls.Layouts[1].Nodes)
	assert.Equal(t, 69.7, ls.Layouts[1].LifetimeYears)
	assert.Equal(t, time.Date(2094, 9, 7, 15, 47, 35, 552_000_000, time.UTC), ls.Layouts[1].RunsOut)

	r = s.do(t, "POST", "/v1/uuids?count=3", nil)
	require.Equal(t, 200, r.status)
	var u struct {
		UUIDs []string `json:"uuids"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.body), &u))
	require.Len(t, u.UUIDs, 3)
	for _, id := range u.UUIDs {
		assert.Equal(t, byte('7'), id[14], "version 7: %s", id)
	}
}

// TestMetrics: /metrics counts requests by route and code and shows the
// chunk fetches and the node leases.
func TestMetrics(t *testing.T) {
	s := start(t, testOptions(nil), nil)
	s.create(t, `{"name":"m"}`)
	s.ids(t, "/v1/sequences/m/next")
	s.do(t, "POST", "/v1/sequences/m/next?count=0", nil)
	r := s.do(t, "GET", "/metrics", nil)
	require.Equal(t, 200, r.status)
	for _, w := range []string{
		`cqlseq_service_requests_total{code="200",route="sequence_next"} 1`,
		`cqlseq_service_requests_total{code="400",route="sequence_next"} 1`,
		`cqlseq_service_requests_total{code="201",route="sequence_create"} 1`,
		`cqlseq_service_request_duration_seconds_bucket{route="sequence_next",le="+Inf"} 2`,
		`cqlseq_service_chunk_fetches_total{sequence="m"}`,
		`cqlseq_service_chunk_waits_total{sequence="m"}`,
		`cqlseq_service_node_lease_held{layout="53"} 1`,
		`cqlseq_service_node_lease_held{layout="63"} 1`,
		`cqlseq_service_store_up 1`,
		`cqlseq_service_ready 1`,
	} {
		assert.Contains(t, r.body, w)
	}
	assert.Equal(t, 200, s.do(t, "GET", "/healthz", nil).status)
}

// TestNextCountInBody: the next routes take count from a JSON body
// {"count": N} as from the query; an empty body is count 1; both given
// must agree (else 400 bad_request naming both); a bad count in the body is
// invalid_count, a body that is not JSON or has another field bad_request;
// no refused request takes an ID.
func TestNextCountInBody(t *testing.T) {
	s := start(t, testOptions(nil), nil)
	s.create(t, `{"name":"b","chunk_size":100}`)
	next := func(path, body string) response {
		var b []byte
		if body != "" {
			b = []byte(body)
		}
		return s.do(t, "POST", path, b)
	}
	ids := func(r response) []int64 {
		t.Helper()
		require.Equal(t, 200, r.status, r.body)
		var b struct {
			IDs []int64 `json:"ids"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.body), &b))
		return b.IDs
	}
	assert.Equal(t, []int64{1, 2, 3, 4, 5}, ids(next("/v1/sequences/b/next", `{"count":5}`)), "count from the body")
	assert.Equal(t, []int64{6, 7}, ids(next("/v1/sequences/b/next?count=2", "")), "count from the query")
	assert.Equal(t, []int64{8}, ids(next("/v1/sequences/b/next", "")), "no body, no query: 1")
	assert.Equal(t, []int64{9}, ids(next("/v1/sequences/b/next", " \n")), "a blank body: 1")
	assert.Equal(t, []int64{10}, ids(next("/v1/sequences/b/next", `{}`)), "no count in the body: 1")
	assert.Equal(t, []int64{11}, ids(next("/v1/sequences/b/next", `{"count":null}`)), "a null count: 1")
	assert.Equal(t, []int64{12, 13, 14}, ids(next("/v1/sequences/b/next?count=3", `{"count":3}`)), "the same in both")
	chunked, err := http.NewRequest("POST", s.url+"/v1/sequences/b/next", io.MultiReader(strings.NewReader(`{"count":2}`)))
	require.NoError(t, err)
	res, err := s.client.Do(chunked) // a body of unknown length: sent chunked
	require.NoError(t, err)
	b, err := io.ReadAll(res.Body)
	require.NoError(t, errors.Join(err, res.Body.Close()))
	assert.Equal(t, []int64{15, 16}, ids(response{status: res.StatusCode, body: string(b)}), "a chunked body")
	assert.Len(t, ids(next("/v1/timeshard/53/next", `{"count":4}`)), 4, "timeshard, count from the body")
	r := next("/v1/uuids", `{"count":3}`)
	require.Equal(t, 200, r.status, r.body)
	var u struct {
		UUIDs []string `json:"uuids"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.body), &u))
	assert.Len(t, u.UUIDs, 3, "uuids, count from the body")

	for _, c := range []struct {
		path, body string
		wcode      string
		wmsg       []string
	}{
		{"/v1/sequences/b/next?count=2", `{"count":5}`, "bad_request", []string{"2", "5", "query", "body"}},
		{"/v1/timeshard/63/next?count=1", `{"count":2}`, "bad_request", []string{"query", "body"}},
		{"/v1/uuids?count=7", `{"count":1}`, "bad_request", []string{"query", "body"}},
		{"/v1/sequences/b/next", `{"count":5,"typo":1}`, "bad_request", []string{"typo"}},
		{"/v1/sequences/b/next", `{"cnt":5}`, "bad_request", []string{"cnt"}},
		{"/v1/sequences/b/next", `{"count":5`, "bad_request", nil},
		{"/v1/sequences/b/next", `count=5`, "bad_request", nil},
		{"/v1/sequences/b/next", `{"count":5} {}`, "bad_request", nil},
		{"/v1/sequences/b/next", `[5]`, "bad_request", nil},
		{"/v1/sequences/b/next", `{"count":0}`, "invalid_count", []string{`"0"`}},
		{"/v1/sequences/b/next", `{"count":-1}`, "invalid_count", nil},
		{"/v1/sequences/b/next", `{"count":10001}`, "invalid_count", nil},
		{"/v1/sequences/b/next", `{"count":1.5}`, "invalid_count", nil},
		{"/v1/sequences/b/next", `{"count":5e0}`, "invalid_count", nil},
		{"/v1/sequences/b/next", `{"count":"5"}`, "invalid_count", nil},
		{"/v1/sequences/b/next", `{"count":true}`, "invalid_count", nil},
		{"/v1/sequences/b/next", `{"count":99999999999999999999}`, "invalid_count", nil},
		{"/v1/sequences/b/next?count=0", `{"count":5}`, "invalid_count", nil},
		{"/v1/timeshard/53/next", `{"count":0}`, "invalid_count", nil},
		{"/v1/uuids", `{"count":10001}`, "invalid_count", nil},
	} {
		r := next(c.path, c.body)
		if !assert.Equal(t, 400, r.status, "%s %s: %s", c.path, c.body, r.body) {
			continue
		}
		assert.Equal(t, "application/json", r.header.Get("Content-Type"))
		e := r.err(t)
		assert.Equal(t, c.wcode, e.Code, "%s %s: %s", c.path, c.body, e.Message)
		for _, w := range c.wmsg {
			assert.Contains(t, e.Message, w, "%s %s", c.path, c.body)
		}
	}
	assert.Equal(t, []int64{17}, s.ids(t, "/v1/sequences/b/next"), "no refused request took an ID")
}

// TestCreateRefusesDotNames: a name of dots only ("." and "..", which URL
// normalisers remove from a path, and "...") is refused at creation, over
// HTTP and gRPC, as invalid_name with a message saying why, and creates
// nothing; names with dots and other bytes are fine.
func TestCreateRefusesDotNames(t *testing.T) {
	s := start(t, testOptions(nil), nil)
	c := grpcClient(t, s, nil)
	for _, name := range []string{".", "..", "...", strings.Repeat(".", idservice.MaxNameLen)} {
		r := s.do(t, "POST", "/v1/sequences", []byte(`{"name":"`+name+`"}`))
		if assert.Equal(t, 400, r.status, "HTTP create %q: %s", name, r.body) {
			e := r.err(t)
			assert.Equal(t, "invalid_name", e.Code, "HTTP create %q", name)
			assert.Contains(t, e.Message, "dots", "HTTP create %q", name)
		}
		_, err := c.CreateSequence(t.Context(), req(&v1.CreateSequenceRequest{Name: name}, ""))
		requireCode(t, err, connect.CodeInvalidArgument, "invalid_name")
		_, err = c.GetSequence(t.Context(), req(&v1.GetSequenceRequest{Name: name}, ""))
		requireCode(t, err, connect.CodeNotFound, "unknown_sequence")
	}
	for _, name := range []string{".a", "a.", "..a", "a..b", "._", "-.."} {
		r := s.do(t, "POST", "/v1/sequences", []byte(`{"name":"`+name+`"}`))
		assert.Equal(t, 201, r.status, "HTTP create %q: %s", name, r.body)
	}
	r := s.do(t, "GET", "/api/segment/get/..a", nil)
	assert.Equal(t, "1", r.body, "a name with dots and more is reachable on the Leaf path")
}

// TestCreateRefusesZeroStepAndChunk: over HTTP an explicit "step" or
// "chunk_size" below 1 (0 included) is invalid_definition naming the
// field, and creates nothing; omitted (or null) takes the default. Over
// gRPC, whose step and chunk_size are proto3 scalars without presence, 0
// is the default (as the .proto says) and a negative value is refused.
func TestCreateRefusesZeroStepAndChunk(t *testing.T) {
	s := start(t, testOptions(nil), nil)
	for _, c := range []struct {
		body string
		want []string
	}{
		{`{"name":"z","step":0}`, []string{"step 0"}},
		{`{"name":"z","chunk_size":0}`, []string{"chunk_size 0"}},
		{`{"name":"z","step":0,"chunk_size":0}`, []string{"step 0", "chunk_size 0"}},
		{`{"name":"z","step":-1}`, []string{"step -1"}},
		{`{"name":"z","step":1,"chunk_size":-5}`, []string{"chunk_size -5"}},
	} {
		r := s.do(t, "POST", "/v1/sequences", []byte(c.body))
		if !assert.Equal(t, 400, r.status, "%s: %s", c.body, r.body) {
			continue
		}
		e := r.err(t)
		assert.Equal(t, "invalid_definition", e.Code, c.body)
		for _, w := range c.want {
			assert.Contains(t, e.Message, w, c.body)
		}
	}
	assert.Equal(t, 404, s.do(t, "GET", "/v1/sequences/z", nil).status, "none created")

	r := s.do(t, "POST", "/v1/sequences", []byte(`{"name":"z","step":null,"chunk_size":null}`))
	require.Equal(t, 201, r.status, r.body)
	assert.JSONEq(t, `{"name":"z","type":"bigint","start":1,"step":1,"chunk_size":1000000000,"max_value":9223372036854775807,"capacity":9223372036854775807,"adaptive":false,"retired":false}`, r.body, "null: the defaults")

	c := grpcClient(t, s, nil)
	cr, err := c.CreateSequence(t.Context(), req(&v1.CreateSequenceRequest{Name: "g", Step: 0, ChunkSize: 0}, ""))
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 1_000_000_000}, []int64{cr.Msg.GetSequence().GetStep(), cr.Msg.GetSequence().GetChunkSize()}, "gRPC: 0 is the default")
	_, err = c.CreateSequence(t.Context(), req(&v1.CreateSequenceRequest{Name: "g2", ChunkSize: -1}, ""))
	requireCode(t, err, connect.CodeInvalidArgument, "invalid_definition")
}
