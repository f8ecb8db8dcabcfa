package idservice_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/idservice"
	"github.com/cqlseq/cqlseq/storage/faulty"
	"github.com/cqlseq/cqlseq/storage/mem"
	"github.com/cqlseq/cqlseq/timeshard"
)

// oddKeys are snowflake keys outside the sequence names' rules, as a Leaf
// client may send them (percent-encoded where a URL needs it).
var oddKeys = []string{
	"order:id",
	"订单号",
	"a b",
	"a+b=c&d",
	"ключ",
	"a/b", // %2F: one path segment
	"~!$'()*,;@",
	strings.Repeat("k", idservice.MaxNameLen+50),
}

// TestLeafSnowflakeAnyKey (issue 52 item 4): Leaf's snowflake path ignores
// its key, so any non-empty key, one of any bytes or length included,
// answers 200 with an ID of the 63-bit layout as plain text.
func TestLeafSnowflakeAnyKey(t *testing.T) {
	s := start(t, testOptions(nil), nil)
	node, ok := s.svc.Node("63")
	require.True(t, ok)
	l := timeshard.DefaultLayout()
	for _, key := range oddKeys {
		path := "/api/snowflake/get/" + url.PathEscape(key)
		r := s.do(t, "GET", path, nil)
		if !assert.Equal(t, 200, r.status, "key %q (%s): %s", key, path, r.body) {
			continue
		}
		assert.Equal(t, "text/plain;charset=UTF-8", r.header.Get("Content-Type"), "key %q", key)
		id, err := strconv.ParseInt(r.body, 10, 64)
		if assert.NoError(t, err, "key %q: body %q", key, r.body) {
			assert.Equal(t, node, l.Node(id), "key %q", key)
			assert.WithinDuration(t, time.Now(), l.Time(id), 2*time.Second, "key %q", key)
		}
	}
	assert.Equal(t, 404, s.do(t, "GET", "/api/snowflake/get/", nil).status, "no key: not a Leaf path (as in Spring)")
}

