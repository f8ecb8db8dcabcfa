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
