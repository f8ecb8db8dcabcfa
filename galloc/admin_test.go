package galloc_test

import (
	"context"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/galloc"
	"github.com/cqlseq/cqlseq/galloc/galloccheck"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/boltdb"
	"github.com/cqlseq/cqlseq/storage/mem"
)

// TestRecordLayoutGoldenFlags pins version 2 of the record (flags) and
// the catalog's keys, and that a record without flags stays version 1.
func TestRecordLayoutGoldenFlags(t *testing.T) {
	assert.Equal(t, "00000010", hex.EncodeToString(galloc.CatalogPKey()))
	r := galloc.Record{
		Type: galloc.Integer, ChunkSize: 1_000_000, Start: 333, Step: 1,
		Allocated: 4_000_000, Allocations: 4,
		LastAlloc: time.Date(2020, 5, 21, 20, 2, 15, 957835000, time.UTC),
		Nonce:     0x0102030405060708, Process: "n1",
	}
	const body = "02" + "00000000000f4240" + "000000000000014d" + "0000000000000001" +
		"00000000003d0900" + "0000000000000004" + "0005a62dfd3d7d4b" + "0102030405060708" + "0002" + "6e31"
	for _, tt := range []struct {
		retired, adaptive bool
		wgolden           string
	}{
		{false, false, "01" + body},
		{true, false, "02" + body + "01"},
		{false, true, "02" + body + "02"},
		{true, true, "02" + body + "03"},
	} {
		r.Retired, r.Adaptive = tt.retired, tt.adaptive
		b, err := r.MarshalBinary()
		require.NoError(t, err)
		assert.Equal(t, tt.wgolden, hex.EncodeToString(b), "retired %v adaptive %v", tt.retired, tt.adaptive)
		var got galloc.Record
		require.NoError(t, got.UnmarshalBinary(b))
		assert.Equal(t, r, got)
	}
	for name, raw := range map[string]string{
		"version 2 without flags byte": "02" + body,
		"version 2 with flags 0":       "02" + body + "00",
		"unknown flag":                 "02" + body + "04",
		"version 1 with a flags byte":  "01" + body + "01",
	} {
		b, err := hex.DecodeString(raw)
		require.NoError(t, err)
		var got galloc.Record
		assert.ErrorIs(t, got.UnmarshalBinary(b), galloc.ErrCorrupt, name)
	}
}

func TestAdaptiveChunkSize(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name       string
		base, prev int64
		last       time.Time
		after      time.Duration
		want       int64
	}{
		{"first chunk", 100, 0, time.Time{}, 0, 100},
		{"fast doubles", 100, 100, t0, time.Minute, 200},
		{"fast doubles again", 100, 400, t0, 14 * time.Minute, 800},
		{"15 min keeps", 100, 400, t0, 15 * time.Minute, 400},
		{"29 min keeps", 100, 400, t0, 29 * time.Minute, 400},
		{"30 min halves", 100, 400, t0, 30 * time.Minute, 200},
		{"slow halves to base", 100, 150, t0, time.Hour, 100},
		{"slow at base stays", 100, 100, t0, time.Hour, 100},
		{"capped at the max", 100, 600_000, t0, time.Second, 600_000},
		{"doubles to the max", 100, 500_000, t0, time.Second, 1_000_000},
		{"base above the max never doubles", 2_000_000, 2_000_000, t0, time.Second, 2_000_000},
		{"base raised above prev", 1000, 200, t0, time.Second, 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, galloc.AdaptiveChunkSize(tt.base, tt.prev, tt.last, tt.last.Add(tt.after)))
		})
	}
}

// fakeClock is a clock tests move by hand.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() time.Time      { return time.Unix(0, c.ns.Load()).UTC() }
func (c *fakeClock) add(d time.Duration) { c.ns.Add(int64(d)) }

// TestAdaptiveSequenceSteps: a chunk used up within 15 minutes doubles the
// next; one that lasts 30 minutes or more halves it, down to the
// configured size; the values stay consecutive.
func TestAdaptiveSequenceSteps(t *testing.T) {
	st := mem.New(mem.Options{})
	clk := &fakeClock{}
	clk.add(time.Hour)
	s := open(t, st, "adaptive", galloc.Options{ChunkSize: 10, Adaptive: true, NoPrefetch: true, Now: clk.now})
	want := int64(1)
	take := func(n int64) {
		for range n {
			v, err := s.Next(context.Background())
			require.NoError(t, err)
			require.Equal(t, want, v)
			want++
		}
	}
	var sizes []int64
	for _, gap := range []time.Duration{time.Minute, time.Minute, time.Minute, 31 * time.Minute, time.Hour, time.Hour, 20 * time.Minute} {
		take(1) // makes the chunk current: allocated now
		sizes = append(sizes, s.Stats().ChunkSize)
		take(int64(s.Stats().Held) - 1)
		clk.add(gap) // before the chunk is used up: no allocation can come sooner
		take(1)
	}
	assert.Equal(t, []int64{10, 20, 40, 80, 40, 20, 10}, sizes)
	rec, _, err := galloc.ReadRecord(context.Background(), st, "adaptive")
	require.NoError(t, err)
	assert.True(t, rec.Adaptive)
	assert.Equal(t, int64(10), rec.ChunkSize, "the record keeps the configured size")
}

