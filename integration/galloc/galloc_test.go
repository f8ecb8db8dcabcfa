// Package galloc runs galloc and timeshard against the real test cluster:
// several processes (each its own session) drawing from one sequence, the
// batched generator's pending-batch scenario, one LWT per chunk counted by
// the storage metrics, and timeshard's node leases.
package galloc

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/galloc"
	"github.com/cqlseq/cqlseq/galloc/galloccheck"
	"github.com/cqlseq/cqlseq/integration/itest"
	"github.com/cqlseq/cqlseq/metrics"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/timeshard"
)

var (
	flagIDs   = flag.Int("galloc.ids", 1_000_000, "IDs drawn by TestProcessesDrawOneSequence")
	flagChunk = flag.Int64("galloc.chunk", 10_000, "chunk size of TestProcessesDrawOneSequence")
)

func TestMain(m *testing.M) { os.Exit(itest.Main(m)) }

// process is one process of a test: its own session, instrumented, and its
// own Sequence.
type process struct {
	mc  *metrics.Collectors
	st  storage.Storage
	seq *galloc.Sequence
}

func openProcess(t *testing.T, name string, o galloc.Options) *process {
	t.Helper()
	mc, err := metrics.New(prometheus.NewRegistry())
	require.NoError(t, err)
	p := &process{mc: mc, st: mc.Storage(itest.OpenStore(t))}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p.seq, err = galloc.Open(ctx, p.st, name, o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.seq.Close() })
	return p
}

func (p *process) lwts(t *testing.T) uint64 {
	n, err := p.mc.LWTCalls()
	require.NoError(t, err)
	return n
}

