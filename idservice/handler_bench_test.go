package idservice_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cqlseq/cqlseq/idservice"
	"github.com/cqlseq/cqlseq/storage/mem"
)

// BenchmarkHandler: one request through Service.Handler, in process (no
// network, no client), on the routes make bench-service drives: the
// service's own cost per request, which decides its rate beside the
// trivial handler on a machine whose cores the load client shares. The
// trivial case is the bench's trivial handler, for comparison.
func BenchmarkHandler(b *testing.B) {
	st := mem.New(mem.Options{})
	defer st.Close()
	svc, err := idservice.New(context.Background(), testOptions(st))
	if err != nil {
		b.Fatal(err)
	}
	defer svc.Close()
	h := svc.Handler()
	for _, name := range []string{"bench", "leafbench"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/sequences",
			strings.NewReader(`{"name":"`+name+`","type":"bigint","chunk_size":1000000}`)))
		if rec.Code != http.StatusCreated {
			b.Fatalf("creating %s: %d %s", name, rec.Code, rec.Body)
		}
	}
	body := []byte("1234567890123456789")
	trivial := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain;charset=UTF-8")
		w.Header().Set("Content-Length", "19")
		_, _ = w.Write(body)
	})
	for _, c := range []struct {
		name, method, path string
		h                  http.Handler
	}{
		{"trivial", http.MethodGet, "/", trivial},
		{"galloc", http.MethodPost, "/v1/sequences/bench/next", h},
		{"timeshard", http.MethodPost, "/v1/timeshard/63/next", h},
		{"leaf", http.MethodGet, "/api/segment/get/leafbench", h},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			req := httptest.NewRequest(c.method, c.path, nil)
			w := &discardWriter{header: http.Header{}}
			for b.Loop() {
				clear(w.header)
				w.status = 0
				c.h.ServeHTTP(w, req)
				if w.status != http.StatusOK {
					b.Fatalf("%s %s: %d", c.method, c.path, w.status)
				}
			}
		})
	}
}

// discardWriter is an http.ResponseWriter that keeps the status only.
type discardWriter struct {
	header http.Header
	status int
}

func (w *discardWriter) Header() http.Header { return w.header }

func (w *discardWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return len(b), nil
}

func (w *discardWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}
