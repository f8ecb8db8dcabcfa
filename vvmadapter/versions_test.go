package vvmadapter

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/drivertest"
	"github.com/cqlseq/cqlseq/storage/faulty"
	"github.com/cqlseq/cqlseq/storage/mem"
)

// TestLegacyEpochRow: an 8-byte epoch row (before version ranges) stands
// for the versions up to the end of its epoch's 2^42 block; the next
// takeover reserves above it and writes the 16-byte row.
func TestLegacyEpochRow(t *testing.T) {
	r, err := DecodeEpochRow(EncodeU64(5), "row")
	require.NoError(t, err)
	assert.Equal(t, EpochRow{Epoch: 5, Top: 6<<42 - 1}, r)
	_, err = DecodeEpochRow(EncodeU64(1<<20), "row")
	require.ErrorContains(t, err, "above its maximum")
	_, err = DecodeEpochRow(make([]byte, 12), "row")
	require.ErrorContains(t, err, "12 bytes")

	drivertest.Each(t, func(t *testing.T, st storage.Storage) {
		ctx := context.Background()
		require.NoError(t, st.Put(ctx, PartKey(5, 3), PartCCols(EpochCC), EncodeU64(7)))
		a := New(st, 5)
		own, err := a.TakeOver(ctx, 3)
		require.NoError(t, err)
		assert.Equal(t, uint64(8), own.Epoch())
		v, err := own.Versions().Next(ctx)
		require.NoError(t, err)
		assert.Equal(t, uint64(8<<42), v, "above every version the legacy epoch 7 wrote (7<<42 | n, n < 2^42)")
		b, _, err := st.Get(ctx, PartKey(5, 3), PartCCols(EpochCC))
		require.NoError(t, err)
		assert.Equal(t, EncodeEpochRow(EpochRow{Epoch: 8, Top: 8<<42 - 1 + VersionRange}), b)
	})
}

// TestVersionRangesOrderOwners: each takeover's range starts above the
// last version any earlier owner reserved, extensions included; a
// deposed owner cannot extend, so its versions stay below the new
// owner's; the range grows as writes need it.
func TestVersionRangesOrderOwners(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st storage.Storage) {
		ctx := context.Background()
		a := New(st, 5)
		a.versionRange = 4
		first, err := a.TakeOver(ctx, 3)
		require.NoError(t, err)
		var got []uint64
		for range 10 { // 1..4, then two extensions
			v, err := first.Versions().Next(ctx)
			require.NoError(t, err)
			got = append(got, v)
		}
		assert.Equal(t, []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, got)
		r, _, err := a.readEpochRow(ctx, 3)
		require.NoError(t, err)
		assert.Equal(t, EpochRow{Epoch: 1, Top: 12}, r, "two extensions of 4")

		second, err := a.TakeOver(ctx, 3)
		require.NoError(t, err)
		v, err := second.Versions().Next(ctx)
		require.NoError(t, err)
		assert.Equal(t, uint64(13), v, "above the first owner's extended range")
		// The first owner uses what it reserved (11, 12), then cannot
		// extend: the partition has a later owner.
		for _, want := range []uint64{11, 12} {
			v, err := first.Versions().Next(ctx)
			require.NoError(t, err)
			assert.Equal(t, want, v)
		}
		_, err = first.Versions().Next(ctx)
		require.ErrorIs(t, err, storage.ErrVersionsExhausted)
		require.ErrorIs(t, err, ErrDeposed)
		err = first.PutPLogOffset(ctx, 99)
		require.ErrorIs(t, err, ErrDeposed, "a deposed owner's write fails once its range is used up")
		require.NoError(t, second.PutPLogOffset(ctx, 7))
		off, _, err := a.GetPLogOffset(ctx, 3)
		require.NoError(t, err)
		assert.Equal(t, isequencer.PLogOffset(7), off)
	})
}

