package idservice_test

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/idservice"
	v1 "github.com/cqlseq/cqlseq/idservice/gen/idservicev1"
	"github.com/cqlseq/cqlseq/idservice/gen/idservicev1/idservicev1connect"
	"github.com/cqlseq/cqlseq/storage/faulty"
)

// grpcClient is a gRPC client (connect.WithGRPC) of s: over h2c with prior
// knowledge for an http:// server, over TLS trusting tlsConf's roots for an
// https:// one. Its idle connections are closed when the test ends.
func grpcClient(t *testing.T, s *server, tlsConf *tls.Config) idservicev1connect.IDServiceClient {
	t.Helper()
	var p http.Protocols
	tr := &http.Transport{Protocols: &p}
	if tlsConf != nil {
		p.SetHTTP2(true)
		tr.TLSClientConfig = tlsConf
	} else {
		p.SetUnencryptedHTTP2(true)
	}
	t.Cleanup(tr.CloseIdleConnections)
	return idservicev1connect.NewIDServiceClient(&http.Client{Transport: tr, Timeout: 10 * time.Second}, s.url, connect.WithGRPC())
}

// req is m with token as its bearer token (none when empty).
func req[T any](m *T, token string) *connect.Request[T] {
	r := connect.NewRequest(m)
	if token != "" {
		r.Header().Set("Authorization", "Bearer "+token)
	}
	return r
}

func n32(n int32) *int32 { return &n }

func i64(n int64) *int64 { return &n }

// requireCode checks that err is a gRPC status of code whose message
// starts with the stable code and which carries it in an ErrorDetail.
func requireCode(t *testing.T, err error, code connect.Code, stable string) {
	t.Helper()
	require.Error(t, err)
	var ce *connect.Error
	require.True(t, errors.As(err, &ce), "%T %v", err, err)
	require.Equal(t, code, ce.Code(), "%v", err)
	assert.True(t, strings.HasPrefix(ce.Message(), stable+": "), "message %q: want the prefix %q", ce.Message(), stable+": ")
	var got []string
	for _, d := range ce.Details() {
		v, err := d.Value()
		require.NoError(t, err)
		if ed, ok := v.(*v1.ErrorDetail); ok {
			got = append(got, ed.GetCode())
		}
	}
	assert.Equal(t, []string{stable}, got, "ErrorDetail codes of %v", err)
}

