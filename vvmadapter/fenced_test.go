package vvmadapter

import (
	"context"
	"encoding/hex"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/drivertest"
	"github.com/cqlseq/cqlseq/storage/faulty"
	"github.com/cqlseq/cqlseq/storage/mem"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestGoldenFencedLayouts pins the fenced mode's persisted bytes: the
// 10-byte epoch number cell and the epoch row.
func TestGoldenFencedLayouts(t *testing.T) {
	assert.Equal(t, "a1b2"+"0102030405060708", hex.EncodeToString(WSEpochCCols(0xA1B2, 0x0102030405060708)))
	assert.Equal(t, "0001"+"0000000000000001", hex.EncodeToString(WSEpochCCols(1, 1)))

	st := mem.New(mem.Options{})
	defer st.Close()
	ctx := context.Background()
	a := New(st, 0x0A0B0C0D)
	require.NoError(t, a.putCells(ctx, 0x1122334455667788, []isequencer.SeqValue{
		{Key: isequencer.NumberKey{WSID: 0x0102030405060708, SeqID: 0x0304}, Value: 0xF1F2F3F4F5F6F7F8},
	}))
	e, err := a.NextEpoch(ctx, 0xBEEF)
	require.NoError(t, err)
	require.Equal(t, uint64(1), e)

	type kv struct{ c, v string }
	read := func(pKey string) (got []kv) {
		pk, err := hex.DecodeString(pKey)
		require.NoError(t, err)
		require.NoError(t, st.Read(ctx, pk, nil, nil, func(c, v []byte) error {
			got = append(got, kv{hex.EncodeToString(c), hex.EncodeToString(v)})
			return nil
		}))
		return got
	}
	assert.Equal(t, []kv{{"0304" + "1122334455667788", "f1f2f3f4f5f6f7f8"}}, read("00000003"+"0a0b0c0d"+"0102030405060708"))
	// u64 epoch ‖ u64 top of the versions reserved (VersionRange from 0).
	assert.Equal(t, []kv{{"00000001", "0000000000000001" + "0000000100000000"}}, read("00000002"+"0a0b0c0d"+"beef"))
	r, err := DecodeEpochRow(EncodeEpochRow(EpochRow{Epoch: 0x0102, Top: 0x0A0B}), "row")
	require.NoError(t, err)
	assert.Equal(t, EpochRow{Epoch: 0x0102, Top: 0x0A0B}, r)
}

func nv(ws isequencer.WSID, id isequencer.SeqID, n isequencer.Number) isequencer.SeqValue {
	return isequencer.SeqValue{Key: isequencer.NumberKey{WSID: ws, SeqID: id}, Value: n}
}

func TestGetNumbersMax(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, inner storage.Storage) {
		st := drivertest.NewCounting(inner)
		ctx := context.Background()
		a := New(st, 5)
		ids := []isequencer.SeqID{1, 2, 3, 2}
		dst := []isequencer.Number{7, 7, 7, 7, 7}
		require.NoError(t, a.GetNumbersMax(ctx, 1, ids, dst))
		assert.Equal(t, []isequencer.Number{0, 0, 0, 0, 7}, dst, "missing numbers are 0; dst past ids untouched")

		// Seed cells (epoch 0), then epochs 1..3 with numbers going up and down.
		require.NoError(t, a.putCells(ctx, 0, []isequencer.SeqValue{nv(1, 1, 10), nv(1, 2, 500)}))
		require.NoError(t, a.putCells(ctx, 1, []isequencer.SeqValue{nv(1, 1, 40), nv(1, 2, 100)}))
		require.NoError(t, a.putCells(ctx, 3, []isequencer.SeqValue{nv(1, 1, 30)}))
		require.NoError(t, a.putCells(ctx, 2, []isequencer.SeqValue{nv(1, 1, 20), nv(1, 9, 1e6), nv(2, 3, 1e6)}))
		require.NoError(t, a.putCells(ctx, 1, nil), "an empty batch is a no-op")

		st.Reset()
		require.NoError(t, a.GetNumbersMax(ctx, 1, ids, dst))
		assert.Equal(t, []isequencer.Number{40, 500, 0, 500}, dst[:4], "max over the seed and every epoch; SeqID 9 and WSID 2 ignored")
		assert.Equal(t, int64(1), st.Calls(faulty.OpRead), "one Read of the workspace partition")
		assert.Zero(t, st.Calls(faulty.OpGetBatch))

		// Every cell, in clustering key order.
		var cells []string
		require.NoError(t, a.ReadNumberCells(ctx, 1, func(c NumberCell) error { cells = append(cells, c.String()); return nil }))
		assert.Equal(t, []string{
			"SeqID 1 = 10", "SeqID 1@epoch 1 = 40", "SeqID 1@epoch 2 = 20", "SeqID 1@epoch 3 = 30",
			"SeqID 2 = 500", "SeqID 2@epoch 1 = 100", "SeqID 9@epoch 2 = 1000000",
		}, cells)

		require.NoError(t, a.GetNumbersMax(ctx, 1, nil, dst), "no SeqIDs: nothing to read")
		require.ErrorIs(t, a.GetNumbersMax(ctx, 1, ids, dst[:3]), storage.ErrInvalidArgument)
	})
}

