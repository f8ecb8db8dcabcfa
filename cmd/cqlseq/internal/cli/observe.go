package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cqlseq/cqlseq/isequencer"
)

// observer is one opened partition's isequencer.Metrics: it passes every
// observation on to the Prometheus collectors and keeps what the reports
// need. ready is closed by the first completed actualization.
type observer struct {
	next isequencer.Metrics

	ready     chan struct{}
	readyOnce sync.Once
	first     struct {
		events int
		took   time.Duration
	} // written before ready is closed

	busyActualizing, busyUnflushed atomic.Uint64
	flushes, flushedValues         atomic.Uint64
	maxBatch                       atomic.Uint64
}

var _ isequencer.Metrics = (*observer)(nil)

func newObserver(next isequencer.Metrics) *observer {
	return &observer{next: next, ready: make(chan struct{})}
}

func (o *observer) Transaction() { o.next.Transaction() }

func (o *observer) Busy(r isequencer.BusyReason) {
	o.next.Busy(r)
	switch r {
	case isequencer.BusyActualizing:
		o.busyActualizing.Add(1)
	case isequencer.BusyUnflushed:
		o.busyUnflushed.Add(1)
	}
}

func (o *observer) Unflushed(n int) { o.next.Unflushed(n) }

func (o *observer) Flushed(values int, took time.Duration) {
	o.next.Flushed(values, took)
	o.flushes.Add(1)
	o.flushedValues.Add(uint64(values))
	for {
		m := o.maxBatch.Load()
		if uint64(values) <= m || o.maxBatch.CompareAndSwap(m, uint64(values)) {
			break
		}
	}
}

func (o *observer) Actualized(events int, took time.Duration) {
	o.next.Actualized(events, took)
	o.readyOnce.Do(func() {
		o.first.events, o.first.took = events, took
		close(o.ready)
	})
}

func (o *observer) StorageError(op string) { o.next.StorageError(op) }

// waitReady waits for the first actualization, ctx or the timeout, and
// returns the events it replayed and how long it took.
func (o *observer) waitReady(ctx context.Context, timeout time.Duration) (events int, took time.Duration, err error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-o.ready:
		return o.first.events, o.first.took, nil
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	case <-t.C:
		return 0, 0, fmt.Errorf("not actualized within %v (is the store reachable? see --log-level warn)", timeout)
	}
}

// metricsServer serves /metrics until stop.
type metricsServer struct {
	srv  *http.Server
	addr string
	done chan struct{}
	err  error // Serve's error, read after done
}

func startMetricsServer(addr string, h http.Handler) (*metricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", h)
	m := &metricsServer{
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second},
		addr: ln.Addr().String(),
		done: make(chan struct{}),
	}
	go func() {
		defer close(m.done)
		if err := m.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			m.err = err
		}
	}()
	return m, nil
}

// stop shuts the server down (waiting up to 2 s for requests in flight)
// and waits for its goroutine.
func (m *metricsServer) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := m.srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, m.srv.Close())
	}
	<-m.done
	return errors.Join(err, m.err)
}