// TestAlterChunkSize: a new chunk size applies from the next allocation;
// the values go on where they were, once each; a process that opens with
// the old chunk size is refused unless it follows the stored one.
func TestAlterChunkSize(t *testing.T) {
	ctx := context.Background()
	st := mem.New(mem.Options{})
	s := open(t, st, "alter", galloc.Options{ChunkSize: 10, NoPrefetch: true})
	open(t, st, "small", galloc.Options{Type: galloc.SmallInt})
	assert.Equal(t, []int64{1, 2, 3}, draw(t, s, 3))
	r, ok, err := galloc.Alter(ctx, st, "alter", galloc.Change{ChunkSize: 100})
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, int64(100), r.ChunkSize)
	assert.Equal(t, uint64(10), r.Allocated, "alter changes no allocation")
	raw, _, err := st.Get(ctx, galloc.PKey("alter"), galloc.StateCCols())
	require.NoError(t, err)
	assert.Equal(t, byte(1), raw[0], "no flag set: still version 1")
	got := draw(t, s, 7+100+1)
	for i, v := range got {
		require.Equal(t, int64(4+i), v)
	}
	assert.Equal(t, []galloc.Chunk{{First: 1, Count: 10}, {First: 11, Count: 100}, {First: 111, Count: 100}}, s.Chunks())

	_, err = galloc.Open(ctx, st, "alter", galloc.Options{ChunkSize: 10})
	assert.ErrorIs(t, err, galloc.ErrDefinitionMismatch)
	s2 := open(t, st, "alter", galloc.Options{ChunkSize: 10, StoredChunkSize: true})
	v, err := s2.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(211), v)
	assert.Equal(t, int64(100), s2.Stats().ChunkSize)

	for _, tt := range []struct {
		name string
		c    galloc.Change
	}{{"negative", galloc.Change{ChunkSize: -1}}, {"above the capacity", galloc.Change{ChunkSize: 70_000}}} {
		_, _, err := galloc.Alter(ctx, st, "small", tt.c)
		assert.ErrorIs(t, err, galloc.ErrInvalidOptions, tt.name)
	}
	_, ok, err = galloc.Alter(ctx, st, "missing", galloc.Change{ChunkSize: 5})
	require.NoError(t, err)
	assert.False(t, ok)
}

// TestRetire: a retired sequence allocates no more chunks, its processes
// stop at their next allocation (or at once with Refresh/MarkRetired), it
// opens as retired, cannot be altered, and retiring it again is no error.
func TestRetire(t *testing.T) {
	ctx := context.Background()
	st := mem.New(mem.Options{})
	a := open(t, st, "old", galloc.Options{ChunkSize: 10, NoPrefetch: true})
	b := open(t, st, "old", galloc.Options{ChunkSize: 10, NoPrefetch: true})
	draw(t, a, 9) // one value left: a allocates no chunk yet (NoPrefetch)
	bFirst := draw(t, b, 1)[0]
	r, ok, err := galloc.Alter(ctx, st, "old", galloc.Change{Retire: true})
	require.NoError(t, err)
	require.True(t, ok)
	assert.True(t, r.Retired)
	_, err = a.Next(ctx)
	require.NoError(t, err, "a's last value was allocated before the retirement")
	_, err = a.Next(ctx)
	assert.ErrorIs(t, err, galloc.ErrRetired, "the next allocation sees the retirement: a %v b %v", a.Chunks(), b.Chunks())
	_, err = a.NextN(ctx, 3)
	assert.ErrorIs(t, err, galloc.ErrRetired)
	assert.True(t, a.Stats().Retired)
	v, err := b.Next(ctx)
	require.NoError(t, err, "b still holds a chunk allocated before")
	assert.Equal(t, bFirst+1, v)
	_, err = b.Refresh(ctx)
	require.NoError(t, err)
	_, err = b.Next(ctx)
	assert.ErrorIs(t, err, galloc.ErrRetired, "Refresh stops b at once")

	c := open(t, st, "old", galloc.Options{ChunkSize: 10})
	_, err = c.Next(ctx)
	assert.ErrorIs(t, err, galloc.ErrRetired)

	_, _, err = galloc.Alter(ctx, st, "old", galloc.Change{ChunkSize: 5})
	assert.ErrorIs(t, err, galloc.ErrRetired)
	r2, ok, err := galloc.Alter(ctx, st, "old", galloc.Change{Retire: true})
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, r, r2, "retiring again writes nothing")
	assert.Equal(t, uint64(20), r2.Allocated)
}