// TestGRPCMethods calls every method over gRPC (h2c) with the tokens'
// scopes and checks the answers against the HTTP API's.
func TestGRPCMethods(t *testing.T) {
	o := testOptions(nil)
	o.Tokens = tokens(t)
	s := start(t, o, nil)
	s.token = issueToken
	c := grpcClient(t, s, nil)
	ctx := t.Context()

	cr, err := c.CreateSequence(ctx, req(&v1.CreateSequenceRequest{Name: "orders", Type: "integer", Start: i64(10), Step: 5, ChunkSize: 100}, adminToken))
	require.NoError(t, err)
	assert.True(t, cr.Msg.GetCreated())
	def := cr.Msg.GetSequence()
	assert.Equal(t, "orders", def.GetName())
	assert.Equal(t, "integer", def.GetType())
	assert.Equal(t, []int64{10, 5, 100, 2147483647}, []int64{def.GetStart(), def.GetStep(), def.GetChunkSize(), def.GetMaxValue()})
	assert.Nil(t, def.Allocated, "no state in the create answer")
	cr, err = c.CreateSequence(ctx, req(&v1.CreateSequenceRequest{Name: "orders", Type: "integer", Start: i64(10), Step: 5, ChunkSize: 100}, adminToken))
	require.NoError(t, err)
	assert.False(t, cr.Msg.GetCreated(), "the same definition again")
	_, err = c.CreateSequence(ctx, req(&v1.CreateSequenceRequest{Name: "orders", Type: "integer", ChunkSize: 100}, adminToken))
	requireCode(t, err, connect.CodeAlreadyExists, "definition_mismatch")

	nr, err := c.NextSequence(ctx, req(&v1.NextSequenceRequest{Name: "orders", Count: n32(3)}, issueToken))
	require.NoError(t, err)
	assert.Equal(t, []int64{10, 15, 20}, nr.Msg.GetIds())
	nr, err = c.NextSequence(ctx, req(&v1.NextSequenceRequest{Name: "orders"}, issueToken))
	require.NoError(t, err)
	assert.Equal(t, []int64{25}, nr.Msg.GetIds(), "no count: 1")
	assert.Equal(t, []int64{30}, s.ids(t, "/v1/sequences/orders/next"), "HTTP continues the same sequence")

	gr, err := c.GetSequence(ctx, req(&v1.GetSequenceRequest{Name: "orders"}, issueToken))
	require.NoError(t, err)
	q := gr.Msg.GetSequence()
	var hv struct {
		Allocated   uint64 `json:"allocated"`
		Allocations uint64 `json:"allocations"`
		NextChunk   int64  `json:"next_chunk_first"`
		LastAlloc   string `json:"last_alloc"`
		Instance    struct {
			Issued uint64 `json:"issued"`
			Held   uint64 `json:"held"`
		} `json:"instance"`
	}
	r := s.do(t, "GET", "/v1/sequences/orders", nil)
	require.Equal(t, 200, r.status, r.body)
	require.NoError(t, jsonUnmarshal(r.body, &hv))
	assert.Equal(t, hv.Allocated, q.GetAllocated())
	assert.Equal(t, hv.Allocations, q.GetAllocations())
	assert.Equal(t, hv.NextChunk, q.GetNextChunkFirst())
	assert.False(t, q.GetExhausted())
	require.NotNil(t, q.Exhausted)
	assert.Equal(t, hv.LastAlloc, q.GetLastAlloc().AsTime().Format(time.RFC3339Nano))
	assert.Equal(t, uint64(5), q.GetInstance().GetIssued())
	assert.Equal(t, hv.Instance.Held, q.GetInstance().GetHeld())

	lr, err := c.ListLayouts(ctx, req(&v1.ListLayoutsRequest{}, issueToken))
	require.NoError(t, err)
	var hl struct {
		Layouts []struct {
			Name          string    `json:"name"`
			Bits          uint32    `json:"bits"`
			Epoch         time.Time `json:"epoch"`
			RunsOut       time.Time `json:"runs_out"`
			LifetimeYears float64   `json:"lifetime_years"`
			MaxID         int64     `json:"max_id"`
			Node          *uint32   `json:"node"`
		} `json:"layouts"`
	}
	r = s.do(t, "GET", "/v1/timeshard", nil)
	require.Equal(t, 200, r.status, r.body)
	require.NoError(t, jsonUnmarshal(r.body, &hl))
	require.Len(t, lr.Msg.GetLayouts(), len(hl.Layouts))
	for i, l := range lr.Msg.GetLayouts() {
		h := hl.Layouts[i]
		assert.Equal(t, h.Name, l.GetName())
		assert.Equal(t, h.Bits, l.GetBits())
		assert.True(t, h.Epoch.Equal(l.GetEpoch().AsTime()))
		assert.True(t, h.RunsOut.Equal(l.GetRunsOut().AsTime()))
		assert.Equal(t, h.LifetimeYears, l.GetLifetimeYears())
		assert.InDelta(t, 69.7, l.GetLifetimeYears(), 0.01)
		assert.Equal(t, h.MaxID, l.GetMaxId())
		require.NotNil(t, h.Node)
		require.NotNil(t, l.Node)
		assert.Equal(t, *h.Node, l.GetNode())
	}
	assert.Equal(t, []string{"63", "53"}, []string{lr.Msg.GetLayouts()[0].GetName(), lr.Msg.GetLayouts()[1].GetName()})

	for _, layout := range []string{"63", "53"} {
		tr, err := c.NextTimeshard(ctx, req(&v1.NextTimeshardRequest{Layout: layout, Count: n32(4)}, issueToken))
		require.NoError(t, err)
		ids := tr.Msg.GetIds()
		require.Len(t, ids, 4)
		assert.True(t, slices.IsSorted(ids) && len(slices.Compact(slices.Clone(ids))) == 4, "increasing: %v", ids)
		dr, err := c.DecomposeTimeshard(ctx, req(&v1.DecomposeTimeshardRequest{Layout: layout, Id: ids[0]}, issueToken))
		require.NoError(t, err)
		var hd struct {
			Time    time.Time `json:"time"`
			Millis  int64     `json:"ms_since_epoch"`
			Node    uint32    `json:"node"`
			Counter uint64    `json:"counter"`
		}
		r := s.do(t, "GET", fmt.Sprintf("/v1/timeshard/%s/ids/%d", layout, ids[0]), nil)
		require.Equal(t, 200, r.status, r.body)
		require.NoError(t, jsonUnmarshal(r.body, &hd))
		d := dr.Msg
		assert.Equal(t, ids[0], d.GetId())
		assert.Equal(t, layout, d.GetLayout())
		assert.True(t, hd.Time.Equal(d.GetTime().AsTime()))
		assert.WithinDuration(t, time.Now(), d.GetTime().AsTime(), time.Minute)
		assert.Equal(t, hd.Millis, d.GetMsSinceEpoch())
		assert.Equal(t, hd.Node, d.GetNode())
		assert.Equal(t, hd.Counter, d.GetCounter())
		node, ok := s.svc.Node(layout)
		require.True(t, ok)
		assert.Equal(t, node, d.GetNode())
	}

	ur, err := c.NextUUIDs(ctx, req(&v1.NextUUIDsRequest{Count: n32(3)}, issueToken))
	require.NoError(t, err)
	require.Len(t, ur.Msg.GetUuids(), 3)
	for _, u := range ur.Msg.GetUuids() {
		id, err := uuid.Parse(u)
		require.NoError(t, err)
		assert.Equal(t, uuid.Version(7), id.Version())
		assert.Equal(t, id.String(), u)
	}
	ur, err = c.NextUUIDs(ctx, req(&v1.NextUUIDsRequest{}, issueToken))
	require.NoError(t, err)
	assert.Len(t, ur.Msg.GetUuids(), 1, "no count: 1")

	// The request metrics count the gRPC calls by method.
	r = s.do(t, "GET", "/metrics", nil)
	for _, want := range []string{
		`cqlseq_service_requests_total{code="200",route="grpc_sequence_create"} 2`,
		`cqlseq_service_requests_total{code="409",route="grpc_sequence_create"} 1`,
		`cqlseq_service_requests_total{code="200",route="grpc_sequence_next"} 2`,
		`cqlseq_service_requests_total{code="200",route="grpc_sequence_get"} 1`,
		`cqlseq_service_requests_total{code="200",route="grpc_layouts"} 1`,
		`cqlseq_service_requests_total{code="200",route="grpc_timeshard_next"} 2`,
		`cqlseq_service_requests_total{code="200",route="grpc_timeshard_decompose"} 2`,
		`cqlseq_service_requests_total{code="200",route="grpc_uuid_next"} 2`,
		`cqlseq_service_request_duration_seconds_count{route="grpc_sequence_next"} 2`,
		`cqlseq_service_requests_total{code="200",route="sequence_next"} 1`,
	} {
		assert.Contains(t, r.body, want)
	}
}

