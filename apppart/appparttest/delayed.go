package appparttest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cqlseq/cqlseq/apppart"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage"
)

// DelayedStorage emulates a remote store's round trip: each call waits
// Delay, then runs on the wrapped store. It offers none of the wrapped
// store's optional capabilities (it is not a storage.Wrapper), as a CQL
// store offers none, and counts its calls and how long their waits took.
// A wait ends as a socket's answer would (rtt_linux.go): on a loaded
// machine the round trip the flow meets is still longer than Delay.
type DelayedStorage struct {
	inner  storage.Storage
	delay  time.Duration
	calls  atomic.Int64
	waited atomic.Int64 // nanoseconds, the waits that ran out
	waits  atomic.Int64
}

// NewDelayedStorage wraps inner.
func NewDelayedStorage(inner storage.Storage, delay time.Duration) *DelayedStorage {
	return &DelayedStorage{inner: inner, delay: delay}
}

// Calls returns the number of calls made so far.
func (d *DelayedStorage) Calls() int64 { return d.calls.Load() }

// Waits returns the number of waits that ran out so far and their total
// duration.
func (d *DelayedStorage) Waits() (int64, time.Duration) {
	return d.waits.Load(), time.Duration(d.waited.Load())
}

func (d *DelayedStorage) wait(ctx context.Context) error {
	d.calls.Add(1)
	began := time.Now()
	if err := sleepRoundTrip(ctx, d.delay); err != nil {
		return err
	}
	d.waited.Add(int64(time.Since(began)))
	d.waits.Add(1)
	return nil
}

func (d *DelayedStorage) Get(ctx context.Context, pKey, cCols []byte) ([]byte, bool, error) {
	if err := d.wait(ctx); err != nil {
		return nil, false, err
	}
	return d.inner.Get(ctx, pKey, cCols)
}

func (d *DelayedStorage) GetBatch(ctx context.Context, pKey []byte, items []storage.GetItem) error {
	if err := d.wait(ctx); err != nil {
		return err
	}
	return d.inner.GetBatch(ctx, pKey, items)
}

func (d *DelayedStorage) Put(ctx context.Context, pKey, cCols, value []byte) error {
	if err := d.wait(ctx); err != nil {
		return err
	}
	return d.inner.Put(ctx, pKey, cCols, value)
}

func (d *DelayedStorage) PutBatch(ctx context.Context, rows []storage.Row) error {
	if err := d.wait(ctx); err != nil {
		return err
	}
	return d.inner.PutBatch(ctx, rows)
}

func (d *DelayedStorage) Read(ctx context.Context, pKey, fromCCols, toCCols []byte, cb func(cCols, value []byte) error) error {
	if err := d.wait(ctx); err != nil {
		return err
	}
	return d.inner.Read(ctx, pKey, fromCCols, toCCols, cb)
}

func (d *DelayedStorage) ReadPartitions(ctx context.Context, pKeys [][]byte, fromCCols, toCCols []byte, cb func(pKey, cCols, value []byte) error) error {
	if err := d.wait(ctx); err != nil {
		return err
	}
	return d.inner.ReadPartitions(ctx, pKeys, fromCCols, toCCols, cb)
}

func (d *DelayedStorage) InsertIfNotExists(ctx context.Context, pKey, cCols, value []byte, ttl time.Duration) (bool, error) {
	if err := d.wait(ctx); err != nil {
		return false, err
	}
	return d.inner.InsertIfNotExists(ctx, pKey, cCols, value, ttl)
}

func (d *DelayedStorage) CompareAndSwap(ctx context.Context, pKey, cCols, oldValue, newValue []byte, ttl time.Duration) (bool, error) {
	if err := d.wait(ctx); err != nil {
		return false, err
	}
	return d.inner.CompareAndSwap(ctx, pKey, cCols, oldValue, newValue, ttl)
}

func (d *DelayedStorage) CompareAndDelete(ctx context.Context, pKey, cCols, expected []byte) (bool, error) {
	if err := d.wait(ctx); err != nil {
		return false, err
	}
	return d.inner.CompareAndDelete(ctx, pKey, cCols, expected)
}

func (d *DelayedStorage) ApplyBatchIf(ctx context.Context, pKey []byte, conds []storage.Condition, rows []storage.Row) (bool, error) {
	if err := d.wait(ctx); err != nil {
		return false, err
	}
	return d.inner.ApplyBatchIf(ctx, pKey, conds, rows)
}

func (d *DelayedStorage) QueryTTL(ctx context.Context, pKey, cCols []byte) (time.Duration, bool, error) {
	if err := d.wait(ctx); err != nil {
		return 0, false, err
	}
	return d.inner.QueryTTL(ctx, pKey, cCols)
}

