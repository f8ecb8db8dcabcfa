package idservice_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/galloc"
	"github.com/cqlseq/cqlseq/idservice"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/boltdb"
	"github.com/cqlseq/cqlseq/storage/mem"
)

// seqView is the part of a sequence's JSON view these tests read.
type seqView struct {
	Name      string `json:"name"`
	ChunkSize int64  `json:"chunk_size"`
	Adaptive  bool   `json:"adaptive"`
	Retired   bool   `json:"retired"`
	Allocated uint64 `json:"allocated"`
	Instance  *struct {
		ChunkSize int64 `json:"chunk_size"`
		Held      uint64
	} `json:"instance"`
}

func (s *server) view(t *testing.T, method, path string, body []byte, wstatus int) seqView {
	t.Helper()
	var b []byte
	if body != nil {
		b = body
	}
	r := s.do(t, method, path, b)
	require.Equal(t, wstatus, r.status, "%s %s: %s", method, path, r.body)
	var v seqView
	require.NoError(t, json.Unmarshal([]byte(r.body), &v))
	return v
}

// TestListSequences pages through every sequence in name order, retired
// ones included and shown so.
func TestListSequences(t *testing.T) {
	s := start(t, testOptions(nil), nil)
	for _, n := range []string{"e", "a", "c", "b", "d"} {
		s.create(t, `{"name":"`+n+`","chunk_size":3}`)
	}
	s.view(t, "DELETE", "/v1/sequences/c", nil, 200)
	var names, retired []string
	path := "/v1/sequences?limit=2"
	for pages := 1; ; pages++ {
		require.LessOrEqual(t, pages, 3)
		r := s.do(t, "GET", path, nil)
		require.Equal(t, 200, r.status, r.body)
		var p struct {
			Sequences []seqView `json:"sequences"`
			NextAfter string    `json:"next_after"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.body), &p))
		for _, v := range p.Sequences {
			names = append(names, v.Name)
			if v.Retired {
				retired = append(retired, v.Name)
			}
		}
		if p.NextAfter == "" {
			break
		}
		path = "/v1/sequences?limit=2&after=" + p.NextAfter
	}
	assert.Equal(t, []string{"a", "b", "c", "d", "e"}, names)
	assert.Equal(t, []string{"c"}, retired)
	r := s.do(t, "GET", "/v1/sequences", nil)
	require.Equal(t, 200, r.status)
	assert.Contains(t, r.body, `"name":"e"`)
	assert.NotContains(t, r.body, "next_after", "one page holds all")
}

// TestAlterSequence: a new chunk size applies to the next chunk; the
// values go on without a gap in the instance's chunk and never repeat;
// unknown names are 404; create with the old definition is 409.
func TestAlterSequence(t *testing.T) {
	s := start(t, testOptions(nil), nil)
	s.create(t, `{"name":"alt","chunk_size":10}`)
	got := s.ids(t, "/v1/sequences/alt/next?count=10")
	require.Eventually(t, func() bool { return s.view(t, "GET", "/v1/sequences/alt", nil, 200).Allocated == 20 },
		5*time.Second, 5*time.Millisecond, "the reserved chunk is fetched past the prefetch point")
	v := s.view(t, "PATCH", "/v1/sequences/alt", []byte(`{"chunk_size":100,"adaptive":true}`), 200)
	assert.Equal(t, int64(100), v.ChunkSize)
	assert.True(t, v.Adaptive)
	assert.Equal(t, uint64(20), v.Allocated, "two chunks of 10 (the current and the reserved one)")
	got = append(got, s.ids(t, "/v1/sequences/alt/next?count=150")...)
	for i, id := range got {
		require.Equal(t, int64(i+1), id)
	}
	g := s.view(t, "GET", "/v1/sequences/alt", nil, 200)
	require.NotNil(t, g.Instance)
	assert.GreaterOrEqual(t, g.Instance.ChunkSize, int64(100), "the chunks after the alter have the new size (or double it: adaptive)")
	r := s.do(t, "POST", "/v1/sequences", []byte(`{"name":"alt","chunk_size":10}`))
	assert.Equal(t, 409, r.status)
	assert.Equal(t, "definition_mismatch", r.err(t).Code)
	s.view(t, "POST", "/v1/sequences", []byte(`{"name":"alt","chunk_size":100,"adaptive":true}`), 200)

	r = s.do(t, "PATCH", "/v1/sequences/nope", []byte(`{"chunk_size":5}`))
	assert.Equal(t, 404, r.status)
	assert.Equal(t, "unknown_sequence", r.err(t).Code)
	r = s.do(t, "DELETE", "/v1/sequences/nope", nil)
	assert.Equal(t, 404, r.status)
	assert.Equal(t, "unknown_sequence", r.err(t).Code)
	s.create(t, `{"name":"small","type":"smallint"}`)
	r = s.do(t, "PATCH", "/v1/sequences/small", []byte(`{"chunk_size":70000}`))
	assert.Equal(t, 400, r.status)
	assert.Equal(t, "invalid_definition", r.err(t).Code)
}

// TestRetireSequence: a retired sequence answers 410 sequence_retired on
// next (HTTP, Leaf path), alter and create of its name, stays listed and
// readable as retired, and retiring it again is 200.
func TestRetireSequence(t *testing.T) {
	s := start(t, testOptions(nil), nil)
	s.create(t, `{"name":"old","chunk_size":10}`)
	assert.Equal(t, []int64{1, 2}, s.ids(t, "/v1/sequences/old/next?count=2"))
	v := s.view(t, "DELETE", "/v1/sequences/old", nil, 200)
	assert.True(t, v.Retired)
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/sequences/old/next", ""},
		{"PATCH", "/v1/sequences/old", `{"chunk_size":5}`},
		{"POST", "/v1/sequences", `{"name":"old","chunk_size":10}`},
	} {
		var b []byte
		if c.body != "" {
			b = []byte(c.body)
		}
		r := s.do(t, c.method, c.path, b)
		assert.Equal(t, 410, r.status, "%s %s: %s", c.method, c.path, r.body)
		assert.Equal(t, "sequence_retired", r.err(t).Code, "%s %s", c.method, c.path)
	}
	r := s.do(t, "GET", "/api/segment/get/old", nil)
	assert.Equal(t, 500, r.status)
	assert.Contains(t, r.body, "Result{id=-2, status=EXCEPTION}")
	assert.Contains(t, r.body, `"code":"sequence_retired"`)
	assert.True(t, s.view(t, "GET", "/v1/sequences/old", nil, 200).Retired)
	assert.True(t, s.view(t, "DELETE", "/v1/sequences/old", nil, 200).Retired, "retire is idempotent")

	r = s.do(t, "GET", "/db", nil)
	require.Equal(t, 200, r.status)
	assert.Contains(t, r.body, `"key":"old"`)
	assert.Contains(t, r.body, `"retired":true`)
	r = s.do(t, "GET", "/cache", nil)
	require.Equal(t, 200, r.status)
	assert.Contains(t, r.body, `"retired":true`)
	r = s.do(t, "GET", "/metrics", nil)
	require.Equal(t, 200, r.status)
	assert.Contains(t, r.body, `cqlseq_service_sequence_retired_requests_total{sequence="old"} 2`,
		"the requests for its values (HTTP next, Leaf's path); alter and create are not such")
}

// TestAdminScopes: listing wants an issue token, altering and retiring an
// admin token.
func TestAdminScopes(t *testing.T) {
	o := testOptions(nil)
	o.Tokens = tokens(t)
	s := start(t, o, nil)
	s.token = adminToken
	s.create(t, `{"name":"x"}`)
	for _, c := range []struct {
		method, path, body string
		wissue             int
	}{
		{"GET", "/v1/sequences", "", 200},
		{"PATCH", "/v1/sequences/x", `{"chunk_size":5}`, 403},
		{"DELETE", "/v1/sequences/x", "", 403},
	} {
		var b []byte
		if c.body != "" {
			b = []byte(c.body)
		}
		r, err := s.try(c.method, c.path, b, "")
		require.NoError(t, err)
		assert.Equal(t, 401, r.status, "%s %s without a token", c.method, c.path)
		r, err = s.try(c.method, c.path, b, issueToken)
		require.NoError(t, err)
		assert.Equal(t, c.wissue, r.status, "%s %s with an issue token: %s", c.method, c.path, r.body)
		r, err = s.try(c.method, c.path, b, adminToken)
		require.NoError(t, err)
		assert.Equal(t, 200, r.status, "%s %s with an admin token: %s", c.method, c.path, r.body)
	}
}

// TestRetireReachesOtherInstances: an instance that did not serve the
// retirement stops handing out values within ProbeInterval, though it
// holds a chunk.
func TestRetireReachesOtherInstances(t *testing.T) {
	st := mem.New(mem.Options{})
	a := start(t, testOptions(st), nil)
	b := start(t, testOptions(st), nil)
	a.create(t, `{"name":"shared","chunk_size":1000}`)
	b.ids(t, "/v1/sequences/shared/next")
	a.view(t, "DELETE", "/v1/sequences/shared", nil, 200)
	require.Eventually(t, func() bool {
		r := b.do(t, "POST", "/v1/sequences/shared/next", nil)
		return r.status == 410
	}, 5*time.Second, 10*time.Millisecond, "b stops within its probe interval")
}

// TestAlterRetireRaceUnique: three instances over one store (mem, bbolt)
// hand out a sequence's values to concurrent clients while its chunk size
// and adaptive flag are altered at random through one instance and it is
// finally retired through another: no value is handed out twice, and
// every failure is 410 sequence_retired after the retirement.
func TestAlterRetireRaceUnique(t *testing.T) {
	for _, kind := range []string{"mem", "bbolt"} {
		t.Run(kind, func(t *testing.T) {
			var st storage.Storage = mem.New(mem.Options{})
			if kind == "bbolt" {
				b, err := boltdb.Open(filepath.Join(t.TempDir(), "db"), boltdb.Options{})
				require.NoError(t, err)
				t.Cleanup(func() { _ = b.Close() })
				st = b
			}
			ctx := context.Background()
			var svcs []*idservice.Service
			for range 3 {
				o := testOptions(st)
				o.Galloc.MaxAttempts, o.Galloc.BackoffMax = 10_000, 5*time.Millisecond
				svc, err := idservice.New(ctx, o)
				require.NoError(t, err)
				t.Cleanup(func() { _ = svc.Close() })
				svcs = append(svcs, svc)
			}
			_, err := svcs[0].Create(ctx, "raced", idservice.Definition{Type: galloc.BigInt, Start: 1, Step: 1, ChunkSize: 7})
			require.NoError(t, err)
			var retired atomic.Bool
			var mu sync.Mutex
			var all []int64
			var wg sync.WaitGroup
			for c := range 9 {
				wg.Go(func() {
					for i := 0; ; i++ {
						ids, err := svcs[c%3].NextSequence(ctx, "raced", 1+(c+i)%13)
						if err != nil {
							if !errors.Is(err, galloc.ErrRetired) || !retired.Load() {
								t.Errorf("client %d: %v", c, err)
							}
							return
						}
						mu.Lock()
						all = append(all, ids...)
						mu.Unlock()
					}
				})
			}
			for i := range 30 {
				cs := int64(1 + i%17)
				ad := i%3 == 0
				_, err := svcs[1].Alter(ctx, "raced", idservice.Change{ChunkSize: &cs, Adaptive: &ad})
				require.NoError(t, err)
				time.Sleep(2 * time.Millisecond)
			}
			retired.Store(true)
			_, err = svcs[2].Retire(ctx, "raced")
			require.NoError(t, err)
			wg.Wait()
			require.NotEmpty(t, all)
			slices.Sort(all)
			for i := 1; i < len(all); i++ {
				require.NotEqual(t, all[i-1], all[i], "value %d handed out twice", all[i])
			}
			rec, _, err := galloc.ReadRecord(ctx, st, "raced")
			require.NoError(t, err)
			assert.LessOrEqual(t, uint64(all[len(all)-1]), rec.Allocated, "every value handed out was allocated")
			t.Logf("%s: %d values, %d chunks", kind, len(all), rec.Allocations)
		})
	}
}

// TestAdaptiveSequenceHTTP: an adaptive sequence's chunks double while
// each lasts under 15 minutes and halve after 30 (the service's galloc
// clock injected); GET and /cache show the instance's current step.
func TestAdaptiveSequenceHTTP(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	o := testOptions(nil)
	o.Galloc.Now = func() time.Time { return time.Unix(0, now.Load()) }
	o.Galloc.NoPrefetch = true
	s := start(t, o, nil)
	v := s.view(t, "POST", "/v1/sequences", []byte(`{"name":"ad","chunk_size":10,"adaptive":true}`), 201)
	assert.True(t, v.Adaptive)
	var steps []int64
	next := int64(1)
	for _, gap := range []time.Duration{time.Minute, time.Minute, 40 * time.Minute, time.Minute} {
		ids := s.ids(t, "/v1/sequences/ad/next")
		require.Equal(t, []int64{next}, ids)
		g := s.view(t, "GET", "/v1/sequences/ad", nil, 200)
		require.NotNil(t, g.Instance)
		steps = append(steps, g.Instance.ChunkSize)
		rest := g.Instance.Held
		require.Greater(t, rest, uint64(1))
		got := s.ids(t, fmt.Sprintf("/v1/sequences/ad/next?count=%d", rest-1))
		require.Equal(t, next+1, got[0])
		now.Add(int64(gap)) // before the chunk is used up: no allocation can come sooner
		got = s.ids(t, "/v1/sequences/ad/next")
		require.Equal(t, next+int64(rest), got[0])
		next += 1 + int64(rest)
	}
	assert.Equal(t, []int64{10, 20, 40, 20}, steps)
	r := s.do(t, "GET", "/cache", nil)
	assert.Contains(t, r.body, `"currentStep":20`)
}