// TestLeafSegmentBadKey (issue 52 item 4): on the segment path a key that
// is not a sequence name (no sequence can have it) is answered as Leaf
// answers a biz_tag it does not have: 500, Leaf's error body with
// Result{id=-2}, the API's code invalid_name; an unknown valid name is the
// same with unknown_sequence. Neither takes an ID.
func TestLeafSegmentBadKey(t *testing.T) {
	s := start(t, testOptions(nil), nil)
	s.create(t, `{"name":"orders","chunk_size":10}`)
	check := func(key, code string) {
		t.Helper()
		path := "/api/segment/get/" + url.PathEscape(key)
		r := s.do(t, "GET", path, nil)
		require.Equal(t, 500, r.status, "key %q: %s", key, r.body)
		var b struct {
			Status  int    `json:"status"`
			Message string `json:"message"`
			Path    string `json:"path"`
			Code    string `json:"code"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.body), &b), "key %q: %s", key, r.body)
		assert.Equal(t, 500, b.Status, "key %q", key)
		assert.Equal(t, "Result{id=-2, status=EXCEPTION}", b.Message, "key %q", key)
		assert.Equal(t, code, b.Code, "key %q", key)
	}
	for _, key := range oddKeys {
		check(key, "invalid_name")
	}
	check("no-such-sequence", "unknown_sequence")
	assert.Equal(t, []int64{1}, s.ids(t, "/v1/sequences/orders/next"), "no refused key took an ID")
}

// TestLeafAnyMethodAndTrailingSlash (issue 52 item 5): Leaf's controller
// maps its paths without a method and Spring Boot 1.5 matches a trailing
// slash, so every method but OPTIONS, with or without a trailing slash,
// answers as GET does: the next ID as plain text. OPTIONS answers 200
// with Spring's Allow header and takes no ID.
func TestLeafAnyMethodAndTrailingSlash(t *testing.T) {
	s := start(t, testOptions(nil), nil)
	s.create(t, `{"name":"orders","chunk_size":10}`)
	want := int64(0)
	for _, method := range []string{"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD"} {
		for _, slash := range []string{"", "/"} {
			want++
			r := s.do(t, method, "/api/segment/get/orders"+slash, nil)
			if !assert.Equal(t, 200, r.status, "%s segment%s: %s", method, slash, r.body) {
				continue
			}
			assert.Equal(t, "text/plain;charset=UTF-8", r.header.Get("Content-Type"), "%s segment%s", method, slash)
			if method == "HEAD" {
				assert.Empty(t, r.body)
			} else {
				assert.Equal(t, strconv.FormatInt(want, 10), r.body, "%s segment%s", method, slash)
			}
			r = s.do(t, method, "/api/snowflake/get/any"+slash, nil)
			if assert.Equal(t, 200, r.status, "%s snowflake%s: %s", method, slash, r.body) && method != "HEAD" {
				_, err := strconv.ParseInt(r.body, 10, 64)
				assert.NoError(t, err, "%s snowflake%s: %q", method, slash, r.body)
			}
		}
	}
	r := s.do(t, "POST", "/api/segment/get/orders", []byte("a=1&b=2"))
	want++
	assert.Equal(t, strconv.FormatInt(want, 10), r.body, "a form body is ignored, as Leaf does")

	for _, path := range []string{"/api/segment/get/orders", "/api/snowflake/get/x/"} {
		r := s.do(t, "OPTIONS", path, nil)
		assert.Equal(t, 200, r.status, "OPTIONS %s: %s", path, r.body)
		assert.Equal(t, "GET,HEAD,POST,PUT,PATCH,DELETE,OPTIONS", r.header.Get("Allow"), "OPTIONS %s", path)
		assert.Empty(t, r.body, "OPTIONS %s", path)
	}
	assert.Equal(t, []int64{want + 1}, s.ids(t, "/v1/sequences/orders/next"), "every request but OPTIONS took one ID")
	for _, path := range []string{"/api/segment/get/orders/x", "/api/segment/get/", "/api/segment/get"} {
		assert.Equal(t, 404, s.do(t, "GET", path, nil).status, path)
	}
}

// springBoot15Keys are the fields of Spring Boot 1.5's error body, in its
// order (DefaultErrorAttributes), then the API's code.
var springBoot15Keys = []string{"timestamp", "status", "error", "exception", "message", "path", "code"}

// leafError checks that r is Leaf's error answer as Spring Boot 1.5 gives
// it (status, content type, the fields in order, timestamp a JSON number of
// epoch milliseconds within a minute of now) and returns its fields.
func leafError(t *testing.T, r response, status int) map[string]any {
	t.Helper()
	require.Equal(t, status, r.status, r.body)
	assert.Equal(t, "application/json;charset=UTF-8", r.header.Get("Content-Type"))
	dec := json.NewDecoder(strings.NewReader(r.body))
	dec.UseNumber()
	var keys []string
	_, err := dec.Token() // {
	require.NoError(t, err, r.body)
	b := map[string]any{}
	for dec.More() {
		tok, err := dec.Token()
		require.NoError(t, err, r.body)
		k := tok.(string)
		var v any
		require.NoError(t, dec.Decode(&v), r.body)
		keys = append(keys, k)
		b[k] = v
	}
	assert.Equal(t, springBoot15Keys, keys, "Spring Boot 1.5's fields in its order, then code: %s", r.body)
	ts, ok := b["timestamp"].(json.Number)
	if assert.True(t, ok, "timestamp is a JSON number: %s", r.body) {
		ms, err := ts.Int64()
		if assert.NoError(t, err, "timestamp %s: whole milliseconds", ts) {
			assert.WithinDuration(t, time.Now(), time.UnixMilli(ms), time.Minute, "timestamp %d: epoch milliseconds", ms)
		}
	}
	assert.Equal(t, json.Number(strconv.Itoa(status)), b["status"], "status is a JSON number")
	return b
}

// TestLeafErrorBodySpringBoot15 (issue 52 item 6): a failure on a Leaf path
// is Spring Boot 1.5's error body (Leaf runs on it): timestamp a JSON number
// of epoch milliseconds, status, error, exception (Leaf's
// LeafServerException), message (Leaf's Result), path (as sent), and the
// API's code; the API's own routes keep their {"code","message"}.
func TestLeafErrorBodySpringBoot15(t *testing.T) {
	s := start(t, testOptions(nil), nil)
	s.create(t, `{"name":"tiny","type":"smallint","start":32767,"chunk_size":1}`)
	require.Equal(t, "32767", s.do(t, "GET", "/api/segment/get/tiny", nil).body)
	for _, c := range []struct {
		path, wmessage, wcode, wpath string
	}{
		{"/api/segment/get/nope", "Result{id=-2, status=EXCEPTION}", "unknown_sequence", "/api/segment/get/nope"},
		{"/api/segment/get/nope/", "Result{id=-2, status=EXCEPTION}", "unknown_sequence", "/api/segment/get/nope/"},
		{"/api/segment/get/%E8%AE%A2%E5%8D%95", "Result{id=-2, status=EXCEPTION}", "invalid_name", "/api/segment/get/%E8%AE%A2%E5%8D%95"},
		{"/api/segment/get/a&b", "Result{id=-2, status=EXCEPTION}", "invalid_name", "/api/segment/get/a&b"},
		{"/api/segment/get/tiny", "Result{id=-3, status=EXCEPTION}", "sequence_exhausted", "/api/segment/get/tiny"},
	} {
		b := leafError(t, s.do(t, "POST", c.path, nil), 500)
		assert.Equal(t, "Internal Server Error", b["error"], c.path)
		assert.Equal(t, "com.sankuai.inf.leaf.server.exception.LeafServerException", b["exception"], c.path)
		assert.Equal(t, c.wmessage, b["message"], c.path)
		assert.Equal(t, c.wpath, b["path"], "%s: the path as sent (Spring's request URI)", c.path)
		assert.Equal(t, c.wcode, b["code"], c.path)
	}
	r := s.do(t, "POST", "/v1/sequences/nope/next", nil)
	require.Equal(t, 404, r.status)
	assert.JSONEq(t, `{"code":"unknown_sequence","message":"idservice: unknown sequence: \"nope\""}`, r.body, "the API keeps its own error body")
	assert.Equal(t, "application/json", r.header.Get("Content-Type"))
}

// cacheView is an entry of /cache: Leaf's SegmentBufferView, and cqlseq's
// increment, issued and held.
type cacheView struct {
	Key       string `json:"key"`
	InitOk    bool   `json:"initOk"`
	NextReady bool   `json:"nextReady"`
	Pos       int    `json:"pos"`
	Value0    int64  `json:"value0"`
	Max0      int64  `json:"max0"`
	Step0     int64  `json:"step0"`
	Value1    int64  `json:"value1"`
	Max1      int64  `json:"max1"`
	Step1     int64  `json:"step1"`
	Increment int64  `json:"increment"`
	Issued    uint64 `json:"issued"`
	Held      uint64 `json:"held"`
	// CurrentStep is the last chunk's size (adaptive: the current step).
	CurrentStep int64 `json:"currentStep"`
	Retired     bool  `json:"retired"`
}

// dbRow is a row of /db: Leaf's LeafAlloc.
type dbRow struct {
	Key         string     `json:"key"`
	MaxID       *int64     `json:"maxId"`
	Step        int64      `json:"step"`
	UpdateTime  *time.Time `json:"updateTime"`
	Description string     `json:"description"`
	Exhausted   bool       `json:"exhausted"`
	Retired     bool       `json:"retired"`
	Adaptive    bool       `json:"adaptive"`
}

// leafJSON checks that r is a monitor page's 200 JSON answer and decodes
// it into v, refusing unknown fields.
func leafJSON(t *testing.T, r response, v any) {
	t.Helper()
	require.Equal(t, 200, r.status, r.body)
	assert.Equal(t, "application/json;charset=UTF-8", r.header.Get("Content-Type"))
	dec := json.NewDecoder(strings.NewReader(r.body))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(v), r.body)
}

// TestLeafMonitorPages (issue 52 item 7): Leaf's /cache, /db and
// /decodeSnowflakeId as JSON. /cache shows each open sequence's chunks in
// Leaf's two buffers (current and reserved or previous) with the position;
// /db each open sequence's stored record as Leaf's leaf_alloc row;
// /decodeSnowflakeId splits a 63-bit ID as Leaf's map does (strings).
// They take any method and a trailing slash, like the ID paths.
func TestLeafMonitorPages(t *testing.T) {
	s := start(t, testOptions(nil), nil)
	cache := func() map[string]cacheView {
		t.Helper()
		var m map[string]cacheView
		leafJSON(t, s.do(t, "GET", "/cache", nil), &m)
		return m
	}
	var empty map[string]cacheView
	leafJSON(t, s.do(t, "GET", "/cache", nil), &empty)
	assert.Empty(t, empty, "no sequence open yet")

	s.create(t, `{"name":"orders","chunk_size":10}`)
	s.create(t, `{"name":"evens","start":0,"step":2,"chunk_size":5}`)
	for range 3 {
		s.do(t, "GET", "/api/segment/get/orders", nil)
	}
	s.do(t, "GET", "/api/segment/get/evens", nil)
	s.do(t, "GET", "/api/segment/get/evens", nil)
	c := cache()
	assert.Equal(t, cacheView{Key: "orders", InitOk: true, Pos: 0, Value0: 4, Max0: 11, Step0: 10, Increment: 1, Issued: 3, Held: 7, CurrentStep: 10}, c["orders"])
	assert.Equal(t, cacheView{Key: "evens", InitOk: true, Pos: 0, Value0: 4, Max0: 10, Step0: 5, Increment: 2, Issued: 2, Held: 3, CurrentStep: 5}, c["evens"])
	assert.Len(t, c, 2)

	for range 5 { // past the prefetch point (half the chunk): the next chunk is reserved
		s.do(t, "POST", "/api/segment/get/orders", nil)
	}
	require.Eventually(t, func() bool { return cache()["orders"].NextReady }, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, cacheView{Key: "orders", InitOk: true, NextReady: true, Pos: 0, Value0: 9, Max0: 11, Step0: 10,
		Value1: 11, Max1: 21, Step1: 10, Increment: 1, Issued: 8, Held: 12, CurrentStep: 10}, cache()["orders"])
	for range 5 { // into the reserved chunk: buffer 1 is current, buffer 0 the used-up one
		s.do(t, "GET", "/api/segment/get/orders", nil)
	}
	assert.Equal(t, cacheView{Key: "orders", InitOk: true, Pos: 1, Value0: 11, Max0: 11, Step0: 10,
		Value1: 14, Max1: 21, Step1: 10, Increment: 1, Issued: 13, Held: 7, CurrentStep: 10}, cache()["orders"])

	var rows []dbRow
	leafJSON(t, s.do(t, "GET", "/db", nil), &rows)
	require.Len(t, rows, 2, "the open sequences, by key")
	assert.Equal(t, "evens", rows[0].Key)
	assert.Equal(t, "orders", rows[1].Key)
	if assert.NotNil(t, rows[1].MaxID) {
		assert.Equal(t, int64(21), *rows[1].MaxID, "orders: values 1 to 20 allocated (two chunks)")
	}
	if assert.NotNil(t, rows[0].MaxID) {
		assert.Equal(t, int64(10), *rows[0].MaxID, "evens: 0, 2, 4, 6, 8 allocated")
	}
	assert.Equal(t, int64(10), rows[1].Step)
	assert.Equal(t, int64(5), rows[0].Step)
	assert.Equal(t, "bigint sequence: start 1, step 1", rows[1].Description)
	assert.Equal(t, "bigint sequence: start 0, step 2", rows[0].Description)
	if assert.NotNil(t, rows[1].UpdateTime) {
		assert.WithinDuration(t, time.Now(), *rows[1].UpdateTime, time.Minute)
	}
	assert.False(t, rows[1].Exhausted)

	id, err := strconv.ParseInt(s.do(t, "GET", "/api/snowflake/get/k", nil).body, 10, 64)
	require.NoError(t, err)
	var d struct {
		Time    time.Time `json:"time"`
		Node    uint32    `json:"node"`
		Counter uint64    `json:"counter"`
	}
	require.NoError(t, jsonUnmarshal(s.do(t, "GET", "/v1/timeshard/63/ids/"+strconv.FormatInt(id, 10), nil).body, &d))
	var m map[string]string
	leafJSON(t, s.do(t, "GET", "/decodeSnowflakeId?snowflakeId="+strconv.FormatInt(id, 10), nil), &m)
	ms := d.Time.UnixMilli()
	assert.Equal(t, map[string]string{
		"timestamp":  strconv.FormatInt(ms, 10) + "(" + d.Time.UTC().Format("2006-01-02 15:04:05") + ")",
		"workerId":   strconv.FormatUint(uint64(d.Node), 10),
		"sequenceId": strconv.FormatUint(d.Counter, 10),
	}, m)
	for _, bad := range []string{"abc", "", "-1", "1.5", "9223372036854775808"} {
		var e map[string]string
		leafJSON(t, s.do(t, "GET", "/decodeSnowflakeId?snowflakeId="+url.QueryEscape(bad), nil), &e)
		assert.Contains(t, e["errorMsg"], "snowflake Id反解析失败", "snowflakeId %q: Leaf's answer, 200 with errorMsg", bad)
		assert.Len(t, e, 1, "snowflakeId %q", bad)
	}
	b := leafError(t, s.do(t, "GET", "/decodeSnowflakeId", nil), 400)
	assert.Equal(t, "Bad Request", b["error"])
	assert.Equal(t, "org.springframework.web.bind.MissingServletRequestParameterException", b["exception"])
	assert.Equal(t, "Required String parameter 'snowflakeId' is not present", b["message"])
	assert.Equal(t, "/decodeSnowflakeId", b["path"])

	for _, method := range []string{"POST", "PUT", "DELETE"} {
		for _, path := range []string{"/cache/", "/db/", "/decodeSnowflakeId/?snowflakeId=1"} {
			r := s.do(t, method, path, nil)
			assert.Equal(t, 200, r.status, "%s %s: %s", method, path, r.body)
		}
	}
	assert.Equal(t, 404, s.do(t, "GET", "/cache/x", nil).status)

	metrics := s.do(t, "GET", "/metrics", nil).body
	for _, route := range []string{"leaf_cache", "leaf_db", "leaf_decode"} {
		assert.Contains(t, metrics, `cqlseq_service_requests_total{code="200",route="`+route+`"}`, route)
	}
	assert.Contains(t, metrics, `cqlseq_service_requests_total{code="400",route="leaf_decode"} 1`)
}

// TestLeafDBListsEverySequenceOfTheStore: /db lists the sequences of the
// store, as Leaf lists its leaf_alloc table, also those this instance
// never opened (created by another instance), retired ones marked.
func TestLeafDBListsEverySequenceOfTheStore(t *testing.T) {
	st := mem.New(mem.Options{})
	t.Cleanup(func() { st.Close() })
	oa := testOptions(st)
	a := start(t, oa, nil)
	a.create(t, `{"name":"b-second","chunk_size":10}`)
	a.create(t, `{"name":"a-first","chunk_size":10}`)
	a.create(t, `{"name":"c-retired","chunk_size":10}`)
	a.view(t, "DELETE", "/v1/sequences/c-retired", nil, 200)

	b := start(t, testOptions(st), nil)
	var rows []dbRow
	leafJSON(t, b.do(t, "GET", "/db", nil), &rows)
	require.Len(t, rows, 3, "every sequence of the store")
	assert.Equal(t, []string{"a-first", "b-second", "c-retired"}, []string{rows[0].Key, rows[1].Key, rows[2].Key})
	assert.False(t, rows[0].Retired)
	assert.True(t, rows[2].Retired)
	var c map[string]cacheView
	leafJSON(t, b.do(t, "GET", "/cache", nil), &c)
	assert.Empty(t, c, "b opened none of them")
}

// TestLeafMonitorExhaustedAndStoreDown (issue 52 item 7): an exhausted
// sequence is shown with maxId null and its used-up chunk (value = max =
// the value after its last); with the store failing /db answers Spring
// Boot 1.5's 500 body (LeafServerException, the API's message and code
// unavailable), while /cache and /decodeSnowflakeId, which read no store,
// still answer.
func TestLeafMonitorExhaustedAndStoreDown(t *testing.T) {
	st := newFaulty(t)
	o := testOptions(st)
	o.RequestTimeout = 300 * time.Millisecond
	s := start(t, o, nil)
	s.create(t, `{"name":"tiny","type":"smallint","start":32766,"chunk_size":2}`)
	assert.Equal(t, []int64{32766, 32767}, s.ids(t, "/v1/sequences/tiny/next?count=2"))
	var rows []dbRow
	leafJSON(t, s.do(t, "GET", "/db", nil), &rows)
	require.Len(t, rows, 1)
	assert.Nil(t, rows[0].MaxID, "exhausted: no value left to allocate")
	assert.True(t, rows[0].Exhausted)
	assert.Equal(t, "smallint sequence: start 32766, step 1", rows[0].Description)
	var c map[string]cacheView
	leafJSON(t, s.do(t, "GET", "/cache", nil), &c)
	assert.Equal(t, cacheView{Key: "tiny", InitOk: true, Value0: 32768, Max0: 32768, Step0: 2, Increment: 1, Issued: 2, CurrentStep: 2}, c["tiny"])

	require.NoError(t, st.SetRules(faulty.Rule{Action: faulty.Fail}))
	defer st.Clear()
	b := leafError(t, s.do(t, "GET", "/db", nil), 500)
	assert.Equal(t, "com.sankuai.inf.leaf.server.exception.LeafServerException", b["exception"])
	assert.Equal(t, "unavailable", b["code"])
	assert.Contains(t, b["message"], "listing sequences", "the API's message, not Leaf's Result")
	leafJSON(t, s.do(t, "GET", "/cache", nil), &c)
	var m map[string]string
	leafJSON(t, s.do(t, "GET", "/decodeSnowflakeId?snowflakeId=0", nil), &m)
	assert.Equal(t, "0", m["workerId"])
	b = leafError(t, s.do(t, "GET", "/api/segment/get/other", nil), 500)
	assert.Equal(t, "Result{id=-3, status=EXCEPTION}", b["message"], "no segment: the store is down")
}

// TestLeafCompatibility is the Leaf compatibility suite: a Leaf client's
// requests, sent with a plain net/http client to a running service, each
// checked for its status, content type and body's shape: a decimal ID as
// plain text on the get paths (any method, with or without a trailing
// slash, odd snowflake keys); Spring Boot 1.5's error body on a failure
// (fields in order, timestamp a number, Leaf's exception and Result);
// the monitor pages' JSON fields; then the route metrics of each.
func TestLeafCompatibility(t *testing.T) {
	s := start(t, testOptions(nil), nil)
	s.create(t, `{"name":"orders","chunk_size":100}`)
	s.create(t, `{"name":"tiny","type":"smallint","start":32767,"chunk_size":1}`)
	require.Equal(t, []int64{32767}, s.ids(t, "/v1/sequences/tiny/next"))
	l := timeshard.DefaultLayout()
	const sampleID = 123456789012345678 // an ID of the 63-bit layout

	const (
		segmentID   = "segment ID"   // 200, the sequence's next value as plain text
		snowflakeID = "snowflake ID" // 200, a 63-bit ID of now as plain text
		headID      = "HEAD ID"      // 200, plain text, no body
		leafErr     = "Leaf error"   // Spring Boot 1.5's error body
		options     = "OPTIONS"      // 200, Spring's Allow, no body
		cachePage   = "/cache"       // a map of SegmentBufferView
		dbPage      = "/db"          // a list of LeafAlloc
		decoded     = "decoded"      // Leaf's decode map
		decodeErr   = "decode error" // 200, {"errorMsg": ...}
		apiErr      = "API error"    // not a Leaf path: the API's {"code","message"}
	)
	zh := url.PathEscape("订单号")
	long := strings.Repeat("k", 300)
	for _, c := range []struct {
		method, path, body string
		want               string
		status             int
		exception, message string // leafErr
		code               string // leafErr, apiErr
	}{
		{"GET", "/api/segment/get/orders", "", segmentID, 200, "", "", ""},
		{"GET", "/api/segment/get/orders/", "", segmentID, 200, "", "", ""},
		{"POST", "/api/segment/get/orders", "", segmentID, 200, "", "", ""},
		{"POST", "/api/segment/get/orders/", "biz_tag=orders", segmentID, 200, "", "", ""},
		{"PUT", "/api/segment/get/orders", "", segmentID, 200, "", "", ""},
		{"DELETE", "/api/segment/get/orders/", "", segmentID, 200, "", "", ""},
		{"PATCH", "/api/segment/get/orders", "", segmentID, 200, "", "", ""},
		{"HEAD", "/api/segment/get/orders", "", headID, 200, "", "", ""},
		{"GET", "/api/snowflake/get/orders", "", snowflakeID, 200, "", "", ""},
		{"GET", "/api/snowflake/get/orders/", "", snowflakeID, 200, "", "", ""},
		{"POST", "/api/snowflake/get/order:id", "", snowflakeID, 200, "", "", ""},
		{"GET", "/api/snowflake/get/" + zh, "", snowflakeID, 200, "", "", ""},
		{"PUT", "/api/snowflake/get/" + zh + "/", "", snowflakeID, 200, "", "", ""},
		{"GET", "/api/snowflake/get/a%20b%2Fc", "", snowflakeID, 200, "", "", ""},
		{"DELETE", "/api/snowflake/get/" + long, "", snowflakeID, 200, "", "", ""},
		{"OPTIONS", "/api/segment/get/orders", "", options, 200, "", "", ""},
		{"OPTIONS", "/api/snowflake/get/k/", "", options, 200, "", "", ""},
		{"GET", "/api/segment/get/unknown", "", leafErr, 500, leafException, "Result{id=-2, status=EXCEPTION}", "unknown_sequence"},
		{"POST", "/api/segment/get/unknown/", "", leafErr, 500, leafException, "Result{id=-2, status=EXCEPTION}", "unknown_sequence"},
		{"GET", "/api/segment/get/order:id", "", leafErr, 500, leafException, "Result{id=-2, status=EXCEPTION}", "invalid_name"},
		{"GET", "/api/segment/get/" + zh, "", leafErr, 500, leafException, "Result{id=-2, status=EXCEPTION}", "invalid_name"},
		{"GET", "/api/segment/get/tiny", "", leafErr, 500, leafException, "Result{id=-3, status=EXCEPTION}", "sequence_exhausted"},
		{"GET", "/cache", "", cachePage, 200, "", "", ""},
		{"POST", "/cache/", "", cachePage, 200, "", "", ""},
		{"GET", "/db", "", dbPage, 200, "", "", ""},
		{"PUT", "/db/", "", dbPage, 200, "", "", ""},
		{"GET", "/decodeSnowflakeId?snowflakeId=" + strconv.Itoa(sampleID), "", decoded, 200, "", "", ""},
		{"POST", "/decodeSnowflakeId/?snowflakeId=" + strconv.Itoa(sampleID), "", decoded, 200, "", "", ""},
		{"GET", "/decodeSnowflakeId?snowflakeId=abc", "", decodeErr, 200, "", "", ""},
		{"GET", "/decodeSnowflakeId?snowflakeId=-5", "", decodeErr, 200, "", "", ""},
		{"GET", "/decodeSnowflakeId", "", leafErr, 400, "org.springframework.web.bind.MissingServletRequestParameterException",
			"Required String parameter 'snowflakeId' is not present", "bad_request"},
		{"GET", "/api/segment/get/orders/x", "", apiErr, 404, "", "", "not_found"},
		{"GET", "/api/segment/get/", "", apiErr, 404, "", "", "not_found"},
		{"GET", "/cache/x", "", apiErr, 404, "", "", "not_found"},
	} {
		name := c.method + " " + c.path
		if len(name) > 80 {
			name = name[:80] + "..."
		}
		var body *strings.Reader
		if c.body != "" {
			body = strings.NewReader(c.body)
		}
		req, err := http.NewRequest(c.method, s.url+c.path, nil)
		if body != nil {
			req, err = http.NewRequest(c.method, s.url+c.path, body)
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		require.NoError(t, err, name)
		res, err := s.client.Do(req)
		require.NoError(t, err, name)
		raw, err := io.ReadAll(res.Body)
		res.Body.Close()
		require.NoError(t, err, name)
		r := response{status: res.StatusCode, header: res.Header, body: string(raw)}
		if !assert.Equal(t, c.status, r.status, "%s: %s", name, r.body) {
			continue
		}
		ctype := r.header.Get("Content-Type")
		switch c.want {
		case segmentID, snowflakeID, headID:
			assert.Equal(t, "text/plain;charset=UTF-8", ctype, name)
			if c.want == headID {
				assert.Empty(t, r.body, name)
				break
			}
			assert.Regexp(t, `^[1-9][0-9]*$`, r.body, "%s: a decimal ID alone", name)
			id, err := strconv.ParseInt(r.body, 10, 64)
			if assert.NoError(t, err, name) && c.want == snowflakeID {
				assert.WithinDuration(t, time.Now(), l.Time(id), 5*time.Second, name)
			}
		case options:
			assert.Equal(t, "GET,HEAD,POST,PUT,PATCH,DELETE,OPTIONS", r.header.Get("Allow"), name)
			assert.Empty(t, r.body, name)
		case leafErr:
			b := leafError(t, r, c.status)
			assert.Equal(t, http.StatusText(c.status), b["error"], name)
			assert.Equal(t, c.exception, b["exception"], name)
			assert.Equal(t, c.message, b["message"], name)
			assert.Equal(t, strings.SplitN(c.path, "?", 2)[0], b["path"], name)
			assert.Equal(t, c.code, b["code"], name)
		case cachePage:
			var m map[string]cacheView
			leafJSON(t, r, &m)
			if assert.Contains(t, m, "orders", name) {
				v := m["orders"]
				assert.True(t, v.InitOk, name)
				assert.Equal(t, int64(100), []int64{v.Step0, v.Step1}[v.Pos], "%s: the current buffer's chunk", name)
				assert.Equal(t, uint64(8), v.Issued, "%s: the eight IDs of the segment rows (HEAD included)", name)
			}
			assert.Contains(t, m, "tiny", name)
		case dbPage:
			var rows []dbRow
			leafJSON(t, r, &rows)
			if assert.Len(t, rows, 2, name) {
				assert.Equal(t, []string{"orders", "tiny"}, []string{rows[0].Key, rows[1].Key}, name)
				if assert.NotNil(t, rows[0].MaxID, name) {
					assert.Equal(t, int64(101), *rows[0].MaxID, "%s: one chunk of 100 allocated", name)
				}
				assert.Equal(t, int64(100), rows[0].Step, name)
				assert.NotNil(t, rows[0].UpdateTime, name)
				assert.Nil(t, rows[1].MaxID, "%s: tiny is exhausted", name)
			}
		case decoded:
			var m map[string]string
			leafJSON(t, r, &m)
			ts := l.Time(sampleID).UTC()
			assert.Equal(t, map[string]string{
				"timestamp":  strconv.FormatInt(ts.UnixMilli(), 10) + "(" + ts.Format("2006-01-02 15:04:05") + ")",
				"workerId":   strconv.FormatUint(uint64(l.Node(sampleID)), 10),
				"sequenceId": strconv.FormatUint(l.Counter(sampleID), 10),
			}, m, name)
			assert.Regexp(t, `^[0-9]+\([0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}\)$`, m["timestamp"], name)
		case decodeErr:
			var m map[string]string
			leafJSON(t, r, &m)
			assert.True(t, strings.HasPrefix(m["errorMsg"], "snowflake Id反解析失败"), "%s: %s", name, r.body)
		case apiErr:
			assert.Equal(t, "application/json", ctype, name)
			assert.Equal(t, c.code, r.err(t).Code, name)
		default:
			t.Fatalf("%s: unknown want %q", name, c.want)
		}
	}

	var counts []string // the request counters of the Leaf routes
	for line := range strings.Lines(s.do(t, "GET", "/metrics", nil).body) {
		if strings.HasPrefix(line, "cqlseq_service_requests_total{") && strings.Contains(line, `route="leaf_`) {
			counts = append(counts, strings.TrimSpace(line))
		}
	}
	for _, series := range []string{
		`{code="200",route="leaf_segment"} 9`, // 8 IDs and OPTIONS
		`{code="500",route="leaf_segment"} 5`,
		`{code="200",route="leaf_snowflake"} 8`,
		`{code="200",route="leaf_cache"} 2`,
		`{code="200",route="leaf_db"} 2`,
		`{code="200",route="leaf_decode"} 4`,
		`{code="400",route="leaf_decode"} 1`,
	} {
		assert.Contains(t, counts, "cqlseq_service_requests_total"+series)
	}
	assert.Len(t, counts, 7, "no other Leaf route or code: %q", counts)
}

