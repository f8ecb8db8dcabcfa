package galloccheck_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cqlseq/cqlseq/galloc"
	"github.com/cqlseq/cqlseq/galloc/galloccheck"
	"github.com/cqlseq/cqlseq/storage/mem"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type run = galloccheck.Run

// record returns a Recorder that received ids, in order.
func record(ids ...int64) galloccheck.Recorder {
	var r galloccheck.Recorder
	for _, id := range ids {
		r.Add(id)
	}
	return r
}

// span returns the IDs first..last.
func span(first, last int64) []int64 {
	var ids []int64
	for v := first; v <= last; v++ {
		ids = append(ids, v)
	}
	return ids
}

// TestRecorderKeepsRunsInBoundedMemory: IDs received one after the other
// are kept as runs (one per chunk while they increase), and the duplicate
// count over all runs is the number of IDs covered twice.
func TestRecorderKeepsRunsInBoundedMemory(t *testing.T) {
	a := record(append(span(1, 1000), span(2001, 3000)...)...)
	assert.Equal(t, []run{{1, 1000}, {2001, 3000}}, a.Runs(), "two chunks: two runs")
	assert.True(t, a.Monotonic())
	assert.Equal(t, uint64(2000), a.IDs())

	b := record(span(1001, 2000)...)
	rep := galloccheck.Check([]galloccheck.Recorder{a, b})
	assert.Equal(t, galloccheck.Report{IDs: 3000, Monotonic: true}, rep)
	assert.True(t, rep.OK())

	b.Add(2990) // two of a's IDs
	b.Add(2991)
	assert.True(t, b.Monotonic())
	rep = galloccheck.Check([]galloccheck.Recorder{a, b})
	assert.Equal(t, galloccheck.Report{IDs: 3002, Duplicates: 2, Listed: []run{{2990, 2991}}, Monotonic: true}, rep)
	b.Add(1500) // one of its own, going back
	assert.False(t, b.Monotonic())
	rep = galloccheck.Check([]galloccheck.Recorder{a, b})
	assert.Equal(t, galloccheck.Report{IDs: 3003, Duplicates: 3, Listed: []run{{1500, 1500}, {2990, 2991}}}, rep)
	assert.False(t, rep.OK())
	assert.Equal(t, []run{{1, 1000}, {2001, 3000}}, a.Runs(), "Check leaves the runs as they were")
}

func TestDuplicatesCountsEveryIDCoveredAgain(t *testing.T) {
	for _, c := range []struct {
		name    string
		runs    []run
		wn      uint64
		wlisted []run
	}{
		{"none", nil, 0, nil},
		{"disjoint, out of order", []run{{11, 20}, {1, 10}, {21, 21}}, 0, nil},
		{"the same chunk twice", []run{{1, 1000}, {1, 1000}}, 1000, []run{{1, 1000}}},
		{"inside and at the end", []run{{1, 10}, {5, 6}, {10, 10}}, 3, []run{{5, 6}, {10, 10}}},
		{"three times", []run{{7, 7}, {7, 7}, {7, 7}}, 2, []run{{7, 7}, {7, 7}}},
		{"the extremes", []run{{-1 << 63, 1<<63 - 1}, {-1 << 63, -1 << 63}, {1<<63 - 1, 1<<63 - 1}}, 2, []run{{-1 << 63, -1 << 63}, {1<<63 - 1, 1<<63 - 1}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			n, listed := galloccheck.Duplicates(c.runs)
			assert.Equal(t, c.wn, n)
			assert.Equal(t, c.wlisted, listed)
		})
	}

	var many []run
	for v := range int64(2 * galloccheck.MaxListed) {
		many = append(many, run{10 * v, 10 * v}, run{10 * v, 10 * v})
	}
	n, listed := galloccheck.Duplicates(many)
	assert.Equal(t, uint64(2*galloccheck.MaxListed), n)
	assert.Len(t, listed, galloccheck.MaxListed, "the others are only counted")
}

