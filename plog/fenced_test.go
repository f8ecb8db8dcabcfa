package plog_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/plog/plogtest"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/drivertest"
	"github.com/cqlseq/cqlseq/storage/faulty"
	"github.com/cqlseq/cqlseq/storage/mem"
)

func TestFencedBlockBoundary(t *testing.T) {
	drivertest.EachPath(t, func(t *testing.T, st storage.Storage) { plogtest.BlockBoundary(t, st, 1) })
}

func TestFencedGroupCaps(t *testing.T) {
	drivertest.EachPath(t, func(t *testing.T, st storage.Storage) { plogtest.GroupCaps(t, st, 1) })
}

func TestLargeGroups(t *testing.T) {
	drivertest.EachPath(t, func(t *testing.T, st storage.Storage) { plogtest.LargeGroups(t, st, 1) })
}

func TestFencedSecondOwner(t *testing.T) {
	drivertest.EachPath(t, func(t *testing.T, st storage.Storage) { plogtest.SecondOwner(t, st, 1) })
}

func TestFencedPlantedConflict(t *testing.T) {
	drivertest.EachPath(t, func(t *testing.T, st storage.Storage) { plogtest.PlantedConflict(t, st, 1) })
}

func TestFencedSplitGroupTakeover(t *testing.T) {
	drivertest.EachPath(t, func(t *testing.T, st storage.Storage) { plogtest.SplitGroupTakeover(t, st, 1) })
}

func TestFencedRecordsAfterEvents(t *testing.T) {
	drivertest.EachPath(t, func(t *testing.T, st storage.Storage) { plogtest.RecordsAfterEvents(t, st, 1) })
}

func TestFenceNotReadAsEvent(t *testing.T) {
	drivertest.EachPath(t, func(t *testing.T, st storage.Storage) { plogtest.FenceNotReadAsEvent(t, st, 1) })
}

// TestFencedRaceFreshBlock runs the race many times, each on a fresh
// partition.
func TestFencedRaceFreshBlock(t *testing.T) {
	drivertest.EachPath(t, func(t *testing.T, st storage.Storage) {
		for part := range isequencer.PartitionID(30) {
			plogtest.RaceFreshBlock(t, st, st, st, part)
		}
	})
}

func TestFencedRaceTakeover(t *testing.T) {
	drivertest.EachPath(t, func(t *testing.T, st storage.Storage) {
		for part := range isequencer.PartitionID(10) {
			plogtest.RaceTakeover(t, st, st, part, 20)
		}
	})
}

func TestFencedWriterOptions(t *testing.T) {
	_, err := plog.NewFencedWriter(plog.FencedWriterOptions{MaxChunkEvents: -1, MaxChunkBytes: -2})
	require.ErrorIs(t, err, plog.ErrInvalidOptions)
	for _, want := range []string{"Storage is nil", "Epoch 0", "MaxChunkEvents -1", "MaxChunkBytes -2"} {
		assert.Contains(t, err.Error(), want)
	}
	o := plog.FencedWriterOptions{}
	o.EnsureDefaults()
	assert.Equal(t, plog.DefaultMaxChunkEvents, o.MaxChunkEvents)
	assert.Equal(t, 32<<10, o.MaxChunkBytes)

	st := mem.New(mem.Options{})
	defer st.Close()
	w, err := plog.NewFencedWriter(plog.FencedWriterOptions{Storage: st, Partition: 3, Epoch: 9})
	require.NoError(t, err)
	assert.Equal(t, uint64(9), w.Epoch())
	assert.Equal(t, isequencer.PartitionID(3), w.Partition())

	_, err = plog.NewWriter(plog.WriterOptions{Storage: st, Mode: plog.ModeFenced})
	require.ErrorIs(t, err, plog.ErrInvalidOptions)
	assert.Contains(t, err.Error(), "NewFencedWriter")
}

