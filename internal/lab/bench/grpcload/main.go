// Command grpcload is make bench-service's gRPC load generator (vegeta
// speaks no gRPC): unary calls of the ID service's NextSequence or
// NextTimeshard (idservice/proto) with connect.WithGRPC over h2c, from a
// fixed number of workers sharing -conns HTTP/2 connections, for a fixed
// duration, either as fast as they go (-rate 0: each worker sends its next
// call when the last is answered) or at a fixed rate (-rate R: call i is
// due at start + i/R, taken by the next free worker; a call sent late is
// still sent, and its latency counted from when it was sent, as vegeta
// counts).
//
// It prints one line (calls, req/s, p50 and p99 latency in µs) and, with
// -out, writes it as JSON: {"requests", "errors", "seconds", "throughput",
// "p50_us", "p99_us", "late"}. Throughput is the answered calls over the
// run's wall time. It exits 1 if any call failed (the first errors are
// printed) or none was made.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/cqlseq/cqlseq/idservice/gen/idservicev1"
	"github.com/cqlseq/cqlseq/idservice/gen/idservicev1/idservicev1connect"
)

// config is the command line.
type config struct {
	url      string
	method   string // sequence or timeshard
	name     string // the sequence, or the layout
	count    int
	workers  int
	conns    int
	rate     float64
	duration time.Duration
	timeout  time.Duration
	token    string
	out      string
}

// result is a run's outcome (-out's JSON).
type result struct {
	Requests   int     `json:"requests"`
	Errors     int     `json:"errors"`
	Seconds    float64 `json:"seconds"`
	Throughput float64 `json:"throughput"`
	P50us      float64 `json:"p50_us"`
	P99us      float64 `json:"p99_us"`
	Late       int     `json:"late"` // fixed rate: calls sent more than 1 ms after they were due
}

func main() {
	var c config
	flag.StringVar(&c.url, "url", "http://127.0.0.1:18080", "the server's base URL (http: h2c)")
	flag.StringVar(&c.method, "method", "sequence", "sequence (NextSequence) or timeshard (NextTimeshard)")
	flag.StringVar(&c.name, "name", "bench", "the sequence's name (sequence) or the layout (timeshard)")
	flag.IntVar(&c.count, "count", 1, "IDs a call (the request's count)")
	flag.IntVar(&c.workers, "workers", 16, "concurrent callers")
	flag.IntVar(&c.conns, "conns", 1, "HTTP/2 connections the workers share (worker i uses connection i mod conns)")
	flag.Float64Var(&c.rate, "rate", 0, "calls per second; 0: as fast as the workers go")
	flag.DurationVar(&c.duration, "duration", 10*time.Second, "how long calls are sent")
	flag.DurationVar(&c.timeout, "timeout", 10*time.Second, "a call's timeout")
	flag.StringVar(&c.token, "token", "", "bearer token sent with every call")
	flag.StringVar(&c.out, "out", "", "write the result as JSON to this file")
	flag.Parse()
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "grpcload:", err)
		os.Exit(1)
	}
}