// TestGRPCBadInput sends every kind of bad input over gRPC and checks each
// answer's gRPC code and stable code, and that none took an ID.
func TestGRPCBadInput(t *testing.T) {
	o := testOptions(nil)
	o.Tokens = tokens(t)
	s := start(t, o, nil)
	c := grpcClient(t, s, nil)
	ctx := t.Context()
	_, err := c.CreateSequence(ctx, req(&v1.CreateSequenceRequest{Name: "orders", ChunkSize: 1000}, adminToken))
	require.NoError(t, err)
	next := func(name string, n *int32) error {
		_, err := c.NextSequence(ctx, req(&v1.NextSequenceRequest{Name: name, Count: n}, issueToken))
		return err
	}
	timeshard := func(layout string, n *int32) error {
		_, err := c.NextTimeshard(ctx, req(&v1.NextTimeshardRequest{Layout: layout, Count: n}, issueToken))
		return err
	}
	uuids := func(n *int32) error {
		_, err := c.NextUUIDs(ctx, req(&v1.NextUUIDsRequest{Count: n}, issueToken))
		return err
	}
	decompose := func(layout string, id int64) error {
		_, err := c.DecomposeTimeshard(ctx, req(&v1.DecomposeTimeshardRequest{Layout: layout, Id: id}, issueToken))
		return err
	}
	create := func(m *v1.CreateSequenceRequest, token string) error {
		_, err := c.CreateSequence(ctx, req(m, token))
		return err
	}
	get := func(name, token string) error {
		_, err := c.GetSequence(ctx, req(&v1.GetSequenceRequest{Name: name}, token))
		return err
	}
	long := strings.Repeat("a", idservice.MaxNameLen+1)
	for _, tc := range []struct {
		what   string
		err    error
		code   connect.Code
		stable string
	}{
		{"count 0", next("orders", n32(0)), connect.CodeInvalidArgument, "invalid_count"},
		{"count -1", next("orders", n32(-1)), connect.CodeInvalidArgument, "invalid_count"},
		{"count above max", next("orders", n32(idservice.MaxCount+1)), connect.CodeInvalidArgument, "invalid_count"},
		{"count min int32", next("orders", n32(-1<<31)), connect.CodeInvalidArgument, "invalid_count"},
		{"timeshard count 0", timeshard("63", n32(0)), connect.CodeInvalidArgument, "invalid_count"},
		{"timeshard count above max", timeshard("53", n32(idservice.MaxCount+1)), connect.CodeInvalidArgument, "invalid_count"},
		{"uuid count -5", uuids(n32(-5)), connect.CodeInvalidArgument, "invalid_count"},
		{"uuid count above max", uuids(n32(idservice.MaxCount + 1)), connect.CodeInvalidArgument, "invalid_count"},
		{"name too long", next(long, nil), connect.CodeInvalidArgument, "invalid_name"},
		{"name empty", next("", nil), connect.CodeInvalidArgument, "invalid_name"},
		{"name with a NUL", next("or\x00ders", nil), connect.CodeInvalidArgument, "invalid_name"},
		{"name with a space", next("or ders", nil), connect.CodeInvalidArgument, "invalid_name"},
		{"name with a slash", next("or/ders", nil), connect.CodeInvalidArgument, "invalid_name"},
		{"name not ASCII", next("\u00e9", nil), connect.CodeInvalidArgument, "invalid_name"},
		{"get: name too long", get(long, issueToken), connect.CodeInvalidArgument, "invalid_name"},
		{"unknown sequence", next("nope", nil), connect.CodeNotFound, "unknown_sequence"},
		{"get: unknown sequence", get("nope", issueToken), connect.CodeNotFound, "unknown_sequence"},
		{"unknown layout", timeshard("64", nil), connect.CodeNotFound, "unknown_layout"},
		{"unknown layout, empty", timeshard("", nil), connect.CodeNotFound, "unknown_layout"},
		{"decompose: unknown layout", decompose("32", 1), connect.CodeNotFound, "unknown_layout"},
		{"decompose: negative ID", decompose("63", -1), connect.CodeInvalidArgument, "invalid_id"},
		{"decompose: ID above the layout's", decompose("53", 1<<53), connect.CodeInvalidArgument, "invalid_id"},
		{"create: unknown type", create(&v1.CreateSequenceRequest{Name: "x", Type: "float"}, adminToken), connect.CodeInvalidArgument, "invalid_definition"},
		{"create: negative step", create(&v1.CreateSequenceRequest{Name: "x", Step: -1}, adminToken), connect.CodeInvalidArgument, "invalid_definition"},
		{"create: start outside the type", create(&v1.CreateSequenceRequest{Name: "x", Type: "smallint", Start: i64(1 << 20)}, adminToken), connect.CodeInvalidArgument, "invalid_definition"},
		{"create: bad name", create(&v1.CreateSequenceRequest{Name: "a b"}, adminToken), connect.CodeInvalidArgument, "invalid_name"},
		{"create: issue token", create(&v1.CreateSequenceRequest{Name: "x"}, issueToken), connect.CodePermissionDenied, "forbidden"},
		{"create: no token", create(&v1.CreateSequenceRequest{Name: "x"}, ""), connect.CodeUnauthenticated, "unauthenticated"},
		{"no token", get("orders", ""), connect.CodeUnauthenticated, "unauthenticated"},
		{"unknown token", get("orders", "not-a-known-token-0123"), connect.CodeUnauthenticated, "unauthenticated"},
	} {
		t.Run(tc.what, func(t *testing.T) { requireCode(t, tc.err, tc.code, tc.stable) })
	}
	// Basic rather than Bearer is no token.
	r := connect.NewRequest(&v1.ListLayoutsRequest{})
	r.Header().Set("Authorization", "Basic "+issueToken)
	_, err = c.ListLayouts(ctx, r)
	requireCode(t, err, connect.CodeUnauthenticated, "unauthenticated")

	// None took a value: the next one is the first.
	nr, err := c.NextSequence(ctx, req(&v1.NextSequenceRequest{Name: "orders"}, issueToken))
	require.NoError(t, err)
	assert.Equal(t, []int64{1}, nr.Msg.GetIds())
	// Nor created a sequence.
	requireCode(t, get("x", issueToken), connect.CodeNotFound, "unknown_sequence")

	// The refusals are counted under their HTTP status.
	m := s.do(t, "GET", "/metrics", nil)
	for _, want := range []string{
		`cqlseq_service_requests_total{code="400",route="grpc_sequence_next"} 10`,
		`cqlseq_service_requests_total{code="404",route="grpc_sequence_next"} 1`,
		`cqlseq_service_requests_total{code="403",route="grpc_sequence_create"} 1`,
		`cqlseq_service_requests_total{code="401",route="grpc_sequence_get"} 2`,
	} {
		assert.Contains(t, m.body, want)
	}
}