// TestFencedInvalidGroups: bad groups write nothing and do not stop the
// writer.
func TestFencedInvalidGroups(t *testing.T) {
	st := mem.New(mem.Options{})
	defer st.Close()
	ctx := context.Background()
	w := plogtest.NewWriter(t, st, 1, 1, 2, 0)
	bad := plogtest.Group(1, 5, 4)
	bad[3].Numbers[0].Number = 0
	for name, g := range map[string][]*plog.Event{
		"offset 0":          plogtest.Group(1, 0, 2),
		"gap":               {plogtest.Event(1, 5), plogtest.Event(1, 7)},
		"descending":        {plogtest.Event(1, 6), plogtest.Event(1, 5)},
		"repeated":          {plogtest.Event(1, 5), plogtest.Event(1, 5)},
		"nil event":         {plogtest.Event(1, 5), nil},
		"number 0 (last)":   bad,
		"WSID 0":            {plogtest.Event(0, 5)},
		"record ID 0 first": {{Offset: 5, WSID: 1, Records: []plog.RecordID{0}}},
	} {
		err := w.WriteGroup(ctx, g)
		require.ErrorIs(t, err, storage.ErrInvalidArgument, name)
		assert.Contains(t, err.Error(), "partition 1", name)
		assert.Empty(t, plogtest.ReadLog(t, st, 1, 1), name)
		_, ok, _ := plog.ReadFence(ctx, st, 1, 5)
		assert.False(t, ok, "%s: no fence either", name)
	}
	require.NoError(t, w.Stopped())
	require.NoError(t, w.WriteGroup(ctx, nil), "an empty group is a no-op")
	require.NoError(t, w.WriteGroup(ctx, plogtest.Group(1, 1, 5)))
	assert.Equal(t, plogtest.Span(1, 1, 5), plogtest.ReadLog(t, st, 1, 1))
}

// TestFencedStorageErrors: storage errors are returned wrapped and do not
// stop the writer; a batch whose outcome was unknown but applied is
// learned from at the next group (its fence is the writer's own).
func TestFencedStorageErrors(t *testing.T) {
	inner := mem.New(mem.Options{})
	defer inner.Close()
	ctx := context.Background()
	// The contract's calls (ApplyBatchIf, PutBatch) are faulted below.
	st, err := faulty.New(drivertest.ContractOnly(inner), faulty.Options{})
	require.NoError(t, err)
	w := plogtest.NewWriter(t, st, 1, 1, 0, 0)

	require.NoError(t, st.SetRules(faulty.Rule{Ops: []string{faulty.OpApplyBatchIf}, Action: faulty.Fail, Times: 1}))
	err = w.WriteGroup(ctx, plogtest.Group(1, 1, 3))
	require.ErrorIs(t, err, storage.ErrUnavailable)
	assert.Contains(t, err.Error(), "partition 1 offsets 1..3 (epoch 1)")
	require.NoError(t, w.Stopped())

	// Applied, but the writer sees an unknown outcome: the events and the
	// fence are stored, the records are not.
	require.NoError(t, st.SetRules(faulty.Rule{Ops: []string{faulty.OpApplyBatchIf}, Action: faulty.Fail, Err: storage.ErrUnknownOutcome, AfterCall: true, Times: 1}))
	err = w.WriteGroup(ctx, plogtest.Group(1, 1, 3))
	require.ErrorIs(t, err, storage.ErrUnknownOutcome)
	require.NoError(t, w.Stopped())
	assert.Equal(t, plogtest.Span(1, 1, 3), plogtest.ReadLog(t, inner, 1, 1))
	require.NoError(t, w.WriteGroup(ctx, plogtest.Group(1, 4, 2)), "the fence holds the writer's epoch: write under it")
	assert.Equal(t, plogtest.Span(1, 1, 5), plogtest.ReadLog(t, inner, 1, 1))

	// Records fail after the events are stored: a transient failure is
	// retried, the records are written.
	require.NoError(t, st.SetRules(faulty.Rule{Ops: []string{faulty.OpPutBatch}, Action: faulty.Fail, Times: 2}))
	require.NoError(t, w.WriteGroup(ctx, plogtest.Group(1, 6, 1)))
	_, ok, err := inner.Get(ctx, plog.RecordPKey(1, 6), plog.RecordCCols(6))
	require.NoError(t, err)
	assert.True(t, ok, "the record of offset 6 is written after two failed Puts")
	// A failure that outlasts the retries is reported (the events are
	// stored), and does not stop the writer.
	require.NoError(t, st.SetRules(faulty.Rule{Ops: []string{faulty.OpPutBatch}, Action: faulty.Fail}))
	err = w.WriteGroup(ctx, plogtest.Group(1, 7, 1))
	require.ErrorIs(t, err, storage.ErrUnavailable)
	assert.Contains(t, err.Error(), "the events are stored")
	assert.Contains(t, err.Error(), "(retried)")
	require.NoError(t, w.Stopped())
	st.Clear()
	assert.Equal(t, plogtest.Span(1, 1, 7), plogtest.ReadLog(t, inner, 1, 1))

	// The fence re-read fails after a refused batch: not sticky either.
	require.NoError(t, inner.Put(ctx, plog.EventPKey(1, 8), plog.EventCCols(8), []byte{1}))
	require.NoError(t, st.SetRules(faulty.Rule{Ops: []string{faulty.OpGet}, Action: faulty.Fail, Times: 1}))
	err = w.WriteGroup(ctx, plogtest.Group(1, 8, 1))
	require.ErrorIs(t, err, storage.ErrUnavailable)
	assert.Contains(t, err.Error(), "not applied")
	require.NoError(t, w.Stopped())
	require.ErrorIs(t, w.WriteGroup(ctx, plogtest.Group(1, 8, 1)), plog.ErrConflict)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	w2 := plogtest.NewWriter(t, inner, 2, 1, 0, 0)
	require.ErrorIs(t, w2.WriteGroup(cctx, plogtest.Group(1, 1, 1)), context.Canceled)
	require.NoError(t, w2.Stopped())
}

