package seqstorage

import (
	"context"
	"fmt"
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
// reads, in fenced mode (epoch cells) and in the trust modes (seed cells),
// since every owner writes with the versions of its own epoch.
func TestLateWriteCannotLower(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st storage.Storage) {
		for i, epochCells := range []bool{true, false} {
			t.Run(fmt.Sprintf("epoch cells %v", epochCells), func(t *testing.T) {
				// Each case its own app, so that the cases share no rows.
				o := Options{Storage: st, App: app + isequencer.ClusterAppID(i) + 10, Partition: part, EpochCells: epochCells}
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
	})
}

// takeOver takes partition part of app over in st.
func takeOver(t *testing.T, st storage.Storage, app isequencer.ClusterAppID) *vvmadapter.Owner {
	t.Helper()
	own, err := TakeOver(context.Background(), TakeOverOptions{Storage: st, App: app, Partition: part})
	require.NoError(t, err)
	return own.Owner
}

// TestFencedReadsSeedCells: a partition that moves from the seed's layout
// to fenced mode keeps its numbers; the seed cells are never written in
// fenced mode.
func TestFencedReadsSeedCells(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st storage.Storage) {
		seed := newStorage(t, Options{Storage: st})
		require.NoError(t, seed.WriteValuesAndNextPLogOffset([]isequencer.SeqValue{{Key: key(3, 1), Value: 200}, {Key: key(3, 2), Value: 5}}, 9))
		f := newStorage(t, Options{Storage: st, EpochCells: true})
		nums, err := f.ReadNumbers(3, []isequencer.SeqID{1, 2})
		require.NoError(t, err)
		assert.Equal(t, []isequencer.Number{200, 5}, nums)

		require.NoError(t, f.WriteValuesAndNextPLogOffset([]isequencer.SeqValue{{Key: key(3, 2), Value: 6}}, 10))
		nums, err = f.ReadNumbers(3, []isequencer.SeqID{1, 2})
		require.NoError(t, err)
		assert.Equal(t, []isequencer.Number{200, 6}, nums)

		ctx := context.Background()
		v, ok, err := st.Get(ctx, vvmadapter.WSKey(app, 3), vvmadapter.WSEpochCCols(2, f.o.Owner.Epoch()))
		require.NoError(t, err)
		require.True(t, ok, "the fenced owner's epoch cell")
		assert.Equal(t, vvmadapter.EncodeU64(6), v)
		v, _, _ = st.Get(ctx, vvmadapter.WSKey(app, 3), vvmadapter.SeqCCols(2))
		assert.Equal(t, vvmadapter.EncodeU64(5), v, "the seed cell is left as it was")
		v, _, _ = st.Get(ctx, vvmadapter.PartKey(app, part), vvmadapter.PartCCols(vvmadapter.PLogOffsetCC))
		assert.Equal(t, vvmadapter.EncodeU64(10), v, "the offset is the seed's row in every mode")
	})
}

// TestReadNumbersOneRead: one storage read per ReadNumbers in every mode
// (a Read of the workspace partition, which holds the seed and the epoch
// cells).
func TestReadNumbersOneRead(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, inner storage.Storage) {
		st := drivertest.NewCounting(inner)
		for _, epochCells := range []bool{false, true} {
			s := newStorage(t, Options{Storage: st, EpochCells: epochCells})
			st.Reset()
			_, err := s.ReadNumbers(1, []isequencer.SeqID{1, 2, 3})
			require.NoError(t, err)
			assert.Equal(t, [2]int64{1, 0}, [2]int64{st.Calls(faulty.OpRead), st.Calls(faulty.OpGetBatch)}, "epoch cells %v: one Read", epochCells)
		}
	})
}

// TestTrustReadsEpochCells: a trust-mode storage (seed cells) opened after
// fenced use reads the numbers the fenced owners wrote to their epoch
// cells (before the fix it read only the seed cells and the sequencer
// issued those numbers again), and a later fenced owner reads the seed
// cells the trust-mode owner wrote.
func TestTrustReadsEpochCells(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st storage.Storage) {
		trust := newStorage(t, Options{Storage: st})
		require.NoError(t, trust.WriteValuesAndNextPLogOffset([]isequencer.SeqValue{{Key: key(5, 1), Value: 10}, {Key: key(5, 2), Value: 3}}, 4))
		fenced := newStorage(t, Options{Storage: st, EpochCells: true})
		require.NoError(t, fenced.WriteValuesAndNextPLogOffset([]isequencer.SeqValue{{Key: key(5, 1), Value: 1247}}, 1250))

		nums, err := newStorage(t, Options{Storage: st}).ReadNumbers(5, []isequencer.SeqID{1, 2})
		require.NoError(t, err)
		assert.Equal(t, []isequencer.Number{1247, 3}, nums, "trust after fenced: the epoch cell's 1247, not the seed cell's 10")

		require.NoError(t, trust.WriteValuesAndNextPLogOffset([]isequencer.SeqValue{{Key: key(5, 1), Value: 1300}}, 1260))
		nums, err = newStorage(t, Options{Storage: st, EpochCells: true}).ReadNumbers(5, []isequencer.SeqID{1, 2})
		require.NoError(t, err)
		assert.Equal(t, []isequencer.Number{1300, 3}, nums, "fenced after trust: the seed cell's 1300")
	})
}
