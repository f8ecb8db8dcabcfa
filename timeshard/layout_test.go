package timeshard_test

import (
	"context"
	"encoding/hex"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/storage/mem"
	"github.com/cqlseq/cqlseq/timeshard"
)

// TestPersistedLayoutGolden pins the node rows' partition key and the ID
// layout of the default split.
func TestPersistedLayoutGolden(t *testing.T) {
	assert.Equal(t, "0000001100000005696473", hex.EncodeToString(timeshard.NodePKey("ids", 5)))
	l := timeshard.DefaultLayout()
	assert.Equal(t, int64(1<<22|2<<12|3), l.Compose(1, 2, 3))
	assert.Equal(t, "2025-01-01T00:00:00Z", l.Epoch.Format("2006-01-02T15:04:05Z07:00"))
}

// TestJS53LayoutGolden pins the 53-bit layout's split and the arithmetic
// of its doc comment: the largest ID is JavaScript's
// Number.MAX_SAFE_INTEGER, the time field lasts as long as the default
// layout's, 32 nodes, 128 IDs per millisecond.
func TestJS53LayoutGolden(t *testing.T) {
	l := timeshard.JS53Layout()
	require.NoError(t, l.Validate())
	assert.Equal(t, uint(53), l.IDBits())
	assert.Equal(t, int64(9_007_199_254_740_991), l.MaxID(), "Number.MAX_SAFE_INTEGER")
	assert.Equal(t, l.MaxID(), l.Compose(l.MaxMillis(), l.Nodes()-1, l.PerMillisecond()-1))
	assert.Equal(t, int64(1<<12|2<<7|3), l.Compose(1, 2, 3))
	assert.Equal(t, uint32(32), l.Nodes())
	assert.Equal(t, uint64(128), l.PerMillisecond())
	assert.Equal(t, "2025-01-01T00:00:00Z", l.Epoch.Format(time.RFC3339))
	assert.Equal(t, time.Date(2094, 9, 7, 15, 47, 35, 552_000_000, time.UTC), l.RunsOut())
	assert.Equal(t, timeshard.DefaultLayout().RunsOut(), l.RunsOut(), "the same lifetime as the default")
	assert.Equal(t, int64(1<<63-1), timeshard.DefaultLayout().MaxID())
}

func TestLayoutBits(t *testing.T) {
	l := timeshard.JS53Layout()
	l.CounterBits = 8 // 41+5+8 = 54
	assert.ErrorContains(t, l.Validate(), "= 54, want 53")
	l = timeshard.DefaultLayout()
	l.Bits = 64
	assert.ErrorContains(t, l.Validate(), "Bits 64: want at most 63")
	l.Bits = 63
	assert.NoError(t, l.Validate(), "63 is the default spelled out")
}

// TestJS53Generator makes IDs with the 53-bit layout: below 2^53 and
// increasing.
func TestJS53Generator(t *testing.T) {
	g, err := timeshard.Open(context.Background(), mem.New(mem.Options{}), "js", timeshard.Options{Layout: timeshard.JS53Layout()})
	require.NoError(t, err)
	defer g.Close()
	var prev int64
	for range 1000 {
		id, err := g.Next(context.Background())
		require.NoError(t, err)
		require.Greater(t, id, prev)
		require.LessOrEqual(t, id, timeshard.JS53Layout().MaxID())
		prev = id
	}
}