// TestList pages the catalog in name order, retired sequences included.
func TestList(t *testing.T) {
	ctx := context.Background()
	st := mem.New(mem.Options{})
	names := []string{"e", "a", "c", "b", "d"}
	for _, n := range names {
		open(t, st, n, galloc.Options{ChunkSize: 7})
	}
	_, _, err := galloc.Alter(ctx, st, "c", galloc.Change{Retire: true})
	require.NoError(t, err)
	var got []string
	var retired []string
	after := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 5)
		page, next, err := galloc.List(ctx, st, after, 2)
		require.NoError(t, err)
		for _, l := range page {
			got = append(got, l.Name)
			assert.Equal(t, int64(7), l.Record.ChunkSize)
			if l.Record.Retired {
				retired = append(retired, l.Name)
			}
		}
		if next == "" {
			break
		}
		after = next
	}
	assert.Equal(t, []string{"a", "b", "c", "d", "e"}, got)
	assert.Equal(t, []string{"c"}, retired)
	row, ok, err := st.Get(ctx, galloc.CatalogPKey(), []byte("c"))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "01", hex.EncodeToString(row), "the catalog row's persisted value")
	for _, lim := range []int{0, galloc.MaxListLimit + 1} {
		_, _, err := galloc.List(ctx, st, "", lim)
		assert.ErrorIs(t, err, storage.ErrInvalidArgument)
	}
}

// TestAlterRetireRaceUnique runs several processes over one store (mem and
// bbolt) drawing values while chunk sizes and the adaptive flag are altered
// at random and the sequence is finally retired: no value is handed out
// twice, each process's values increase, every value handed out was
// allocated, and after the retirement no process hands out a value once it
// has seen it.
func TestAlterRetireRaceUnique(t *testing.T) {
	for _, kind := range []string{"mem", "bbolt"} {
		t.Run(kind, func(t *testing.T) {
			var st storage.Storage
			if kind == "mem" {
				st = mem.New(mem.Options{})
			} else {
				b, err := boltdb.Open(filepath.Join(t.TempDir(), "db"), boltdb.Options{})
				require.NoError(t, err)
				t.Cleanup(func() { _ = b.Close() })
				st = b
			}
			seed := rand.Uint64()
			t.Logf("seed %d", seed)
			rng := rand.New(rand.NewPCG(seed, 1))
			ctx := context.Background()
			const procs, workers = 4, 4
			clk := &fakeClock{}
			seqs := make([]*galloc.Sequence, procs)
			for p := range seqs {
				seqs[p] = open(t, st, "raced", galloc.Options{ChunkSize: 5, StoredChunkSize: true, Now: clk.now,
					BackoffBase: time.Microsecond, BackoffMax: 5 * time.Millisecond, MaxAttempts: 10_000})
			}
			recs := make([]galloccheck.Recorder, procs*workers)
			var retired atomic.Bool
			var wg sync.WaitGroup
			for i := range recs {
				wg.Go(func() {
					s := seqs[i%procs]
					for {
						v, err := s.Next(ctx)
						if err != nil {
							if !errors.Is(err, galloc.ErrRetired) || !retired.Load() {
								t.Errorf("worker %d: %v", i, err)
							}
							return
						}
						recs[i].Add(v)
						clk.add(time.Minute)
					}
				})
			}
			for range 40 {
				c := galloc.Change{ChunkSize: 1 + rng.Int64N(50)}
				if rng.IntN(2) == 0 {
					ad := rng.IntN(2) == 0
					c.Adaptive = &ad
				}
				_, ok, err := galloc.Alter(ctx, st, "raced", c)
				require.NoError(t, err)
				require.True(t, ok)
				time.Sleep(time.Millisecond)
			}
			retired.Store(true)
			_, _, err := galloc.Alter(ctx, st, "raced", galloc.Change{Retire: true})
			require.NoError(t, err)
			for _, s := range seqs {
				_, err := s.Refresh(ctx)
				require.NoError(t, err)
			}
			wg.Wait()
			for i := range recs {
				assert.True(t, recs[i].Monotonic(), "worker %d: values increase", i)
			}
			rep := galloccheck.Check(recs)
			require.Zero(t, rep.Duplicates, "values handed out twice: %v (seed %d)", rep.Listed, seed)
			require.NotZero(t, rep.IDs)
			rec, _, err := galloc.ReadRecord(ctx, st, "raced")
			require.NoError(t, err)
			assert.True(t, rec.Retired)
			for _, s := range seqs {
				for _, c := range s.Chunks() {
					assert.LessOrEqual(t, uint64(c.First-1)+c.Count, rec.Allocated, "every chunk was allocated")
				}
			}
			assert.GreaterOrEqual(t, rec.Allocated, rep.IDs)
			for _, s := range seqs {
				_, err := s.Next(ctx)
				assert.ErrorIs(t, err, galloc.ErrRetired)
			}
		})
	}
}