// TestVersionSpaceExhausted: a row whose top leaves no room for another
// range refuses the takeover and the extension.
func TestVersionSpaceExhausted(t *testing.T) {
	st := mem.New(mem.Options{})
	defer st.Close()
	ctx := context.Background()
	a := New(st, 5)
	require.NoError(t, st.Put(ctx, PartKey(5, 3), PartCCols(EpochCC), EncodeEpochRow(EpochRow{Epoch: 9, Top: storage.MaxVersion - VersionRange + 1})))
	_, err := a.TakeOver(ctx, 3)
	require.ErrorIs(t, err, ErrVersionSpace)
	_, err = a.extendVersions(ctx, 3, 9, storage.MaxVersion-VersionRange+1)
	require.ErrorIs(t, err, ErrVersionSpace)
}

// TestExtendUnknownOutcome: an extension whose answer was lost is found
// applied on the re-read and taken; one that failed is retried.
func TestExtendUnknownOutcome(t *testing.T) {
	inner := mem.New(mem.Options{})
	defer inner.Close()
	st, err := faulty.New(inner, faulty.Options{})
	require.NoError(t, err)
	ctx := context.Background()
	a := New(st, 5)
	a.versionRange = 2
	own, err := a.TakeOver(ctx, 3)
	require.NoError(t, err)
	lost := errors.Join(storage.ErrUnknownOutcome, errors.New("answer lost"))
	require.NoError(t, st.SetRules(faulty.Rule{Ops: []string{faulty.OpCompareAndSwap}, Action: faulty.Fail, Times: 1, AfterCall: true, Err: lost}))
	for want := uint64(1); want <= 4; want++ {
		v, err := own.Versions().Next(ctx)
		require.NoError(t, err)
		require.Equal(t, want, v)
	}
	require.NoError(t, st.SetRules(faulty.Rule{Ops: []string{faulty.OpCompareAndSwap}, Action: faulty.Fail, Times: 1, Err: lost}))
	for want := uint64(5); want <= 6; want++ {
		v, err := own.Versions().Next(ctx)
		require.NoError(t, err)
		require.Equal(t, want, v)
	}
	r, _, err := a.readEpochRow(ctx, 3)
	require.NoError(t, err)
	assert.Equal(t, EpochRow{Epoch: 1, Top: 6}, r)
}

// TestTakeOverPastRestore: the owner after a restore orders above every
// epoch and version a lost period of fewer than RestoreEpochs takeovers
// took (a backup's row, then takeovers the restore forgot), and so does
// every owner after it.
func TestTakeOverPastRestore(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st storage.Storage) {
		ctx := context.Background()
		a := New(st, 5)
		_, err := a.TakeOver(ctx, 3)
		require.NoError(t, err)
		backup, _, err := st.Get(ctx, PartKey(5, 3), PartCCols(EpochCC))
		require.NoError(t, err)

		var lost *Owner // the lost period's last owner, with its range extended
		for range 3 {
			lost, err = a.TakeOver(ctx, 3)
			require.NoError(t, err)
		}
		_, err = a.extendVersions(ctx, 3, lost.Epoch(), 1<<34)
		require.NoError(t, err)
		b, _, err := st.Get(ctx, PartKey(5, 3), PartCCols(EpochCC))
		require.NoError(t, err)
		top, err := DecodeEpochRow(b, "row")
		require.NoError(t, err)

		require.NoError(t, st.Put(ctx, PartKey(5, 3), PartCCols(EpochCC), backup)) // the restore
		past, err := a.TakeOverPastRestore(ctx, 3)
		require.NoError(t, err)
		assert.Equal(t, uint64(2+RestoreEpochs), past.Epoch(), "RestoreEpochs above the backup's epoch 1")
		v, err := past.Versions().Next(ctx)
		require.NoError(t, err)
		assert.Greater(t, v, top.Top, "above every version the lost period reserved")
		assert.Greater(t, past.Epoch(), lost.Epoch())

		next, err := a.TakeOver(ctx, 3)
		require.NoError(t, err)
		assert.Equal(t, past.Epoch()+1, next.Epoch())
		w, err := next.Versions().Next(ctx)
		require.NoError(t, err)
		assert.Greater(t, w, v)

		require.NoError(t, st.Put(ctx, PartKey(5, 3), PartCCols(EpochCC), EncodeEpochRow(EpochRow{Epoch: 9, Top: storage.MaxVersion - RestoreVersions})))
		_, err = a.TakeOverPastRestore(ctx, 3)
		require.ErrorIs(t, err, ErrVersionSpace)
	})
}