// TestGRPCExhaustedAndUnavailable: an exhausted sequence is
// RESOURCE_EXHAUSTED, an unreachable store UNAVAILABLE.
func TestGRPCExhaustedAndUnavailable(t *testing.T) {
	st := newFaulty(t)
	o := testOptions(st)
	o.RequestTimeout = 300 * time.Millisecond
	s := start(t, o, nil)
	c := grpcClient(t, s, nil)
	ctx := t.Context()
	_, err := c.CreateSequence(ctx, req(&v1.CreateSequenceRequest{Name: "tiny", Type: "smallint", Start: i64(32766), ChunkSize: 2}, ""))
	require.NoError(t, err)
	nr, err := c.NextSequence(ctx, req(&v1.NextSequenceRequest{Name: "tiny", Count: n32(2)}, ""))
	require.NoError(t, err)
	assert.Equal(t, []int64{32766, 32767}, nr.Msg.GetIds())
	_, err = c.NextSequence(ctx, req(&v1.NextSequenceRequest{Name: "tiny"}, ""))
	requireCode(t, err, connect.CodeResourceExhausted, "sequence_exhausted")

	require.NoError(t, st.SetRules(faulty.Rule{Action: faulty.Fail}))
	_, err = c.GetSequence(ctx, req(&v1.GetSequenceRequest{Name: "tiny"}, ""))
	requireCode(t, err, connect.CodeUnavailable, "unavailable")
	_, err = c.NextSequence(ctx, req(&v1.NextSequenceRequest{Name: "other"}, ""))
	requireCode(t, err, connect.CodeUnavailable, "unavailable")
	st.Clear()
}

