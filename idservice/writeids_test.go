package idservice

import (
	"math"
	"net/http/httptest"
	"testing"
)

// TestWriteIDsMatchesWriteJSON: writeIDs answers the next routes byte for
// byte as writeJSON(idsBody) did, headers included.
func TestWriteIDsMatchesWriteJSON(t *testing.T) {
	many := make([]int64, MaxCount)
	for i := range many {
		many[i] = int64(i)*7_919_000_000_011 + 1
	}
	for _, ids := range [][]int64{{}, {0}, {1}, {-5, 7}, {math.MaxInt64, math.MinInt64, 9_007_199_254_740_991}, many} {
		want, got := httptest.NewRecorder(), httptest.NewRecorder()
		writeJSON(want, 200, idsBody{IDs: ids})
		writeIDs(got, ids)
		if got.Code != want.Code || got.Body.String() != want.Body.String() {
			t.Fatalf("%d ids: writeIDs %d %q, writeJSON %d %q", len(ids), got.Code, got.Body.String(), want.Code, want.Body.String())
		}
		for _, h := range []string{"Content-Type", "Content-Length"} {
			if g, w := got.Header().Get(h), want.Header().Get(h); g != w {
				t.Fatalf("%d ids: %s %q, writeJSON's %q", len(ids), h, g, w)
			}
		}
	}
	rec := httptest.NewRecorder()
	writeIDs(rec, nil)
	if rec.Body.String() != "{\"ids\":[]}\n" {
		t.Fatalf("nil ids: %q", rec.Body.String())
	}
}

// BenchmarkWriteIDs: a batch of 1,000 IDs answered by writeIDs and, for
// comparison, by writeJSON (encoding/json).
func BenchmarkWriteIDs(b *testing.B) {
	ids := make([]int64, 1000)
	for i := range ids {
		ids[i] = 290_000_000_000_000_000 + int64(i)
	}
	b.Run("writeIDs", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			writeIDs(httptest.NewRecorder(), ids)
		}
	})
	b.Run("writeJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			writeJSON(httptest.NewRecorder(), 200, idsBody{IDs: ids})
		}
	})
}
