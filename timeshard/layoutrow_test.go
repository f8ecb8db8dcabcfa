package timeshard_test

import (
	"context"
	"encoding/hex"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/storage/mem"
	"github.com/cqlseq/cqlseq/timeshard"
)

// TestLeafLayoutGolden pins Leaf's preset: twepoch 1288834974657 ms,
// 41/10/12, and Leaf's formula ((ms - twepoch) << 22) | (worker << 12) | seq.
func TestLeafLayoutGolden(t *testing.T) {
	l := timeshard.LeafLayout()
	require.NoError(t, l.Validate())
	assert.Equal(t, int64(1288834974657), l.Epoch.UnixMilli())
	assert.Equal(t, "2010-11-04T01:42:54.657Z", l.Epoch.Format("2006-01-02T15:04:05.000Z07:00"))
	const ms, worker, seq = 123456789, 1023, 77
	assert.Equal(t, int64(ms<<22|worker<<12|seq), l.Compose(ms, worker, seq), "Leaf's formula")
	assert.Equal(t, uint64(100), uint64(timeshard.LeafRandomStart))
}

// TestLayoutRecordGolden pins the layout row: its partition key and the
// value's bytes, and that a value decodes to the layout it encodes.
func TestLayoutRecordGolden(t *testing.T) {
	assert.Equal(t, "00000011ffffffff696473", hex.EncodeToString(timeshard.NodePKey("ids", timeshard.LayoutNode)))
	for _, c := range []struct {
		l    timeshard.Layout
		whex string
	}{
		{timeshard.LeafLayout(), "01290a0c3f0000012c148d03c1"},
		{timeshard.JS53Layout(), "0129050735000001941f297c00"},
	} {
		b := timeshard.EncodeLayout(c.l)
		assert.Equal(t, c.whex, hex.EncodeToString(b))
		got, err := timeshard.DecodeLayout(b)
		require.NoError(t, err)
		assert.Equal(t, c.l, got)
	}
	_, err := timeshard.DecodeLayout([]byte{2, 41, 10, 12, 63, 0, 0, 0, 0, 0, 0, 0, 0})
	assert.ErrorContains(t, err, "version 2")
	_, err = timeshard.DecodeLayout([]byte{1, 41, 10, 13, 63, 0, 0, 0, 0, 0, 0, 0, 1})
	assert.ErrorIs(t, err, timeshard.ErrInvalidLayout)
}

// TestCheckLayoutChange: a change passes only when the new layout's IDs
// from now on exceed every ID the previous one can make within
// LayoutChangeMargin.
func TestCheckLayoutChange(t *testing.T) {
	now := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	def, leaf := timeshard.DefaultLayout(), timeshard.LeafLayout()
	earlier := func(d time.Duration) timeshard.Layout { l := def; l.Epoch = l.Epoch.Add(-d); return l }
	wider := def
	wider.TimeBits, wider.NodeBits = 40, 11 // the same epoch, time shifted one bit further
	for _, c := range []struct {
		name       string
		prev, next timeshard.Layout
		wok        bool
	}{
		{"same", def, def, true},
		{"Bits 63 spelled out", def, timeshard.Layout{Epoch: def.Epoch, TimeBits: 41, NodeBits: 10, CounterBits: 12, Bits: 63}, true},
		{"cqlseq to Leaf: epoch 14 years earlier", def, leaf, true},
		{"Leaf to cqlseq: epoch later", leaf, def, false},
		{"epoch two days earlier", def, earlier(48 * time.Hour), true},
		{"epoch an hour earlier: within the margin", def, earlier(time.Hour), false},
		{"63 to 53 bits", def, timeshard.JS53Layout(), false},
		{"53 to 63 bits", timeshard.JS53Layout(), def, true},
		{"one more bit below the time", def, wider, true},
		{"one bit fewer below the time", wider, def, false},
	} {
		err := timeshard.CheckLayoutChange(c.prev, c.next, now)
		if c.wok {
			assert.NoError(t, err, c.name)
		} else {
			assert.ErrorIs(t, err, timeshard.ErrLayoutChange, c.name)
		}
	}
}