// leafException is the exception the Leaf paths' error body names.
const leafException = "com.sankuai.inf.leaf.server.exception.LeafServerException"

// leafTwepoch is Leaf's SnowflakeIDGenImpl twepoch, in milliseconds since
// the Unix epoch.
const leafTwepoch = 1288834974657

// leafID is an ID as Leaf's SnowflakeIDGenImpl makes it at ms (since the
// Unix epoch): ((ms - twepoch) << 22) | (workerId << 12) | sequence.
func leafID(ms, worker, seq int64) int64 { return (ms-leafTwepoch)<<22 | worker<<12 | seq }

// leafDecode is Leaf's decoder (LeafMonitorController.decodeSnowflakeId):
// the ID's time in milliseconds since the Unix epoch, worker and sequence.
func leafDecode(id int64) (ms, worker, seq int64) {
	return id>>22 + leafTwepoch, id >> 12 & 0x3ff, id & 0xfff
}

// leafOptions are testOptions serving layout 63 with Leaf's preset.
func leafOptions() idservice.Options {
	o := testOptions(nil)
	o.Layouts = map[string]idservice.LayoutOptions{"63": idservice.LeafPreset()}
	return o
}

// snowflake takes an ID on Leaf's snowflake path.
func (s *server) snowflake(t *testing.T) int64 {
	t.Helper()
	r := s.do(t, "GET", "/api/snowflake/get/any", nil)
	require.Equal(t, 200, r.status, r.body)
	id, err := strconv.ParseInt(r.body, 10, 64)
	require.NoError(t, err, r.body)
	return id
}