// TestGRPCUniqueMixed: goroutines taking values of one sequence and IDs
// of one layout, half over HTTP/1.1 and half over gRPC, get no value
// twice.
func TestGRPCUniqueMixed(t *testing.T) {
	s := start(t, testOptions(nil), nil)
	s.create(t, `{"name":"mixed","chunk_size":50}`)
	c := grpcClient(t, s, nil)
	const workers, calls, batch = 8, 40, 7
	var (
		mu   sync.Mutex
		seqs = map[int64]int{}
		ts   = map[int64]int{}
		errs []error
	)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range calls {
				var got, tids []int64
				var err error
				if w%2 == 0 {
					got, err = httpIDs(s, fmt.Sprintf("/v1/sequences/mixed/next?count=%d", batch))
					if err == nil {
						tids, err = httpIDs(s, "/v1/timeshard/53/next?count=3")
					}
				} else {
					var nr *connect.Response[v1.NextSequenceResponse]
					nr, err = c.NextSequence(t.Context(), req(&v1.NextSequenceRequest{Name: "mixed", Count: n32(batch)}, ""))
					if err == nil {
						got = nr.Msg.GetIds()
						var tr *connect.Response[v1.NextTimeshardResponse]
						tr, err = c.NextTimeshard(t.Context(), req(&v1.NextTimeshardRequest{Layout: "53", Count: n32(3)}, ""))
						if err == nil {
							tids = tr.Msg.GetIds()
						}
					}
				}
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("worker %d call %d: %w", w, i, err))
				}
				for _, id := range got {
					seqs[id]++
				}
				for _, id := range tids {
					ts[id]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	require.Len(t, seqs, workers*calls*batch, "values handed out twice")
	require.Len(t, ts, workers*calls*3, "timeshard IDs handed out twice")
}

