package idservice_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/storage/faulty"
)

// TestRequestTimeoutBoundsTheRoutesThatWait: with every store call hung,
// each route that reads or writes the store (a sequence's creation, the
// first values of a sequence not open here, its state, a Leaf segment, the
// Leaf /db page, the list) answers an error within
// Options.RequestTimeout and some slack, not when the store answers; the
// routes answered from memory (a timeshard ID) still answer 200.
func TestRequestTimeoutBoundsTheRoutesThatWait(t *testing.T) {
	st := newFaulty(t)
	o := testOptions(st)
	o.RequestTimeout = 200 * time.Millisecond
	s := start(t, o, nil)
	s.create(t, `{"name":"known","type":"bigint"}`)
	require.NoError(t, st.SetRules(faulty.Rule{Action: faulty.Delay, Delay: time.Hour}))
	defer st.Clear()
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/sequences", `{"name":"new","type":"bigint"}`},
		{"POST", "/v1/sequences/other/next", ""},
		{"GET", "/v1/sequences/other", ""},
		{"GET", "/v1/sequences", ""},
		{"GET", "/api/segment/get/other", ""},
		{"GET", "/db", ""},
	} {
		began := time.Now()
		var body []byte
		if c.body != "" {
			body = []byte(c.body)
		}
		r := s.do(t, c.method, c.path, body)
		took := time.Since(began)
		assert.GreaterOrEqual(t, r.status, 500, "%s %s: %s", c.method, c.path, r.body)
		assert.Less(t, took, 5*time.Second, "%s %s answered after %v", c.method, c.path, took)
	}
	assert.Len(t, s.ids(t, "/v1/timeshard/63/next"), 1, "an ID from memory")
}
