package idservice_test

import (
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/idservice"
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