func run(c config) error {
	if c.workers < 1 || c.conns < 1 || c.count < 1 || c.rate < 0 || c.duration <= 0 {
		return errors.New("want -workers, -conns, -count >= 1, -rate >= 0, -duration > 0")
	}
	call, closeIdle, err := caller(c)
	if err != nil {
		return err
	}
	defer closeIdle()

	var (
		slot     atomic.Int64 // fixed rate: the next call's index
		late     atomic.Int64
		mu       sync.Mutex
		errs     []error
		nerr     int
		lat      = make([][]time.Duration, c.workers)
		interval time.Duration
	)
	if c.rate > 0 {
		interval = time.Duration(float64(time.Second) / c.rate)
	}
	began := time.Now()
	end := began.Add(c.duration)
	var wg sync.WaitGroup
	for w := range c.workers {
		wg.Go(func() {
			ls := make([]time.Duration, 0, 1024)
			defer func() { lat[w] = ls }()
			for {
				if interval > 0 {
					due := began.Add(time.Duration(slot.Add(1)-1) * interval)
					if !due.Before(end) {
						return
					}
					if d := time.Until(due); d > 0 {
						time.Sleep(d)
					} else if d < -time.Millisecond {
						late.Add(1)
					}
				} else if !time.Now().Before(end) {
					return
				}
				t0 := time.Now()
				err := call(w)
				took := time.Since(t0)
				if err != nil {
					mu.Lock()
					if nerr++; len(errs) < 3 {
						errs = append(errs, err)
					}
					mu.Unlock()
					continue
				}
				ls = append(ls, took)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(began)

	var all []time.Duration
	for _, ls := range lat {
		all = append(all, ls...)
	}
	slices.Sort(all)
	r := result{Requests: len(all) + nerr, Errors: nerr, Seconds: elapsed.Seconds(),
		Throughput: float64(len(all)) / elapsed.Seconds(), P50us: quantileUS(all, 0.50), P99us: quantileUS(all, 0.99), Late: int(late.Load())}
	mode := "max rate"
	if c.rate > 0 {
		mode = fmt.Sprintf("rate %.0f/s", c.rate)
	}
	fmt.Printf("grpcload: %s %s count=%d workers=%d conns=%d %s: %d calls, %d errors, %.0f req/s, p50 %.0f µs, p99 %.0f µs, late %d\n",
		c.method, c.name, c.count, c.workers, c.conns, mode, r.Requests, r.Errors, r.Throughput, r.P50us, r.P99us, r.Late)
	if c.out != "" {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		if err := os.WriteFile(c.out, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	switch {
	case nerr > 0:
		return fmt.Errorf("%d of %d calls failed, the first: %w", nerr, r.Requests, errors.Join(errs...))
	case len(all) == 0:
		return errors.New("no call was made")
	}
	return nil
}

// caller returns a function making worker w's call, and one closing the
// connections.
func caller(c config) (call func(w int) error, closeIdle func(), err error) {
	clients := make([]idservicev1connect.IDServiceClient, c.conns)
	transports := make([]*http.Transport, c.conns)
	for i := range clients {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		transports[i] = &http.Transport{Protocols: &p}
		clients[i] = idservicev1connect.NewIDServiceClient(&http.Client{Transport: transports[i]}, c.url, connect.WithGRPC())
	}
	closeIdle = func() {
		for _, t := range transports {
			t.CloseIdleConnections()
		}
	}
	n := int32(c.count)
	check := func(ids []int64) error {
		if len(ids) != c.count {
			return fmt.Errorf("answered %d IDs, want %d", len(ids), c.count)
		}
		return nil
	}
	switch c.method {
	case "sequence":
		call = func(w int) error {
			ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
			defer cancel()
			req := connect.NewRequest(&v1.NextSequenceRequest{Name: c.name, Count: &n})
			if c.token != "" {
				req.Header().Set("Authorization", "Bearer "+c.token)
			}
			res, err := clients[w%c.conns].NextSequence(ctx, req)
			if err != nil {
				return err
			}
			return check(res.Msg.GetIds())
		}
	case "timeshard":
		call = func(w int) error {
			ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
			defer cancel()
			req := connect.NewRequest(&v1.NextTimeshardRequest{Layout: c.name, Count: &n})
			if c.token != "" {
				req.Header().Set("Authorization", "Bearer "+c.token)
			}
			res, err := clients[w%c.conns].NextTimeshard(ctx, req)
			if err != nil {
				return err
			}
			return check(res.Msg.GetIds())
		}
	default:
		return nil, nil, fmt.Errorf("-method %q: want sequence or timeshard", c.method)
	}
	return call, closeIdle, nil
}

// quantileUS is the q quantile of sorted (nearest rank), in µs.
func quantileUS(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	i = min(max(i, 0), len(sorted)-1)
	return float64(sorted[i]) / float64(time.Microsecond)
}
