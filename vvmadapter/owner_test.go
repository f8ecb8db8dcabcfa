package vvmadapter

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/boltdb"
	"github.com/cqlseq/cqlseq/storage/mem"
)

// TestOwnersWritesOrderByEpoch: of two owners of a partition, the later
// owner's numbers and offset stay whatever order the writes arrive in
// (the earlier owner's late writes replace nothing), on mem and on bbolt.
func TestOwnersWritesOrderByEpoch(t *testing.T) {
	stores := map[string]func(t *testing.T) storage.Storage{
		"mem": func(*testing.T) storage.Storage { return mem.New(mem.Options{}) },
		"bbolt": func(t *testing.T) storage.Storage {
			st, err := boltdb.Open(filepath.Join(t.TempDir(), "owner.db"), boltdb.Options{})
			require.NoError(t, err)
			return st
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			st := open(t)
			defer func() { require.NoError(t, st.Close()) }()
			ctx := context.Background()
			a := New(st, 5)
			first, err := a.TakeOver(ctx, 3)
			require.NoError(t, err)
			second, err := a.TakeOver(ctx, 3)
			require.NoError(t, err)
			assert.Equal(t, uint64(1), first.Epoch())
			assert.Equal(t, uint64(2), second.Epoch())
			assert.Equal(t, isequencer.PartitionID(3), second.Partition())
			assert.Equal(t, isequencer.ClusterAppID(5), second.App())

			require.NoError(t, second.PutNumbers(ctx, []isequencer.SeqValue{nv(1, 1, 10)}))
			require.NoError(t, second.PutPLogOffset(ctx, 7))
			// The deposed owner's writes arrive late, with larger numbers
			// and a larger offset: they replace nothing.
			require.NoError(t, first.PutNumbers(ctx, []isequencer.SeqValue{nv(1, 1, 99)}))
			require.NoError(t, first.PutPLogOffset(ctx, 50))
			dst := make([]isequencer.Number, 1)
			require.NoError(t, a.GetNumbersMax(ctx, 1, []isequencer.SeqID{1}, dst))
			assert.Equal(t, isequencer.Number(10), dst[0], "the deposed owner's late number write replaced the new owner's")
			off, ok, err := a.GetPLogOffset(ctx, 3)
			require.NoError(t, err)
			require.True(t, ok)
			assert.Equal(t, isequencer.PLogOffset(7), off, "the deposed owner's late offset write replaced the new owner's")

			// An owner's own later write replaces its earlier one.
			require.NoError(t, second.PutNumbers(ctx, []isequencer.SeqValue{nv(1, 1, 12)}))
			require.NoError(t, second.PutPLogOffset(ctx, 9))
			require.NoError(t, a.GetNumbersMax(ctx, 1, []isequencer.SeqID{1}, dst))
			assert.Equal(t, isequencer.Number(12), dst[0])
			off, _, err = a.GetPLogOffset(ctx, 3)
			require.NoError(t, err)
			assert.Equal(t, isequencer.PLogOffset(9), off)

			// Epoch cells fenced owners wrote before version ranges are
			// read with the seed cell: the maximum.
			require.NoError(t, a.putCells(ctx, 1, []isequencer.SeqValue{nv(1, 1, 14)}))
			var cells []NumberCell
			require.NoError(t, a.ReadNumberCells(ctx, 1, func(c NumberCell) error { cells = append(cells, c); return nil }))
			assert.Equal(t, []NumberCell{{SeqID: 1, Number: 12}, {SeqID: 1, Epoch: 1, Number: 14}}, cells)
			require.NoError(t, a.GetNumbersMax(ctx, 1, []isequencer.SeqID{1}, dst))
			assert.Equal(t, isequencer.Number(14), dst[0])
		})
	}
}

// TestTakeOverOnAClosedStore: no epoch, no Owner, the storage error.
func TestTakeOverOnAClosedStore(t *testing.T) {
	st := mem.New(mem.Options{})
	require.NoError(t, st.Close())
	o, err := New(st, 1).TakeOver(context.Background(), 0)
	require.ErrorIs(t, err, storage.ErrClosed)
	assert.Nil(t, o)
}