// TestGetWorkspacesNumbersMax: one ReadPartitions gives each workspace
// what GetNumbersMax gives it.
func TestGetWorkspacesNumbersMax(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, inner storage.Storage) {
		st := drivertest.NewCounting(inner)
		ctx := context.Background()
		a := New(st, 5)
		require.NoError(t, a.putCells(ctx, 0, []isequencer.SeqValue{nv(1, 1, 10), nv(1, 2, 500), nv(3, 1, 7)}))
		require.NoError(t, a.putCells(ctx, 2, []isequencer.SeqValue{nv(1, 1, 40), nv(1, 9, 1e6), nv(2, 3, 66)}))
		require.NoError(t, a.putCells(ctx, 1, []isequencer.SeqValue{nv(2, 3, 99), nv(3, 1, 5)}))
		require.NoError(t, New(st, 6).putCells(ctx, 0, []isequencer.SeqValue{nv(4, 1, 1e6)}), "another app's workspace 4")

		reads := []WorkspaceNumbers{
			{WSID: 1, IDs: []isequencer.SeqID{1, 2, 3}, Numbers: []isequencer.Number{7, 7, 7, 7}},
			{WSID: 2, IDs: []isequencer.SeqID{3}, Numbers: make([]isequencer.Number, 1)},
			{WSID: 3, IDs: []isequencer.SeqID{1}, Numbers: make([]isequencer.Number, 1)},
			{WSID: 4, IDs: []isequencer.SeqID{1}, Numbers: []isequencer.Number{7}},
		}
		st.Reset()
		require.NoError(t, a.GetWorkspacesNumbersMax(ctx, reads))
		assert.Equal(t, []isequencer.Number{40, 500, 0, 7}, reads[0].Numbers, "max over seed and epochs; Numbers past IDs untouched")
		assert.Equal(t, []isequencer.Number{99}, reads[1].Numbers)
		assert.Equal(t, []isequencer.Number{7}, reads[2].Numbers)
		assert.Equal(t, []isequencer.Number{0}, reads[3].Numbers, "none in this app")
		assert.Equal(t, int64(1), st.Calls(faulty.OpReadPartitions), "one read of every partition")
		assert.Zero(t, st.Calls(faulty.OpRead))
		for _, r := range reads {
			want := make([]isequencer.Number, len(r.IDs))
			require.NoError(t, a.GetNumbersMax(ctx, r.WSID, r.IDs, want))
			assert.Equal(t, want, r.Numbers[:len(r.IDs)], "as GetNumbersMax, WSID %d", r.WSID)
		}

		require.NoError(t, a.GetWorkspacesNumbersMax(ctx, nil), "no workspaces")
		twice := []WorkspaceNumbers{reads[1], {WSID: 2, IDs: []isequencer.SeqID{1}, Numbers: make([]isequencer.Number, 1)}}
		require.ErrorIs(t, a.GetWorkspacesNumbersMax(ctx, twice), storage.ErrInvalidArgument, "a workspace twice")
		short := []WorkspaceNumbers{{WSID: 1, IDs: []isequencer.SeqID{1, 2}, Numbers: make([]isequencer.Number, 1)}}
		require.ErrorIs(t, a.GetWorkspacesNumbersMax(ctx, short), storage.ErrInvalidArgument, "no room")
		many := make([]WorkspaceNumbers, storage.MaxReadPartitions+1)
		for i := range many {
			many[i].WSID = isequencer.WSID(i + 1)
		}
		require.ErrorIs(t, a.GetWorkspacesNumbersMax(ctx, many), storage.ErrInvalidArgument, "too many")
		require.NoError(t, a.GetWorkspacesNumbersMax(ctx, many[:storage.MaxReadPartitions]))

		require.NoError(t, st.Put(ctx, WSKey(5, 3), WSEpochCCols(1, 7), []byte{1, 2, 3}))
		err := a.GetWorkspacesNumbersMax(ctx, reads)
		assert.ErrorIs(t, err, ErrBadCell)
		assert.Contains(t, err.Error(), "WSID 3: vvmadapter: bad number cell: SeqID 1@epoch 7")
		for _, r := range reads {
			assert.Equal(t, make([]isequencer.Number, len(r.IDs)), r.Numbers[:len(r.IDs)], "zeroed on an error, WSID %d", r.WSID)
		}
		require.NoError(t, st.Close())
		require.ErrorIs(t, a.GetWorkspacesNumbersMax(ctx, reads[:1]), storage.ErrClosed)
	})
}

