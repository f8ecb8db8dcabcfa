package seqstorage

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/drivertest"
	"github.com/cqlseq/cqlseq/storage/faulty"
	"github.com/cqlseq/cqlseq/storage/mem"
	"github.com/cqlseq/cqlseq/vvmadapter"
)

// TestAStorageWithoutOwnerWritesNothing: a Storage without an Owner reads,
// and refuses every write with ErrNotOwner before touching the store; so
// does ActualizeOnce with write, before it reads the PLog.
func TestAStorageWithoutOwnerWritesNothing(t *testing.T) {
	st := drivertest.NewCounting(mem.New(mem.Options{}))
	defer st.Close()
	replayed := false
	s, err := New(Options{Storage: st, App: app, Partition: part, Reader: readerFunc(func(context.Context, isequencer.PartitionID, isequencer.PLogOffset, func(*plog.Event) error) error {
		replayed = true
		return nil
	})})
	require.NoError(t, err)
	_, err = s.ReadNumbers(1, []isequencer.SeqID{1})
	require.NoError(t, err)
	st.Reset()
	err = s.WriteValuesAndNextPLogOffset([]isequencer.SeqValue{{Key: key(1, 1), Value: 5}}, 3)
	require.ErrorIs(t, err, ErrNotOwner)
	assert.Contains(t, err.Error(), "app 7 partition 3")
	_, err = s.ActualizeOnce(context.Background(), nil, true)
	require.ErrorIs(t, err, ErrNotOwner)
	assert.False(t, replayed, "ActualizeOnce read the PLog before refusing")
	for _, op := range faulty.AllOps() {
		assert.Zero(t, st.Calls(op), "%s called", op)
	}
	a, err := s.ActualizeOnce(context.Background(), nil, false)
	require.NoError(t, err, "reading needs no owner")
	assert.False(t, a.Written)
}

func TestOptionsOwnerMustBeThePartitions(t *testing.T) {
	st := mem.New(mem.Options{})
	defer st.Close()
	own := takeOver(t, st, app)
	_, err := New(Options{Storage: st, App: app, Partition: part + 1, Owner: own})
	require.ErrorIs(t, err, ErrInvalidOptions)
	assert.Contains(t, err.Error(), "Owner of app 7 partition 3, for app 7 partition 4")
	_, err = New(Options{Storage: st, App: app + 1, Partition: part, Owner: own})
	require.ErrorIs(t, err, ErrInvalidOptions)
}

// TestTakeOverFencesThePLog: with FencePLog the new epoch fences the PLog
// from the stored offset (a deposed fenced writer's next group is
// refused); a later owner's fence makes an older takeover fail with
// nothing owned; without FencePLog no fence is written.
func TestTakeOverFencesThePLog(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st storage.Storage) {
		ctx := context.Background()
		first, err := TakeOver(ctx, TakeOverOptions{Storage: st, App: app, Partition: part, FencePLog: st})
		require.NoError(t, err)
		assert.Equal(t, 1, first.FencedBlocks)
		w, err := plog.NewFencedWriter(plog.FencedWriterOptions{Storage: st, Partition: part, Epoch: first.Owner.Epoch()})
		require.NoError(t, err)
		e := &plog.Event{Offset: 1, WSID: 1, WSKind: 1, Numbers: []plog.SeqNumber{{SeqID: 1, Number: 1}}}
		require.NoError(t, w.WriteGroup(ctx, []*plog.Event{e}))
		require.NoError(t, first.Owner.PutPLogOffset(ctx, 2))

		second, err := TakeOver(ctx, TakeOverOptions{Storage: st, App: app, Partition: part, FencePLog: st})
		require.NoError(t, err)
		assert.Equal(t, isequencer.PLogOffset(2), second.StoredNext)
		assert.Greater(t, second.Owner.Epoch(), first.Owner.Epoch())
		e2 := &plog.Event{Offset: 2, WSID: 1, WSKind: 1, Numbers: []plog.SeqNumber{{SeqID: 1, Number: 2}}}
		require.ErrorIs(t, w.WriteGroup(ctx, []*plog.Event{e2}), plog.ErrFenced, "the deposed owner wrote after the takeover")

		// A takeover whose epoch is older than the PLog's fence owns nothing.
		stale, err := vvmadapter.New(st, app).TakeOver(ctx, part) // epoch 3
		require.NoError(t, err)
		_, err = plog.Sweep(ctx, st, part, 2, stale.Epoch()+5)
		require.NoError(t, err)
		own, err := TakeOver(ctx, TakeOverOptions{Storage: st, App: app, Partition: part, FencePLog: st})
		require.ErrorIs(t, err, plog.ErrFenced)
		assert.Nil(t, own)

		noFence, err := TakeOver(ctx, TakeOverOptions{Storage: st, App: app + 1, Partition: part})
		require.NoError(t, err)
		assert.Zero(t, noFence.FencedBlocks)
	})
}

func TestTakeOverStoreDown(t *testing.T) {
	st := mem.New(mem.Options{})
	require.NoError(t, st.Close())
	own, err := TakeOver(context.Background(), TakeOverOptions{Storage: st, App: app, Partition: part})
	require.ErrorIs(t, err, storage.ErrClosed)
	assert.Contains(t, err.Error(), "seqstorage: taking over app 7 partition 3")
	assert.Nil(t, own)
	_, err = TakeOver(context.Background(), TakeOverOptions{})
	require.ErrorIs(t, err, ErrInvalidOptions)
}