// TestFencedCorruptFence: a fence that is not 8 bytes stops the writer and
// the sweep with ErrCorrupt.
func TestFencedCorruptFence(t *testing.T) {
	st := mem.New(mem.Options{})
	defer st.Close()
	ctx := context.Background()
	require.NoError(t, st.Put(ctx, plog.EventPKey(1, 1), plog.FenceCCols(), []byte{1, 2}))
	w := plogtest.NewWriter(t, st, 1, 1, 0, 0)
	err := w.WriteGroup(ctx, plogtest.Group(1, 1, 1))
	require.ErrorIs(t, err, plog.ErrCorrupt)
	assert.Contains(t, err.Error(), "fence of block 0 is 2 bytes")
	require.ErrorIs(t, w.Stopped(), plog.ErrCorrupt)
	_, err = plog.Sweep(ctx, st, 1, 1, 2)
	require.ErrorIs(t, err, plog.ErrCorrupt)
}

func TestSweep(t *testing.T) {
	drivertest.EachPath(t, func(t *testing.T, st storage.Storage) {
		ctx := context.Background()
		_, err := plog.Sweep(ctx, nil, 1, 1, 1)
		require.ErrorIs(t, err, storage.ErrInvalidArgument)
		_, err = plog.Sweep(ctx, st, 1, 1, 0)
		require.ErrorIs(t, err, storage.ErrInvalidArgument)

		// Blocks 0 and 1 with events but no fence (written before fenced
		// mode), block 2 with an older fence and no event, block 3 empty.
		tw, err := plog.NewWriter(plog.WriterOptions{Storage: st, Partition: 1, Mode: plog.ModeTrust2})
		require.NoError(t, err)
		for _, off := range []isequencer.PLogOffset{5, 4096} {
			require.NoError(t, tw.Write(ctx, plogtest.Event(1, off)))
		}
		require.NoError(t, st.Put(ctx, plog.EventPKey(1, 2*4096), plog.FenceCCols(), plogtest.EpochBytes(1)))
		n, err := plog.Sweep(ctx, st, 1, 7, 4)
		require.NoError(t, err)
		assert.Equal(t, 4, n, "blocks 0, 1 inserted, 2 swapped, 3 (the first empty) inserted")
		for b := range uint64(4) {
			e, ok, err := plog.ReadFence(ctx, st, 1, isequencer.PLogOffset(b*4096))
			require.NoError(t, err)
			assert.True(t, ok, "block %d", b)
			assert.Equal(t, uint64(4), e, "block %d", b)
		}
		_, ok, _ := plog.ReadFence(ctx, st, 1, 4*4096)
		assert.False(t, ok, "the sweep stops at the first empty block")

		n, err = plog.Sweep(ctx, st, 1, 0, 4)
		require.NoError(t, err)
		assert.Zero(t, n, "offset 0 is 1; all fenced already; stops at block 2 (ours, no event)")

		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err = plog.Sweep(cctx, st, 1, 1, 5)
		require.ErrorIs(t, err, context.Canceled)
	})
}