func TestGetNumbersMaxBadCells(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st storage.Storage) {
		ctx := context.Background()
		a := New(st, 5)
		dst := make([]isequencer.Number, 2)

		require.NoError(t, st.Put(ctx, WSKey(5, 9), WSEpochCCols(4, 7), []byte{1, 2, 3}))
		err := a.GetNumbersMax(ctx, 9, []isequencer.SeqID{3, 4}, dst)
		require.Error(t, err)
		assert.ErrorIs(t, err, ErrBadCell)
		assert.Contains(t, err.Error(), "WSID 9: vvmadapter: bad number cell: SeqID 4@epoch 7")
		assert.Equal(t, []isequencer.Number{0, 0}, dst)
		require.NoError(t, a.GetNumbersMax(ctx, 9, []isequencer.SeqID{3}, dst), "a bad value of a SeqID not asked for is not read")

		require.NoError(t, st.Put(ctx, WSKey(5, 10), SeqCCols(4), []byte{1}))
		err = a.GetNumbersMax(ctx, 10, []isequencer.SeqID{4}, dst)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "WSID 10: vvmadapter: bad number cell: SeqID 4:")

		require.NoError(t, st.Put(ctx, WSKey(5, 11), []byte{0, 4, 1}, EncodeU64(1)))
		err = a.GetNumbersMax(ctx, 11, []isequencer.SeqID{4}, dst)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "WSID 11")
		assert.Contains(t, err.Error(), "000401")

		require.NoError(t, st.Close())
		require.ErrorIs(t, a.GetNumbersMax(ctx, 1, []isequencer.SeqID{4}, dst), storage.ErrClosed)
		require.ErrorIs(t, a.putCells(ctx, 1, []isequencer.SeqValue{nv(1, 1, 1)}), storage.ErrClosed)
	})
}

func TestEpoch(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st storage.Storage) {
		ctx := context.Background()
		a := New(st, 5)
		e, err := a.GetEpoch(ctx, 3)
		require.NoError(t, err)
		assert.Zero(t, e, "absent: 0")
		for want := uint64(1); want <= 3; want++ {
			e, err = a.NextEpoch(ctx, 3)
			require.NoError(t, err)
			assert.Equal(t, want, e)
			got, err := a.GetEpoch(ctx, 3)
			require.NoError(t, err)
			assert.Equal(t, want, got)
		}
		e, _ = New(st, 6).GetEpoch(ctx, 3)
		assert.Zero(t, e, "apps do not share epochs")
		e, _ = a.GetEpoch(ctx, 4)
		assert.Zero(t, e, "partitions do not share epochs")

		require.NoError(t, st.Put(ctx, PartKey(5, 8), PartCCols(EpochCC), []byte{1}))
		_, err = a.GetEpoch(ctx, 8)
		require.ErrorContains(t, err, "epoch of partition 8")
		_, err = a.NextEpoch(ctx, 8)
		require.ErrorContains(t, err, "epoch of partition 8")

		require.NoError(t, st.Put(ctx, PartKey(5, 9), PartCCols(EpochCC), EncodeU64(math.MaxUint64)))
		_, err = a.NextEpoch(ctx, 9)
		require.ErrorContains(t, err, "maximum")

		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err = a.NextEpoch(cctx, 3)
		require.ErrorIs(t, err, context.Canceled)
	})
}