// httpIDs takes IDs from an HTTP next route (without testing.T: called
// from goroutines).
func httpIDs(s *server, path string) ([]int64, error) {
	r, err := s.try("POST", path, nil, s.token)
	if err != nil {
		return nil, err
	}
	if r.status != http.StatusOK {
		return nil, fmt.Errorf("%s: HTTP %d %s", path, r.status, r.body)
	}
	var b struct {
		IDs []int64 `json:"ids"`
	}
	return b.IDs, jsonUnmarshal(r.body, &b)
}

// TestGRPCOverTLS: over TLS the gRPC client negotiates HTTP/2 by ALPN and
// gets IDs; an HTTP/1.1 client of the same listener still gets its
// answers.
func TestGRPCOverTLS(t *testing.T) {
	cert, pool := selfSigned(t)
	s := start(t, testOptions(nil), &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	require.True(t, strings.HasPrefix(s.url, "https://"))
	c := grpcClient(t, s, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	tr, err := c.NextTimeshard(t.Context(), req(&v1.NextTimeshardRequest{Layout: "63", Count: n32(5)}, ""))
	require.NoError(t, err)
	assert.Len(t, tr.Msg.GetIds(), 5)
	_, err = c.NextTimeshard(t.Context(), req(&v1.NextTimeshardRequest{Layout: "63", Count: n32(0)}, ""))
	requireCode(t, err, connect.CodeInvalidArgument, "invalid_count")

	s.client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	res, err := s.client.Get(s.url + "/healthz")
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	assert.Equal(t, 200, res.StatusCode)
	assert.Equal(t, 1, res.ProtoMajor, "HTTP/1.1 by default")
}

// TestGRPCPlainNeedsNoTLS: without TLS, an HTTP/1.1 client and a gRPC
// client (h2c, prior knowledge) share the listener, and the Connect
// protocol over HTTP/1.1 works too.
func TestGRPCPlainNeedsNoTLS(t *testing.T) {
	s := start(t, testOptions(nil), nil)
	c := grpcClient(t, s, nil)
	_, err := c.ListLayouts(t.Context(), req(&v1.ListLayoutsRequest{}, ""))
	require.NoError(t, err)
	cc := idservicev1connect.NewIDServiceClient(s.client, s.url) // Connect protocol, HTTP/1.1
	ur, err := cc.NextUUIDs(t.Context(), req(&v1.NextUUIDsRequest{Count: n32(2)}, ""))
	require.NoError(t, err)
	assert.Len(t, ur.Msg.GetUuids(), 2)
	r := s.do(t, "GET", "/healthz", nil)
	assert.Equal(t, 200, r.status)
}

// TestGRPCUnknownMethod: a method the service does not have, under its
// path prefix, is answered as every unknown route is: 404 with the API's
// JSON not_found error, counted in the request metrics under the one route
// label grpc_not_found (never the path); a gRPC client sees it as
// UNIMPLEMENTED, a Connect client as NOT_FOUND.
func TestGRPCUnknownMethod(t *testing.T) {
	o := testOptions(nil)
	o.Tokens = tokens(t)
	s := start(t, o, nil)
	prefix := "/" + idservicev1connect.IDServiceName + "/"
	for _, c := range []struct{ method, path, ctype string }{
		{"POST", prefix + "NoSuchMethod", "application/json"},
		{"POST", prefix + "NoSuchMethod", "application/grpc"},
		{"GET", prefix + "nextsequence", ""},
		{"POST", prefix, "application/proto"},
		{"POST", prefix + "NextSequence/extra", "application/json"},
	} {
		hr, err := http.NewRequest(c.method, s.url+c.path, strings.NewReader("{}"))
		require.NoError(t, err)
		if c.ctype != "" {
			hr.Header.Set("Content-Type", c.ctype)
		}
		res, err := s.client.Do(hr)
		require.NoError(t, err)
		b, err := io.ReadAll(res.Body)
		require.NoError(t, errors.Join(err, res.Body.Close()))
		r := response{status: res.StatusCode, header: res.Header, body: string(b)}
		if !assert.Equal(t, http.StatusNotFound, r.status, "%s %s: %s", c.method, c.path, r.body) {
			continue
		}
		assert.Equal(t, "application/json", r.header.Get("Content-Type"), "%s %s", c.method, c.path)
		e := r.err(t)
		assert.Equal(t, "not_found", e.Code, "%s %s", c.method, c.path)
		assert.Contains(t, e.Message, c.path, "%s %s", c.method, c.path)
	}

	// Generated clients of a newer .proto calling a method this server lacks.
	gc := connect.NewClient[v1.ListLayoutsRequest, v1.ListLayoutsResponse](grpcHTTPClient(t), s.url+prefix+"NoSuchMethod", connect.WithGRPC())
	_, err := gc.CallUnary(t.Context(), req(&v1.ListLayoutsRequest{}, issueToken))
	var ce *connect.Error
	require.True(t, errors.As(err, &ce), "%T %v", err, err)
	assert.Equal(t, connect.CodeUnimplemented, ce.Code(), "gRPC: %v", err)
	cc := connect.NewClient[v1.ListLayoutsRequest, v1.ListLayoutsResponse](s.client, s.url+prefix+"NoSuchMethod")
	_, err = cc.CallUnary(t.Context(), req(&v1.ListLayoutsRequest{}, issueToken))
	require.True(t, errors.As(err, &ce), "%T %v", err, err)
	assert.Equal(t, connect.CodeNotFound, ce.Code(), "Connect: %v", err)
	assert.Contains(t, ce.Message(), "NoSuchMethod")

	m := s.do(t, "GET", "/metrics", nil)
	assert.Contains(t, m.body, `cqlseq_service_requests_total{code="404",route="grpc_not_found"} 7`)
	assert.Contains(t, m.body, `cqlseq_service_request_duration_seconds_count{route="grpc_not_found"} 7`)
	assert.NotContains(t, m.body, "NoSuchMethod", "no path in a label")
}

// grpcHTTPClient is an HTTP client speaking h2c with prior knowledge, as
// grpcClient's; its idle connections are closed when the test ends.
func grpcHTTPClient(t *testing.T) *http.Client {
	t.Helper()
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}