// TestLeafPresetSortsAfterLeaf (issue 52 item 1): under Leaf's preset, an
// ID the service makes now is above every ID Leaf made a second earlier
// (any worker 0..1023, sequence 0, from Leaf's formula), so IDs keep
// sorting after the switch; and Leaf's decoder dates it now.
func TestLeafPresetSortsAfterLeaf(t *testing.T) {
	s := start(t, leafOptions(), nil)
	before := time.Now().UnixMilli()
	id := s.snowflake(t)
	after := time.Now().UnixMilli()
	ms, worker, seq := leafDecode(id)
	assert.GreaterOrEqual(t, ms, before-1, "Leaf's decoder dates it now")
	assert.LessOrEqual(t, ms, after+1, "Leaf's decoder dates it now")
	for worker := range int64(1024) {
		require.Greater(t, id, leafID(before-1000, worker, 0), "worker %d", worker)
	}
	node, ok := s.svc.Node("63")
	require.True(t, ok)
	assert.Equal(t, int64(node), worker)
	assert.Less(t, seq, int64(4096))

	var d map[string]string
	leafJSON(t, s.do(t, "GET", "/decodeSnowflakeId?snowflakeId="+strconv.FormatInt(id, 10), nil), &d)
	assert.True(t, strings.HasPrefix(d["timestamp"], strconv.FormatInt(ms, 10)+"("), "/decodeSnowflakeId agrees with Leaf's formula: %v", d)
	assert.Equal(t, strconv.FormatInt(seq, 10), d["sequenceId"])
	var lv struct {
		Layouts []struct {
			Name  string    `json:"name"`
			Epoch time.Time `json:"epoch"`
		} `json:"layouts"`
	}
	require.NoError(t, jsonUnmarshal(s.do(t, "GET", "/v1/timeshard", nil).body, &lv))
	assert.Equal(t, "63", lv.Layouts[0].Name)
	assert.Equal(t, int64(leafTwepoch), lv.Layouts[0].Epoch.UnixMilli(), "/v1/timeshard shows Leaf's epoch")
}