// TestSweepUnknownOutcomes: lost races and unknown outcomes re-read the
// block; an unknown outcome that applied is recognised as the sweep's own
// fence.
func TestSweepUnknownOutcomes(t *testing.T) {
	inner := mem.New(mem.Options{})
	defer inner.Close()
	ctx := context.Background()
	st, err := faulty.New(inner, faulty.Options{Rules: []faulty.Rule{{
		Ops: []string{faulty.OpInsertIfNotExists}, Action: faulty.Fail, Err: storage.ErrUnknownOutcome, AfterCall: true, Times: 1,
	}}})
	require.NoError(t, err)
	n, err := plog.Sweep(ctx, st, 1, 1, 1)
	require.NoError(t, err)
	assert.Zero(t, n, "the fence written with an unknown outcome is not counted")
	e, ok, _ := plog.ReadFence(ctx, inner, 1, 1)
	assert.True(t, ok)
	assert.Equal(t, uint64(1), e)

	w := plogtest.NewWriter(t, inner, 1, 1, 0, 0)
	require.NoError(t, w.WriteGroup(ctx, plogtest.Group(1, 1, 3)))
	require.NoError(t, st.SetRules(faulty.Rule{Ops: []string{faulty.OpCompareAndSwap}, Action: faulty.Fail, Err: storage.ErrUnknownOutcome, Times: 3}))
	n, err = plog.Sweep(ctx, st, 1, 1, 2)
	require.NoError(t, err)
	assert.Equal(t, 2, n)

	require.NoError(t, st.SetRules(faulty.Rule{Ops: []string{faulty.OpCompareAndSwap}, Action: faulty.Fail, Err: storage.ErrUnknownOutcome}))
	_, err = plog.Sweep(ctx, st, 1, 1, 3)
	require.ErrorContains(t, err, "attempts")

	require.NoError(t, st.SetRules(faulty.Rule{Ops: []string{faulty.OpCompareAndSwap}, Action: faulty.Fail}))
	_, err = plog.Sweep(ctx, st, 1, 1, 3)
	require.ErrorIs(t, err, storage.ErrUnavailable)
	require.False(t, errors.Is(err, plog.ErrFenced))
}

// TestFencedOwnInDoubtEventSurfaces: a group whose batch was applied but
// reported an unknown outcome (a Paxos proposal accepted before a crash,
// completed later) is found at the offsets the writer writes again after
// a replay that did not see it. The writer must not stop for its own
// events (it returns ErrOwnEventStored, not ErrConflict, and writes on);
// a different event there is still a conflict that stops it.
func TestFencedOwnInDoubtEventSurfaces(t *testing.T) {
	ctx := context.Background()
	inner := mem.New(mem.Options{})
	defer inner.Close()
	st, err := faulty.New(inner, faulty.Options{})
	require.NoError(t, err)
	w := plogtest.NewWriter(t, st, 1, 1, 0, 0)
	owner := plogtest.OwnerOf(1, 1)
	require.NoError(t, w.WriteGroup(ctx, plogtest.Group(owner, 1, 3)))

	require.NoError(t, st.SetRules(faulty.Rule{Ops: []string{faulty.OpApplyBatchIf, faulty.OpApplyBatchesIf},
		Action: faulty.Fail, Err: storage.ErrUnknownOutcome, AfterCall: true, Times: 1}))
	err = w.WriteGroup(ctx, plogtest.Group(owner, 4, 2)) // applied, outcome unknown
	require.ErrorIs(t, err, storage.ErrUnknownOutcome)

	// The replay missed offsets 4-5: the next commands take them again.
	other := plogtest.OwnerOf(1, 2)
	err = w.WriteGroup(ctx, plogtest.Group(other, 4, 2))
	require.ErrorIs(t, err, plog.ErrOwnEventStored)
	require.NotErrorIs(t, err, plog.ErrConflict)
	// After the next replay, which sees them, the writer goes on.
	require.NoError(t, w.WriteGroup(ctx, plogtest.Group(other, 6, 2)))
	got := plogtest.ReadLog(t, inner, 1, 1)
	require.Len(t, got, 7)
	assert.Equal(t, owner, got[4].Owner, "offset 5 holds the in-doubt write")
	assert.Equal(t, other, got[5].Owner)

	// An event the writer never wrote, under its own fence: a conflict.
	planted, err := plog.AppendEncoded(nil, plogtest.Event(plogtest.OwnerOf(1, 3), 8))
	require.NoError(t, err)
	require.NoError(t, inner.Put(ctx, plog.EventPKey(1, 8), plog.EventCCols(8), planted))
	err = w.WriteGroup(ctx, plogtest.Group(other, 8, 1))
	require.ErrorIs(t, err, plog.ErrConflict)
	require.ErrorIs(t, w.WriteGroup(ctx, plogtest.Group(other, 9, 1)), plog.ErrConflict, "stopped")
}