func TestChunksIncrease(t *testing.T) {
	assert.True(t, galloccheck.ChunksIncrease(nil))
	assert.True(t, galloccheck.ChunksIncrease([]galloc.Chunk{{First: 1, Count: 10}, {First: 31, Count: 10}, {First: 11, Count: 10}}[:2]))
	assert.False(t, galloccheck.ChunksIncrease([]galloc.Chunk{{First: 1, Count: 10}, {First: 31, Count: 10}, {First: 11, Count: 10}}))
}

// draw runs procs galloc Sequences on one store, workers goroutines each,
// each drawing per IDs into its own Recorder, and returns the Recorders
// and each process's chunks.
func draw(t *testing.T, procs, workers, per int) ([]galloccheck.Recorder, [][]galloc.Chunk) {
	t.Helper()
	st := mem.New(mem.Options{})
	t.Cleanup(func() { _ = st.Close() })
	ctx := context.Background()
	seqs := make([]*galloc.Sequence, procs)
	for p := range seqs {
		s, err := galloc.Open(ctx, st, "checked", galloc.Options{ChunkSize: 100, BackoffBase: time.Microsecond, BackoffMax: time.Millisecond,
			Logger: slog.New(slog.DiscardHandler)})
		require.NoError(t, err)
		seqs[p] = s
	}
	recs := make([]galloccheck.Recorder, procs*workers)
	var wg sync.WaitGroup
	for i := range recs {
		wg.Go(func() {
			for range per {
				v, err := seqs[i%procs].Next(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				recs[i].Add(v)
			}
		})
	}
	wg.Wait()
	chunks := make([][]galloc.Chunk, procs)
	for p, s := range seqs {
		require.NoError(t, s.Close())
		chunks[p] = s.Chunks()
	}
	return recs, chunks
}

// TestCheckPassesARealRunAndFindsAPlantedDuplicate: the IDs of 3
// processes x 4 goroutines of one sequence pass; one of them handed out
// again, to another goroutine, is reported as a duplicate (and listed),
// the goroutines' IDs still increasing.
func TestCheckPassesARealRunAndFindsAPlantedDuplicate(t *testing.T) {
	const procs, workers, per = 3, 4, 1000
	recs, chunks := draw(t, procs, workers, per)
	for p, cs := range chunks {
		assert.True(t, galloccheck.ChunksIncrease(cs), "process %d", p)
	}
	rep := galloccheck.Check(recs)
	require.True(t, rep.OK(), "%+v", rep)
	assert.Equal(t, uint64(procs*workers*per), rep.IDs)

	// The goroutine whose last ID is the smallest receives the largest
	// last ID of another: still increasing, handed out twice.
	lastOf := func(i int) int64 { rs := recs[i].Runs(); return rs[len(rs)-1].Last }
	low, high := 0, 0
	for i := range recs {
		if lastOf(i) < lastOf(low) {
			low = i
		}
		if lastOf(i) > lastOf(high) {
			high = i
		}
	}
	late := lastOf(high)
	recs[low].Add(late)
	rep = galloccheck.Check(recs)
	assert.Equal(t, galloccheck.Report{IDs: procs*workers*per + 1, Duplicates: 1, Listed: []run{{late, late}}, Monotonic: true}, rep)
	assert.False(t, rep.OK())
}

// TestCheckFindsAPlantedNonMonotonicSequence: a goroutine that receives an
// ID below one it received before is reported, whether the ID is new or
// its own again.
func TestCheckFindsAPlantedNonMonotonicSequence(t *testing.T) {
	recs := []galloccheck.Recorder{record(1, 2, 3, 10, 11), record(4, 5, 6)}
	require.True(t, galloccheck.Check(recs).OK())

	recs[0].Add(8) // below 11, handed out to no one
	assert.False(t, recs[0].Monotonic())
	assert.True(t, recs[1].Monotonic())
	assert.Equal(t, galloccheck.Report{IDs: 9, Monotonic: false}, galloccheck.Check(recs), "not increasing, still unique")

	again := []galloccheck.Recorder{record(1, 2, 2, 3)}
	assert.False(t, again[0].Monotonic(), "the same ID twice does not increase")
	assert.Equal(t, galloccheck.Report{IDs: 4, Duplicates: 1, Listed: []run{{2, 2}}}, galloccheck.Check(again))
}