// lastDigitBuckets takes n IDs on Leaf's snowflake path, one per
// millisecond or slower, and returns how many of the 100 values id % 100
// takes.
func lastDigitBuckets(t *testing.T, s *server, n int) int {
	t.Helper()
	seen := map[int64]bool{}
	prev := int64(0)
	for range n {
		id := s.snowflake(t)
		require.Greater(t, id, prev, "IDs increase")
		prev = id
		seen[id%100] = true
		time.Sleep(time.Millisecond)
	}
	return len(seen)
}

// TestLeafPresetSpreadsLastDigits (issue 52 item 2): at one ID per
// millisecond or slower, the default layout's IDs all have counter 0, so
// id % 100 reaches at most 25 of 100 buckets; Leaf's preset starts each
// millisecond's counter at a random 0..99, as Leaf does (Leaf issue #169),
// and id % 100 reaches nearly all of them.
func TestLeafPresetSpreadsLastDigits(t *testing.T) {
	assert.LessOrEqual(t, lastDigitBuckets(t, start(t, testOptions(nil), nil), 1000), 25, "the default: the old behaviour")
	assert.GreaterOrEqual(t, lastDigitBuckets(t, start(t, leafOptions(), nil), 1000), 90, "Leaf's preset")
}

// serveLeaf serves s's LeafHandler on a listener of its own until the
// test ends, and returns its base URL.
func serveLeaf(t *testing.T, s *server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.svc.ServeLeaf(ctx, ln, nil) }()
	t.Cleanup(func() { cancel(); assert.NoError(t, <-done) })
	return "http://" + ln.Addr().String()
}