// catalogWrites counts the writes of a Storage to the catalog's partition,
// by every write method of the contract.
type catalogWrites struct {
	storage.Storage
	n atomic.Int64
}

func (c *catalogWrites) count(pKey []byte) {
	if string(pKey) == string(galloc.CatalogPKey()) {
		c.n.Add(1)
	}
}

func (c *catalogWrites) Put(ctx context.Context, pKey, cCols, value []byte) error {
	c.count(pKey)
	return c.Storage.Put(ctx, pKey, cCols, value)
}

func (c *catalogWrites) PutBatch(ctx context.Context, rows []storage.Row) error {
	for _, r := range rows {
		c.count(r.PKey)
	}
	return c.Storage.PutBatch(ctx, rows)
}

func (c *catalogWrites) InsertIfNotExists(ctx context.Context, pKey, cCols, value []byte, ttl time.Duration) (bool, error) {
	c.count(pKey)
	return c.Storage.InsertIfNotExists(ctx, pKey, cCols, value, ttl)
}

func (c *catalogWrites) CompareAndSwap(ctx context.Context, pKey, cCols, oldValue, newValue []byte, ttl time.Duration) (bool, error) {
	c.count(pKey)
	return c.Storage.CompareAndSwap(ctx, pKey, cCols, oldValue, newValue, ttl)
}

func (c *catalogWrites) CompareAndDelete(ctx context.Context, pKey, cCols, expected []byte) (bool, error) {
	c.count(pKey)
	return c.Storage.CompareAndDelete(ctx, pKey, cCols, expected)
}

func (c *catalogWrites) ApplyBatchIf(ctx context.Context, pKey []byte, conds []storage.Condition, rows []storage.Row) (bool, error) {
	c.count(pKey)
	for _, r := range rows {
		c.count(r.PKey)
	}
	return c.Storage.ApplyBatchIf(ctx, pKey, conds, rows)
}

// TestOpenWritesTheCatalogRowOnlyWhenMissing: Open writes a sequence's
// catalog row when it creates the sequence, not when it opens a listed one
// (a second Open, in this process or another, writes no catalog row); a
// sequence whose row is missing (created before the catalog existed) gets
// it at its next Open, and is listed.
func TestOpenWritesTheCatalogRowOnlyWhenMissing(t *testing.T) {
	ctx := context.Background()
	st := &catalogWrites{Storage: mem.New(mem.Options{})}
	listed := func() []string {
		page, _, err := galloc.List(ctx, st, "", galloc.MaxListLimit)
		require.NoError(t, err)
		var names []string
		for _, l := range page {
			names = append(names, l.Name)
		}
		return names
	}

	first := open(t, st, "orders", galloc.Options{ChunkSize: 7})
	assert.Equal(t, int64(1), st.n.Load(), "creating the sequence writes its catalog row once")
	assert.Equal(t, []string{"orders"}, listed())

	st.n.Store(0)
	second := open(t, st, "orders", galloc.Options{ChunkSize: 7})
	assert.Equal(t, int64(0), st.n.Load(), "a second Open of a listed sequence writes no catalog row")
	require.NoError(t, second.Close())
	require.NoError(t, first.Close())
	require.NoError(t, open(t, st, "orders", galloc.Options{ChunkSize: 7}).Close())
	assert.Equal(t, int64(0), st.n.Load(), "nor does an Open after every process closed it")

	// A sequence from before the catalog: its record, no row.
	require.NoError(t, open(t, st, "legacy", galloc.Options{ChunkSize: 7}).Close())
	ok, err := st.Storage.CompareAndDelete(ctx, galloc.CatalogPKey(), []byte("legacy"), []byte{1})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, []string{"orders"}, listed())
	st.n.Store(0)
	open(t, st, "legacy", galloc.Options{ChunkSize: 7})
	assert.Equal(t, int64(1), st.n.Load(), "the missing row is written once")
	assert.Equal(t, []string{"legacy", "orders"}, listed())
}