// TestNextEpochConcurrent: concurrent acquisitions never return the same
// epoch, and the stored epoch is the largest returned.
func TestNextEpochConcurrent(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st storage.Storage) {
		ctx := context.Background()
		const workers, each = 8, 10
		got := make(chan uint64, workers*each)
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				a := New(st, 5)
				for range each {
					e, err := a.NextEpoch(ctx, 1)
					if err != nil {
						t.Error(err)
						return
					}
					got <- e
				}
			})
		}
		wg.Wait()
		close(got)
		seen := map[uint64]bool{}
		var top uint64
		for e := range got {
			assert.False(t, seen[e], "epoch %d returned twice", e)
			seen[e] = true
			top = max(top, e)
		}
		assert.Len(t, seen, workers*each)
		stored, err := New(st, 5).GetEpoch(ctx, 1)
		require.NoError(t, err)
		assert.Equal(t, top, stored)
	})
}

// TestNextEpochUnknownOutcome: a write whose outcome is unknown is treated
// as lost; the epoch it wrote is skipped, never returned.
func TestNextEpochUnknownOutcome(t *testing.T) {
	inner := mem.New(mem.Options{})
	defer inner.Close()
	ctx := context.Background()
	st, err := faulty.New(inner, faulty.Options{Rules: []faulty.Rule{{
		Ops: []string{faulty.OpInsertIfNotExists, faulty.OpCompareAndSwap}, Action: faulty.Fail,
		Err: storage.ErrUnknownOutcome, AfterCall: true, Times: 2,
	}}})
	require.NoError(t, err)
	a := New(st, 5)
	e, err := a.NextEpoch(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, uint64(3), e, "1 (insert) and 2 (swap) were written with unknown outcomes and skipped")
	assert.Equal(t, uint64(2), st.Injected())

	// Unknown outcomes of writes that did not apply: retried from the re-read value.
	require.NoError(t, st.SetRules(faulty.Rule{Ops: []string{faulty.OpCompareAndSwap}, Action: faulty.Fail, Err: storage.ErrUnknownOutcome, Times: 3}))
	e, err = a.NextEpoch(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, uint64(4), e)

	require.NoError(t, st.SetRules(faulty.Rule{Ops: []string{faulty.OpCompareAndSwap}, Action: faulty.Fail, Err: storage.ErrUnknownOutcome}))
	_, err = a.NextEpoch(ctx, 1)
	require.ErrorIs(t, err, ErrEpochContended)
	assert.Contains(t, err.Error(), "partition 1")

	require.NoError(t, st.SetRules(faulty.Rule{Ops: []string{faulty.OpCompareAndSwap}, Action: faulty.Fail}))
	_, err = a.NextEpoch(ctx, 1)
	require.ErrorIs(t, err, storage.ErrUnavailable, "other errors are returned at once")
	assert.False(t, errors.Is(err, ErrEpochContended))
}

// lostRaces makes every CompareAndSwap lose: another writer raises the
// epoch just before each one.
type lostRaces struct {
	storage.Storage
	a     *Adapter
	races int
}

func (s *lostRaces) CompareAndSwap(ctx context.Context, pKey, cCols, oldValue, newValue []byte, ttl time.Duration) (bool, error) {
	if s.races > 0 {
		s.races--
		if _, err := s.a.NextEpoch(ctx, 1); err != nil {
			return false, err
		}
	}
	return s.Storage.CompareAndSwap(ctx, pKey, cCols, oldValue, newValue, ttl)
}

func TestNextEpochLostRaces(t *testing.T) {
	inner := mem.New(mem.Options{})
	defer inner.Close()
	ctx := context.Background()
	other := New(inner, 5)
	_, err := other.NextEpoch(ctx, 1)
	require.NoError(t, err)
	st := &lostRaces{Storage: inner, a: other, races: 3}
	e, err := New(st, 5).NextEpoch(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, uint64(5), e, "three lost races (2, 3, 4 went to the other), then 5")

	st.races = MaxNextEpochTries
	_, err = New(st, 5).NextEpoch(ctx, 1)
	require.ErrorIs(t, err, ErrEpochContended)
}

// putCells writes values unversioned to their cells of epoch: the seed
// cells (0), or the epoch cells fenced owners wrote before version ranges.
func (a *Adapter) putCells(ctx context.Context, epoch uint64, values []isequencer.SeqValue) error {
	if epoch == 0 {
		return a.putNumbers(ctx, nil, values)
	}
	rows := make([]storage.Row, len(values))
	for i, n := range values {
		rows[i] = storage.Row{PKey: WSKey(a.app, n.Key.WSID), CCols: WSEpochCCols(n.Key.SeqID, epoch), Value: EncodeU64(uint64(n.Value))}
	}
	if len(rows) == 0 {
		return nil
	}
	return a.st.PutBatch(ctx, rows)
}