// TestLeafListenerWithoutToken (issue 52 item 3): with a token file, the
// Leaf listener (ServeLeaf; --leaf-listen) answers Leaf's paths and monitor
// pages without a token, and nothing else: creating a sequence or the
// API's own routes are not there; the main API still answers 401 without a
// token, Leaf's paths on it included.
func TestLeafListenerWithoutToken(t *testing.T) {
	o := testOptions(nil)
	o.Tokens = tokens(t)
	s := start(t, o, nil)
	s.token = adminToken
	s.create(t, `{"name":"orders","chunk_size":10}`)
	leaf := &server{url: serveLeaf(t, s), client: s.client}

	for _, c := range []struct {
		method, path string
		wstatus      int
	}{
		{"GET", "/api/segment/get/orders", 200},
		{"POST", "/api/segment/get/orders/", 200},
		{"GET", "/api/snowflake/get/order:id", 200},
		{"GET", "/cache", 200},
		{"GET", "/db", 200},
		{"GET", "/decodeSnowflakeId?snowflakeId=1", 200},
		{"GET", "/healthz", 200},
		{"GET", "/readyz", 200},
		{"GET", "/api/segment/get/nope", 500}, // Leaf's unknown key, not 401
		{"POST", "/v1/sequences", 404},        // creating stays behind the token, on the main API only
		{"POST", "/v1/sequences/orders/next", 404},
		{"POST", "/v1/timeshard/63/next", 404},
		{"GET", "/metrics", 404},
		{"POST", "/cqlseq.idservice.v1.IDService/NextTimeshard", 404},
	} {
		r, err := leaf.try(c.method, c.path, []byte(`{"name":"evil"}`), "")
		require.NoError(t, err)
		assert.Equal(t, c.wstatus, r.status, "Leaf listener %s %s: %s", c.method, c.path, r.body)
	}
	r, err := leaf.try("GET", "/api/segment/get/evil", nil, "")
	require.NoError(t, err)
	assert.Equal(t, "unknown_sequence", leafError(t, r, 500)["code"], "no sequence was created through the Leaf listener")

	for _, path := range []string{"/api/snowflake/get/x", "/api/segment/get/orders", "/cache", "/v1/sequences/orders/next", "/v1/sequences"} {
		r, err := s.try("POST", path, nil, "")
		require.NoError(t, err)
		assert.Equal(t, 401, r.status, "main API %s without a token: %s", path, r.body)
	}
	assert.Equal(t, []int64{3}, s.ids(t, "/v1/sequences/orders/next"), "the two Leaf-listener IDs were taken, the token still works")
}

// TestLayoutChangeRefusedAtStart (issue 52 item 1): the store records each
// layout's epoch and split; an instance started with a layout whose IDs
// would sort before those already made (back from Leaf's epoch to
// cqlseq's) is refused, naming the layout.
func TestLayoutChangeRefusedAtStart(t *testing.T) {
	st := mem.New(mem.Options{})
	o := testOptions(st)
	s := start(t, o, nil)
	old := s.snowflake(t)
	require.NoError(t, s.shutdown(t))

	o.Layouts = map[string]idservice.LayoutOptions{"63": idservice.LeafPreset()}
	s = start(t, o, nil)
	assert.Greater(t, s.snowflake(t), old, "to Leaf's epoch: IDs grow")
	require.NoError(t, s.shutdown(t))

	o.Layouts = nil
	_, err := idservice.New(context.Background(), o)
	require.ErrorIs(t, err, timeshard.ErrLayoutChange)
	assert.ErrorContains(t, err, "layout 63")
}