// Close closes nothing: the wrapped store is the caller's.
func (d *DelayedStorage) Close() error { return nil }

// DelayedClients is the number of clients of RunDelayedFlowBenchmarks'
// partition in the runs named without a client count.
const DelayedClients = 16

// delayedWorkspaces are the workspaces of RunDelayedFlowBenchmarks' warm
// runs: the clients start spread over them (clientStart).
const delayedWorkspaces = 200

// DelayedScaleClients are the client counts RunDelayedFlowBenchmarks also
// runs each mode with (named .../<clients>), to show how the flow scales
// with its clients.
var DelayedScaleClients = []int{64, 128, 256}

// RunDelayedFlowBenchmarks runs the flow on one partition over st wrapped
// in a DelayedStorage of delay, in every mode, with a warm cache (200
// workspaces, all cached, the clients spread over them) and a cold one (10,000 workspaces, a cache of 8:
// every command misses): with DelayedClients clients (Delayed/warm/trust2)
// and with each of DelayedScaleClients (Delayed/warm/trust2/64); and, to
// compare with, each mode with DelayedClients clients and
// OpenOptions.MaxGroupEvents 1 (every event written alone, the commands
// still overlapping); and a lone client per mode (its latency against the
// delay). Besides cmds/s and latency it reports limit, the fraction of the
// closed-loop limit clients/delay; rtt-µs, the store's mean round trip as
// measured (delay and the wake-up's lateness), and limit-rtt, the fraction
// of clients/rtt; and rt/op, the store's calls per command.
func RunDelayedFlowBenchmarks(b *testing.B, st storage.Storage, delay time.Duration) {
	type flow struct {
		mode     plog.Mode
		maxGroup int
		clients  int
		name     string
	}
	modes := []plog.Mode{plog.ModeTrust2, plog.ModeTrust1, plog.ModeTrust0, plog.ModeFenced}
	var flows []flow
	for _, m := range modes {
		flows = append(flows, flow{m, 0, DelayedClients, m.String()}, flow{m, 1, DelayedClients, m.String() + "/maxgroup1"})
	}
	for _, clients := range DelayedScaleClients {
		name := "%s/%d"
		if clients > delayedWorkspaces {
			name += "-more-clients-than-workspaces" // several clients share a workspace
		}
		for _, m := range modes {
			flows = append(flows, flow{m, 0, clients, fmt.Sprintf(name, m, clients)})
		}
	}
	// A lone client, warm: its latency (p50) against the delay, the
	// round trips its command waits for.
	for _, m := range modes {
		b.Run("Delayed/lone/"+m.String(), func(b *testing.B) {
			d := NewDelayedStorage(st, delay)
			var calls0 int64
			runFlowWith(b, flowRun{st: d, mode: m, parts: 1, clients: 1, workspaces: 200, warm: true,
				started: func() { calls0 = d.Calls() }})
			b.ReportMetric(float64(d.Calls()-calls0)/float64(b.N), "rt/op")
		})
	}
	for _, cache := range []string{"warm", "cold"} {
		for _, f := range flows {
			b.Run(fmt.Sprintf("Delayed/%s/%s", cache, f.name), func(b *testing.B) {
				d := NewDelayedStorage(st, delay)
				r := flowRun{st: d, mode: f.mode, parts: 1, clients: f.clients, workspaces: delayedWorkspaces, warm: true}
				cacheSize := 0
				if cache == "cold" {
					r.workspaces, r.warm = 10_000, false
					cacheSize = 8 * 2 // 8 workspaces of 2 sequences
				}
				r.tune = func(o *apppart.OpenOptions) {
					o.MaxGroupEvents = f.maxGroup
					if cacheSize > 0 {
						o.Sequencer.LRUCacheSize = cacheSize
					}
				}
				var calls0, waits0 int64
				var waited0 time.Duration
				r.started = func() {
					calls0 = d.Calls()
					waits0, waited0 = d.Waits()
				}
				runFlowWith(b, r)
				b.ReportMetric(float64(d.Calls()-calls0)/float64(b.N), "rt/op")
				limit := float64(f.clients) / delay.Seconds()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/limit, "limit")
				// The same against the round trip the flow met: the
				// store's mean wait in the timed part.
				if waits, waited := d.Waits(); waits > waits0 {
					rtt := (waited - waited0) / time.Duration(waits-waits0)
					b.ReportMetric(float64(rtt.Microseconds()), "rtt-µs")
					b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/(float64(f.clients)/rtt.Seconds()), "limit-rtt")
				}
			})
		}
	}
}
