package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// svcRun is a clean run of two instances: galloc batches and Leaf segment
// answers of one sequence (chunks of 10: instance 1 holds 1-10 and 21-30,
// instance 2 11-20), timeshard IDs of both layouts and Leaf snowflakes.
func svcRun(t0 time.Time) []svcResult {
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	const base = "http://127.0.0.1:1"
	ok := func(inst int, s float64, method, path, body string) svcResult {
		return svcResult{Instance: inst, Code: 200, Timestamp: at(s), Latency: int64(time.Millisecond), Method: method, URL: base + path, Body: []byte(body)}
	}
	return []svcResult{
		ok(1, 0, "POST", "/v1/sequences/a/next?count=3", `{"ids":[1,2,3]}`),
		ok(2, 0, "POST", "/v1/sequences/a/next", `{"ids":[11]}`),
		ok(1, 1, "GET", "/api/segment/get/a", `4`),
		ok(2, 1, "POST", "/v1/sequences/a/next?count=9", `{"ids":[12,13,14,15,16,17,18,19,20]}`),
		ok(1, 2, "POST", "/v1/sequences/a/next?count=6", `{"ids":[5,6,7,8,9,10]}`),
		ok(1, 2, "POST", "/v1/sequences/a/next?count=2", `{"ids":[21,22]}`),
		ok(1, 3, "POST", "/v1/timeshard/63/next?count=2", `{"ids":[1000,1001]}`),
		ok(2, 3, "POST", "/v1/timeshard/63/next", `{"ids":[2000]}`),
		ok(2, 4, "GET", "/api/snowflake/get/a", `2001`),
		ok(1, 4, "POST", "/v1/timeshard/53/next?count=2", `{"ids":[1000,1001]}`), // another layout: another set
	}
}

var svcCfg = svcCheckConfig{Sequences: []string{"a"}, ChunkSize: 10, Starts: 2, InstanceGrace: time.Second, NodeGrace: 5 * time.Second}

func TestCheckServiceClean(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	r := checkService(svcRun(t0), nil, svcCfg)
	if p := r.Problems(); len(p) > 0 {
		t.Fatalf("problems in a clean run: %v (%v)", p, r.Examples)
	}
	if r.Requests != 10 || r.OK != 10 || r.IDs != 28 {
		t.Fatalf("requests %d, 2xx %d, IDs %d: want 10, 10, 28", r.Requests, r.OK, r.IDs)
	}
	if r.PerSet["galloc/a"] != 22 || r.PerSet["timeshard/63"] != 4 || r.PerSet["timeshard/53"] != 2 {
		t.Fatalf("per set %v", r.PerSet)
	}
	w := r.Waste["galloc/a"]
	if w.Handed != 22 || w.Min != 1 || w.Max != 22 || w.Waste != 0 || w.Bound != 40 {
		t.Fatalf("waste %+v", *w)
	}
}

func TestCheckServiceDuplicate(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct{ name, path, body string }{
		{"galloc", "/v1/sequences/a/next", `{"ids":[11]}`},
		{"leaf segment", "/api/segment/get/a", `12`},
		{"timeshard", "/v1/timeshard/63/next", `{"ids":[1001]}`},
		{"leaf snowflake", "/api/snowflake/get/x", `2000`},
	} {
		res := append(svcRun(t0), svcResult{Instance: 3, Code: 200, Timestamp: t0.Add(5 * time.Second), Method: map[bool]string{true: "GET", false: "POST"}[strings.HasPrefix(c.path, "/api")],
			URL: "http://127.0.0.1:3" + c.path, Body: []byte(c.body)})
		r := checkService(res, nil, svcCfg)
		if r.Duplicates != 1 || len(r.Problems()) != 1 || !strings.Contains(r.Problems()[0], "twice") {
			t.Errorf("%s: duplicates %d, problems %v: want 1 duplicate", c.name, r.Duplicates, r.Problems())
		}
	}
}

