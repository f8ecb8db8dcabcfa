package seqstorage

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/drivertest"
	"github.com/cqlseq/cqlseq/storage/faulty"
	"github.com/cqlseq/cqlseq/vvmadapter"
)

// TestLateWriteCannotLower: a deposed owner's late flush of smaller
// numbers and of a smaller offset lowers nothing the new owner wrote or
// reads, since every owner writes with versions above every earlier
// owner's.
func TestLateWriteCannotLower(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st storage.Storage) {
		o := Options{Storage: st, App: app + 10, Partition: part}
		oA, oB := o, o
		oA.Owner, oB.Owner = takeOver(t, st, o.App), takeOver(t, st, o.App)
		a, err := New(oA)
		require.NoError(t, err)
		b, err := New(oB)
		require.NoError(t, err)

		require.NoError(t, a.WriteValuesAndNextPLogOffset([]isequencer.SeqValue{{Key: key(1, 1), Value: 100}, {Key: key(1, 2), Value: 7}}, 10))
		nums, err := b.ReadNumbers(1, []isequencer.SeqID{1, 2})
		require.NoError(t, err)
		assert.Equal(t, []isequencer.Number{100, 7}, nums, "the new owner sees the old owner's numbers")
		require.NoError(t, b.WriteValuesAndNextPLogOffset([]isequencer.SeqValue{{Key: key(1, 1), Value: 150}}, 20))

		// A wakes up and flushes an older, smaller value.
		require.NoError(t, a.WriteValuesAndNextPLogOffset([]isequencer.SeqValue{{Key: key(1, 1), Value: 90}}, 5))
		nums, err = b.ReadNumbers(1, []isequencer.SeqID{1, 2})
		require.NoError(t, err)
		assert.Equal(t, []isequencer.Number{150, 7}, nums)
		off, err := b.ReadNextPLogOffset()
		require.NoError(t, err)
		assert.Equal(t, isequencer.PLogOffset(20), off, "the deposed owner's late offset write replaced the new owner's")
	})
}

// takeOver takes partition part of app over in st.
func takeOver(t *testing.T, st storage.Storage, app isequencer.ClusterAppID) *vvmadapter.Owner {
	t.Helper()
	own, err := TakeOver(context.Background(), TakeOverOptions{Storage: st, App: app, Partition: part})
	require.NoError(t, err)
	return own.Owner
}

// TestLegacyEpochCellsAreRead: numbers fenced owners wrote to their epoch
// cells before version ranges are read with the seed cell (the maximum),
// and a later owner's writes go to the seed cell, leaving them as they
// are.
func TestLegacyEpochCellsAreRead(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st storage.Storage) {
		ctx := context.Background()
		legacy := []storage.Row{
			{PKey: vvmadapter.WSKey(app, 5), CCols: vvmadapter.WSEpochCCols(1, 3), Value: vvmadapter.EncodeU64(1247)},
			{PKey: vvmadapter.WSKey(app, 5), CCols: vvmadapter.WSEpochCCols(1, 4), Value: vvmadapter.EncodeU64(1200)},
			{PKey: vvmadapter.WSKey(app, 5), CCols: vvmadapter.SeqCCols(2), Value: vvmadapter.EncodeU64(3)},
		}
		require.NoError(t, st.PutBatch(ctx, legacy))
		s := newStorage(t, Options{Storage: st})
		nums, err := s.ReadNumbers(5, []isequencer.SeqID{1, 2})
		require.NoError(t, err)
		assert.Equal(t, []isequencer.Number{1247, 3}, nums, "epoch 3's cell, the largest")

		require.NoError(t, s.WriteValuesAndNextPLogOffset([]isequencer.SeqValue{{Key: key(5, 1), Value: 1300}}, 10))
		nums, err = newStorage(t, Options{Storage: st}).ReadNumbers(5, []isequencer.SeqID{1, 2})
		require.NoError(t, err)
		assert.Equal(t, []isequencer.Number{1300, 3}, nums)
		v, _, err := st.Get(ctx, vvmadapter.WSKey(app, 5), vvmadapter.SeqCCols(1))
		require.NoError(t, err)
		assert.Equal(t, vvmadapter.EncodeU64(1300), v, "written to the seed cell")
		v, _, _ = st.Get(ctx, vvmadapter.WSKey(app, 5), vvmadapter.WSEpochCCols(1, 3))
		assert.Equal(t, vvmadapter.EncodeU64(1247), v, "the legacy cell is left as it was")
	})
}

// TestReadNumbersOneRead: one storage read per ReadNumbers (a Read of the
// workspace partition, which holds the seed and any legacy epoch cells),
// after the first one, which reads the partition's floors too.
func TestReadNumbersOneRead(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, inner storage.Storage) {
		st := drivertest.NewCounting(inner)
		s := newStorage(t, Options{Storage: st})
		_, err := s.ReadNumbers(2, []isequencer.SeqID{1})
		require.NoError(t, err)
		st.Reset()
		_, err = s.ReadNumbers(1, []isequencer.SeqID{1, 2, 3})
		require.NoError(t, err)
		assert.Equal(t, [3]int64{1, 0, 0}, [3]int64{st.Calls(faulty.OpRead), st.Calls(faulty.OpGetBatch), st.Calls(faulty.OpGet)}, "one Read")
	})
}