// TestOpenRecordsAndChecksTheLayout: Open records the name's layout; a
// later Open with a layout whose IDs could be smaller is refused with
// ErrLayoutChange before it leases a node, and one whose IDs are larger
// (cqlseq's epoch to Leaf's) replaces it, its first ID above the last one.
func TestOpenRecordsAndChecksTheLayout(t *testing.T) {
	ctx := context.Background()
	st := mem.New(mem.Options{})
	g, err := timeshard.Open(ctx, st, "ids", timeshard.Options{})
	require.NoError(t, err)
	last, err := g.Next(ctx)
	require.NoError(t, err)
	require.NoError(t, g.Close())
	l, ok, err := timeshard.ReadLayout(ctx, st, "ids")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, timeshard.DefaultLayout(), l)

	later := timeshard.DefaultLayout()
	later.Epoch = later.Epoch.Add(time.Hour)
	_, err = timeshard.Open(ctx, st, "ids", timeshard.Options{Layout: later})
	require.ErrorIs(t, err, timeshard.ErrLayoutChange)
	assert.ErrorContains(t, err, `generator "ids"`)

	g, err = timeshard.Open(ctx, st, "ids", timeshard.Options{Layout: timeshard.LeafLayout()})
	require.NoError(t, err)
	id, err := g.Next(ctx)
	require.NoError(t, err)
	assert.Greater(t, id, last)
	require.NoError(t, g.Close())
	l, _, err = timeshard.ReadLayout(ctx, st, "ids")
	require.NoError(t, err)
	assert.Equal(t, timeshard.LeafLayout(), l)

	_, err = timeshard.Open(ctx, st, "ids", timeshard.Options{})
	require.ErrorIs(t, err, timeshard.ErrLayoutChange, "back to cqlseq's epoch: IDs would go back")
	_, ok, err = timeshard.ReadLayout(ctx, st, "other")
	require.NoError(t, err)
	assert.False(t, ok)
}

// buckets returns how many of the 100 values id % 100 takes.
func buckets(ids []int64) int {
	seen := map[int64]bool{}
	for _, id := range ids {
		seen[id%100] = true
	}
	return len(seen)
}

// TestRandomStartSpreadsLastDigits (issue 52 item 2): at one ID per
// millisecond, IDs of the default split are multiples of 4 plus a node
// term, so id % 100 reaches at most 25 buckets; with RandomStart 100
// (Leaf's) each millisecond's counter starts at a random 0..99 and
// id % 100 reaches nearly all 100.
func TestRandomStartSpreadsLastDigits(t *testing.T) {
	run := func(o timeshard.Options) []int64 {
		clk := newClock()
		o.FirstNode = 0
		g := open(t, mem.New(mem.Options{}), clk, o)
		ids := make([]int64, 0, 1000)
		for range 1000 {
			clk.Advance(time.Millisecond)
			id, err := g.Next(context.Background())
			require.NoError(t, err)
			if len(ids) > 0 {
				require.Greater(t, id, ids[len(ids)-1])
			}
			ids = append(ids, id)
		}
		return ids
	}
	ids := run(timeshard.Options{})
	assert.LessOrEqual(t, buckets(ids), 25, "without RandomStart: the old behaviour")
	for _, id := range ids {
		require.Equal(t, uint64(0), timeshard.DefaultLayout().Counter(id))
	}
	ids = run(timeshard.Options{RandomStart: timeshard.LeafRandomStart, Rand: rand.NewPCG(1, 2)})
	assert.GreaterOrEqual(t, buckets(ids), 90)
	for _, id := range ids {
		require.Less(t, timeshard.DefaultLayout().Counter(id), uint64(100))
	}
}

// TestRandomStartOverflowsToNextMillisecond: with a random start each
// millisecond's counter still only increases, from its start to the last
// value, and the IDs after it wait for the next millisecond: a batch of
// 2,000 IDs of 16 a millisecond is strictly increasing.
func TestRandomStartOverflowsToNextMillisecond(t *testing.T) {
	l := timeshard.DefaultLayout()
	l.TimeBits, l.CounterBits = 49, 4
	g, err := timeshard.Open(context.Background(), mem.New(mem.Options{}), "ids",
		timeshard.Options{Layout: l, RandomStart: 16, Rand: rand.NewPCG(3, 4)})
	require.NoError(t, err)
	defer g.Close()
	ids, err := g.NextN(context.Background(), nil, 2000)
	require.NoError(t, err)
	starts := map[uint64]bool{}
	for i, id := range ids {
		if i == 0 || l.Millis(id) != l.Millis(ids[i-1]) {
			starts[l.Counter(id)] = true
			if i > 0 {
				require.Equal(t, uint64(15), l.Counter(ids[i-1]), "ID %d: a millisecond is used to its last counter", i-1)
			}
			continue
		}
		require.Equal(t, l.Counter(ids[i-1])+1, l.Counter(id), "ID %d: the counter only increases within a millisecond", i)
	}
	assert.Greater(t, len(starts), 8, "the milliseconds start at random counters: %v", starts)
	_, err = timeshard.Open(context.Background(), mem.New(mem.Options{}), "ids", timeshard.Options{Layout: l, RandomStart: 17})
	assert.ErrorContains(t, err, "RandomStart 17: want at most 16")
}