func TestCheckServiceErrorsAccounted(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	faults := []svcFault{
		{Kind: faultInstanceKill, Instance: 2, Began: t0.Add(10 * time.Second), Ended: t0.Add(12 * time.Second)},
		{Kind: faultNodePause, Node: 3, Began: t0.Add(20 * time.Second), Ended: t0.Add(30 * time.Second)},
	}
	leaf503 := []byte(`{"timestamp":"x","status":500,"error":"Internal Server Error","message":"Result{id=-3, status=EXCEPTION}","path":"/api/segment/get/a","code":"unavailable"}`)
	bad := func(inst int, s float64, code int, e string, body []byte, path string) svcResult {
		return svcResult{Instance: inst, Code: code, Error: e, Body: body, Timestamp: t0.Add(time.Duration(s * float64(time.Second))),
			Latency: int64(time.Millisecond), Method: "POST", URL: "http://127.0.0.1:2" + path}
	}
	refused := `Post "http://127.0.0.1:2/v1/sequences/a/next": dial tcp 0.0.0.0:0->127.0.0.1:2: connect: connection refused`
	explained := []svcResult{
		bad(2, 10.5, 0, refused, nil, "/v1/sequences/a/next"),
		bad(2, 12.5, 0, refused, nil, "/v1/sequences/a/next"), // within the grace
		bad(2, 10.0, 0, `Post "x": EOF`, nil, "/v1/sequences/a/next?count=5"),
		bad(1, 25, 503, "503 Service Unavailable", []byte(`{"code":"no_node_lease","message":"m"}`), "/v1/timeshard/53/next"),
		{Instance: 3, Code: 500, Body: leaf503, Timestamp: t0.Add(33 * time.Second), Method: "GET", URL: "http://127.0.0.1:3/api/segment/get/a"},
	}
	r := checkService(append(svcRun(t0), explained...), faults, svcCfg)
	if p := r.Problems(); len(p) > 0 {
		t.Fatalf("problems: %v (%v)", p, r.Examples)
	}
	want := map[string]int{"instance SIGKILL / refused": 2, "instance SIGKILL / eof": 1, "node SIGSTOP / 503 no_node_lease": 1, "node SIGSTOP / 500 leaf unavailable": 1}
	if fmtCounts(r.Explained) != fmtCounts(want) {
		t.Fatalf("explained %s, want %s", fmtCounts(r.Explained), fmtCounts(want))
	}
	// The EOF'd batch of 5 may have taken its values: the bound grows.
	if w := r.Waste["galloc/a"]; w.Unanswered != 5 || w.Bound != 45 {
		t.Fatalf("waste %+v: want 5 unanswered, bound 45", *w)
	}

	for _, c := range []struct {
		name string
		res  svcResult
		want string
	}{
		{"5xx outside every window", bad(1, 5, 503, "", []byte(`{"code":"unavailable","message":"m"}`), "/v1/sequences/a/next"), "503 unavailable"},
		{"500 internal during a node fault", bad(1, 22, 500, "", []byte(`{"code":"internal","message":"m"}`), "/v1/sequences/a/next"), "500 internal"},
		{"refused on another instance than the killed one", bad(1, 11, 0, refused, nil, "/v1/sequences/a/next"), "refused"},
		{"refused during a node fault", bad(1, 21, 0, refused, nil, "/v1/sequences/a/next"), "refused"},
		{"refused after the grace", bad(2, 13.5, 0, refused, nil, "/v1/sequences/a/next"), "refused"},
		{"409 during the instance's own kill", bad(2, 11, 409, "", []byte(`{"code":"sequence_exhausted","message":"m"}`), "/v1/sequences/a/next"), "409 sequence_exhausted"},
	} {
		r := checkService(append(svcRun(t0), c.res), faults, svcCfg)
		if r.Unexplained[c.want] != 1 || len(r.Problems()) != 1 {
			t.Errorf("%s: unexplained %v, problems %v: want 1 %q", c.name, r.Unexplained, r.Problems(), c.want)
		}
	}
}

func TestCheckServiceWaste(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	cfg := svcCfg
	cfg.Starts = 1 // bound: 2 chunks of 10
	res := append(svcRun(t0), svcResult{Instance: 1, Code: 200, Timestamp: t0.Add(5 * time.Second), Method: "POST",
		URL: "http://127.0.0.1:1/v1/sequences/a/next", Body: []byte(`{"ids":[44]}`)})
	r := checkService(res, nil, cfg)
	// Values 1..44, 23 handed out: 21 wasted, above 2 chunks of 10.
	if w := r.Waste["galloc/a"]; w.Waste != 21 || w.Bound != 20 {
		t.Fatalf("waste %+v: want 21 wasted, bound 20", *w)
	}
	if p := r.Problems(); len(p) != 1 || !strings.Contains(p[0], "above the bound") {
		t.Fatalf("problems %v: want the waste above the bound", p)
	}
	cfg.Starts = 2
	if p := checkService(res, nil, cfg).Problems(); len(p) != 0 {
		t.Fatalf("problems %v with a bound of 40", p)
	}
}

func TestCheckServiceBadBodies(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct{ name, method, path, body string }{
		{"fewer IDs than asked", "POST", "/v1/sequences/a/next?count=3", `{"ids":[31,32]}`},
		{"not JSON", "POST", "/v1/timeshard/63/next", `ok`},
		{"leaf body not a number", "GET", "/api/snowflake/get/a", `{"ids":[5]}`},
		{"unknown route", "GET", "/v1/uuids", `{}`},
	} {
		res := append(svcRun(t0), svcResult{Instance: 1, Code: 200, Timestamp: t0, Method: c.method, URL: "http://127.0.0.1:1" + c.path, Body: []byte(c.body)})
		if r := checkService(res, nil, svcCfg); r.BadBodies != 1 || len(r.Problems()) != 1 {
			t.Errorf("%s: bad bodies %d, problems %v", c.name, r.BadBodies, r.Problems())
		}
	}
}

