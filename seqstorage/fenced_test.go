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

// TestFencedLateWriteCannotLower: a deposed owner's late flush of smaller
// numbers does not lower what the new owner reads in fenced mode; in the
// seed's layout it does (the bug fenced mode prevents).
func TestFencedLateWriteCannotLower(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st storage.Storage) {
		for _, tc := range []struct {
			name             string
			epochA, epochB   uint64
			wantAfterLate    isequencer.Number
			wantOtherSeqLate isequencer.Number
		}{
			{"fenced", 1, 2, 150, 7},
			{"seed layout", 0, 0, 90, 7},
		} {
			t.Run(tc.name, func(t *testing.T) {
				// Each case its own app, so that the cases share no rows.
				o := Options{Storage: st, App: app + isequencer.ClusterAppID(tc.epochA) + 10, Partition: part}
				oA, oB := o, o
				oA.Epoch, oB.Epoch = tc.epochA, tc.epochB
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
				assert.Equal(t, []isequencer.Number{tc.wantAfterLate, tc.wantOtherSeqLate}, nums)
				off, err := b.ReadNextPLogOffset()
				require.NoError(t, err)
				assert.Equal(t, isequencer.PLogOffset(5), off, "the late offset write lowers the stored offset: a longer replay, never a wrong one")
			})
		}
	})
}

// TestFencedReadsSeedCells: a partition that moves from the seed's layout
// to fenced mode keeps its numbers; the seed cells are never written in
// fenced mode.
func TestFencedReadsSeedCells(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st storage.Storage) {
		seed := newStorage(t, Options{Storage: st})
		require.NoError(t, seed.WriteValuesAndNextPLogOffset([]isequencer.SeqValue{{Key: key(3, 1), Value: 200}, {Key: key(3, 2), Value: 5}}, 9))
		f := newStorage(t, Options{Storage: st, Epoch: 4})
		nums, err := f.ReadNumbers(3, []isequencer.SeqID{1, 2})
		require.NoError(t, err)
		assert.Equal(t, []isequencer.Number{200, 5}, nums)

		require.NoError(t, f.WriteValuesAndNextPLogOffset([]isequencer.SeqValue{{Key: key(3, 2), Value: 6}}, 10))
		nums, err = f.ReadNumbers(3, []isequencer.SeqID{1, 2})
		require.NoError(t, err)
		assert.Equal(t, []isequencer.Number{200, 6}, nums)

		ctx := context.Background()
		v, ok, err := st.Get(ctx, vvmadapter.WSKey(app, 3), vvmadapter.WSEpochCCols(2, 4))
		require.NoError(t, err)
		require.True(t, ok, "epoch 4's cell")
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
		for _, epoch := range []uint64{0, 1} {
			s := newStorage(t, Options{Storage: st, Epoch: epoch})
			st.Reset()
			_, err := s.ReadNumbers(1, []isequencer.SeqID{1, 2, 3})
			require.NoError(t, err)
			assert.Equal(t, [2]int64{1, 0}, [2]int64{st.Calls(faulty.OpRead), st.Calls(faulty.OpGetBatch)}, "epoch %d: one Read", epoch)
		}
	})
}

// TestTrustReadsEpochCells: a trust-mode storage (Epoch 0) opened after
// fenced use reads the numbers the fenced owners wrote to their epoch
// cells (before the fix it read only the seed cells and the sequencer
// issued those numbers again), and a later fenced owner reads the seed
// cells the trust-mode owner wrote.
func TestTrustReadsEpochCells(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st storage.Storage) {
		trust := newStorage(t, Options{Storage: st})
		require.NoError(t, trust.WriteValuesAndNextPLogOffset([]isequencer.SeqValue{{Key: key(5, 1), Value: 10}, {Key: key(5, 2), Value: 3}}, 4))
		fenced := newStorage(t, Options{Storage: st, Epoch: 2})
		require.NoError(t, fenced.WriteValuesAndNextPLogOffset([]isequencer.SeqValue{{Key: key(5, 1), Value: 1247}}, 1250))

		nums, err := newStorage(t, Options{Storage: st}).ReadNumbers(5, []isequencer.SeqID{1, 2})
		require.NoError(t, err)
		assert.Equal(t, []isequencer.Number{1247, 3}, nums, "trust after fenced: the epoch cell's 1247, not the seed cell's 10")

		require.NoError(t, trust.WriteValuesAndNextPLogOffset([]isequencer.SeqValue{{Key: key(5, 1), Value: 1300}}, 1260))
		nums, err = newStorage(t, Options{Storage: st, Epoch: 3}).ReadNumbers(5, []isequencer.SeqID{1, 2})
		require.NoError(t, err)
		assert.Equal(t, []isequencer.Number{1300, 3}, nums, "fenced after trust: the seed cell's 1300")
	})
}