// TestProcessesDrawOneSequence: 4 processes x 16 goroutines draw
// -galloc.ids IDs from one sequence: all unique, each goroutine's IDs and
// each process's chunks increasing, at most 2 chunks per process unused,
// and one LWT per chunk (plus one per lost swap and the opening insert).
func TestProcessesDrawOneSequence(t *testing.T) {
	itest.NoLeaks(t)
	const procs, workers = 4, 16
	name := itest.UniqueName("many")
	chunk := *flagChunk
	ps := make([]*process, procs)
	for i := range ps {
		ps[i] = openProcess(t, name, galloc.Options{ChunkSize: chunk, Process: fmt.Sprintf("itest-p%d", i)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	per := *flagIDs / (procs * workers)
	recs := make([]galloccheck.Recorder, procs*workers)
	began := time.Now()
	var wg sync.WaitGroup
	for w := range recs {
		wg.Go(func() {
			seq := ps[w%procs].seq
			for range per {
				v, err := seq.Next(ctx)
				if err != nil {
					t.Error(err)
					break
				}
				recs[w].Add(v)
			}
		})
	}
	wg.Wait()
	took := time.Since(began)
	for w := range recs {
		require.Equal(t, uint64(per), recs[w].IDs(), "goroutine %d", w)
		require.True(t, recs[w].Monotonic(), "goroutine %d: IDs increase", w)
	}
	rep := galloccheck.Check(recs)
	require.Zero(t, rep.Duplicates, "every ID unique; handed out twice: %v", rep.Listed)
	ids := rep.IDs

	var fetches, held uint64
	for i, p := range ps {
		require.NoError(t, p.seq.Close()) // Held final: no allocation in flight
		st := p.seq.Stats()
		cs := p.seq.Chunks()
		assert.True(t, galloccheck.ChunksIncrease(cs), "process %d: chunks increase", i)
		assert.LessOrEqual(t, st.Held, uint64(2*chunk), "process %d: at most 2 chunks unused", i)
		assert.Equal(t, uint64(len(cs)), st.Fetches)
		if st.UnknownOutcomes == 0 {
			assert.Equal(t, 1+st.Fetches+st.Conflicts+st.Abandoned, p.lwts(t), "process %d: one LWT per chunk, per lost swap, per allocation Close cut short, and the opening insert", i)
		}
		fetches += st.Fetches
		held += st.Held
		t.Logf("process %d: %d IDs, %d chunks, %d conflicts, %d unknown outcomes, %d abandoned at close, %d waits, %d held, %d LWTs",
			i, st.Issued, st.Fetches, st.Conflicts, st.UnknownOutcomes, st.Abandoned, st.Waits, st.Held, p.lwts(t))
	}
	rec, ok, err := galloc.ReadRecord(ctx, ps[0].st, name)
	require.NoError(t, err)
	require.True(t, ok)
	assert.GreaterOrEqual(t, rec.Allocations, fetches, "allocations Close cut short may have been applied")
	wasted := rec.Allocated - ids
	assert.GreaterOrEqual(t, wasted, held, "values held at the end are never handed out")
	assert.LessOrEqual(t, wasted, uint64(procs*2)*uint64(chunk), "at most 2 chunks per process unused")
	t.Logf("%d IDs in %v (%.0f IDs/s), %d chunks of %d, %d values wasted", ids, took, float64(ids)/took.Seconds(), rec.Allocations, chunk, wasted)
}

// TestPendingBatchScenario is the batched generator's scenario on the real
// cluster: batch (chunk) size 10, 100 requests at once. Every request that
// arrives while an allocation is pending waits for it: the values are
// exactly 1..100, from 10 chunks, one LWT each.
func TestPendingBatchScenario(t *testing.T) {
	for _, prefetch := range []bool{false, true} {
		t.Run(fmt.Sprintf("prefetch=%v", prefetch), func(t *testing.T) {
			itest.NoLeaks(t)
			p := openProcess(t, itest.UniqueName("batch"), galloc.Options{ChunkSize: 10, NoPrefetch: !prefetch})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			got := make([]int64, 100)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range got {
				wg.Go(func() {
					<-start
					v, err := p.seq.Next(ctx)
					assert.NoError(t, err)
					got[i] = v
				})
			}
			close(start)
			wg.Wait()
			require.NoError(t, p.seq.Close())
			slices.Sort(got)
			for i, v := range got {
				require.Equal(t, int64(i+1), v, "values 1..100, every chunk used to its end")
			}
			st := p.seq.Stats()
			if prefetch {
				assert.LessOrEqual(t, st.Fetches, uint64(12), "10 chunks used, at most 2 held")
			} else {
				assert.Equal(t, uint64(10), st.Fetches)
			}
			assert.Equal(t, 1+st.Fetches+st.Conflicts+st.Abandoned, p.lwts(t), "one LWT per chunk (and the opening insert)")
			assert.Zero(t, st.Conflicts)
		})
	}
}

// TestTimeshardNodesOnCassandra: generators lease distinct node IDs through
// Cassandra's LWTs and TTLs; a closed generator's node is taken again and
// its IDs continue after the old ones.
func TestTimeshardNodesOnCassandra(t *testing.T) {
	itest.NoLeaks(t)
	st := itest.OpenStore(t)
	name := itest.UniqueName("ts")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := timeshard.Options{FirstNode: 0, LeaseDuration: 5 * time.Second, Skew: 1500 * time.Millisecond}
	a, err := timeshard.Open(ctx, st, name, o)
	require.NoError(t, err)
	b, err := timeshard.Open(ctx, st, name, o)
	require.NoError(t, err)
	assert.Equal(t, uint32(0), a.Node())
	assert.Equal(t, uint32(1), b.Node())
	seen := map[int64]bool{}
	var lastA int64
	for range 20_000 {
		for _, g := range []*timeshard.Generator{a, b} {
			id, err := g.Next(ctx)
			require.NoError(t, err)
			require.False(t, seen[id])
			seen[id] = true
			if g == a {
				lastA = id
			}
		}
	}
	require.NoError(t, a.Close())
	c, err := timeshard.Open(ctx, st, name, o)
	require.NoError(t, err)
	defer c.Close()
	assert.Equal(t, uint32(0), c.Node(), "the released node is free again")
	id, err := c.Next(ctx)
	require.NoError(t, err)
	assert.Greater(t, id, lastA, "the next holder continues after the last ID")
	require.NoError(t, b.Close())
}