func TestErrorClass(t *testing.T) {
	for _, c := range []struct {
		r    svcResult
		want string
	}{
		{svcResult{Error: `Post "http://127.0.0.1:1/x": read tcp 127.0.0.1:2->127.0.0.1:1: read: connection reset by peer`}, "reset"},
		{svcResult{Error: `Post "http://127.0.0.1:1/x": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`}, "timeout"},
		{svcResult{Error: `Get "http://127.0.0.1:1/x": EOF`}, "eof"},
		{svcResult{Error: `something new`}, "transport: something new"},
		{svcResult{Code: 503, Body: []byte(`{"code":"shutting_down","message":"m"}`)}, "503 shutting_down"},
		{svcResult{Code: 502, Body: []byte(`<html>`)}, "502 ?"},
	} {
		if got := errorClass(c.r); got != c.want {
			t.Errorf("errorClass(%q, %d) = %q, want %q", c.r.Error, c.r.Code, got, c.want)
		}
	}
}

// TestCheckServiceRetired: a retired sequence's 410 (and Leaf's 500 with
// sequence_retired) are explained once the retirement was sent, and
// unexplained before it or on a sequence not retired; a 2xx of it is
// allowed until RetireGrace after the acknowledgement, and a violation
// after.
func TestCheckServiceRetired(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	cfg := svcCfg
	cfg.Retired = map[string]svcRetire{"a": {Sent: at(10), Acked: at(10.1)}}
	cfg.RetireGrace = 2 * time.Second
	gone := func(inst int, s float64, path string) svcResult {
		res := svcResult{Instance: inst, Code: 410, Timestamp: at(s), Latency: int64(time.Millisecond), Method: "POST", URL: "http://127.0.0.1:1" + path,
			Body: []byte(`{"code":"sequence_retired","message":"galloc: sequence retired"}`)}
		if strings.HasPrefix(path, "/api") {
			res.Method, res.Code = "GET", 500
			res.Body = []byte(`{"timestamp":1,"status":500,"message":"Result{id=-2, status=EXCEPTION}","code":"sequence_retired"}`)
		}
		return res
	}
	ok := func(inst int, s float64, id int) svcResult {
		return svcResult{Instance: inst, Code: 200, Timestamp: at(s), Latency: int64(time.Millisecond), Method: "POST",
			URL: "http://127.0.0.1:1/v1/sequences/a/next", Body: []byte(fmt.Sprintf(`{"ids":[%d]}`, id))}
	}
	clean := append(svcRun(t0), ok(2, 11, 23), gone(1, 10.05, "/v1/sequences/a/next"), gone(2, 12, "/api/segment/get/a"), gone(1, 30, "/v1/sequences/a/next"))
	r := checkService(clean, nil, cfg)
	if p := r.Problems(); len(p) > 0 {
		t.Fatalf("problems: %v (%v)", p, r.Examples)
	}
	if r.Explained["retire / 410 sequence_retired"] != 2 || r.Explained["retire / 500 leaf sequence_retired"] != 1 {
		t.Fatalf("explained %v", r.Explained)
	}
	for _, c := range []struct {
		name string
		res  svcResult
		want string
	}{
		{"410 before the retirement", gone(1, 9, "/v1/sequences/a/next"), "no fault explains"},
		{"410 of another sequence", gone(1, 20, "/v1/sequences/b/next"), "no fault explains"},
		{"2xx after the grace", ok(2, 12.2, 24), "after its retirement"},
	} {
		r := checkService(append(svcRun(t0), c.res), nil, cfg)
		if p := r.Problems(); len(p) != 1 || !strings.Contains(p[0], c.want) {
			t.Errorf("%s: problems %v, want one containing %q", c.name, p, c.want)
		}
	}
}

// TestCheckServiceMaxChunk: the waste bound of a sequence whose chunks
// grew (altered, adaptive) is two of its largest chunks per start.
func TestCheckServiceMaxChunk(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	res := append(svcRun(t0), svcResult{Instance: 2, Code: 200, Timestamp: t0.Add(5 * time.Second), Method: "POST",
		URL: "http://127.0.0.1:1/v1/sequences/a/next", Body: []byte(`{"ids":[300]}`)})
	if p := checkService(res, nil, svcCfg).Problems(); len(p) != 1 || !strings.Contains(p[0], "wasted") {
		t.Fatalf("chunk 10: problems %v, want the waste", p)
	}
	cfg := svcCfg
	cfg.MaxChunk = map[string]int64{"a": 100}
	if p := checkService(res, nil, cfg).Problems(); len(p) > 0 {
		t.Fatalf("chunk up to 100: problems %v", p)
	}
}
