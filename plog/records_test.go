package plog_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/faulty"
	"github.com/cqlseq/cqlseq/storage/mem"
)

// countingStore counts the batch writes that reach its store, and fails
// the test if one holds a row twice (two rows of one batch share its
// version: which one a CQL store keeps is not the later one).
type countingStore struct {
	storage.Storage
	t          *testing.T
	putBatches atomic.Int64
}

func (c *countingStore) PutBatch(ctx context.Context, rows []storage.Row) error {
	c.putBatches.Add(1)
	seen := map[string]bool{}
	for _, r := range rows {
		k := string(r.PKey) + "/" + string(r.CCols)
		assert.False(c.t, seen[k], "a batch holds row %x/%x twice", r.PKey, r.CCols)
		seen[k] = true
	}
	return c.Storage.PutBatch(ctx, rows)
}

// recordAt returns the offset the record row of (ws, id) names, or 0.
func recordAt(t *testing.T, st storage.Storage, ws isequencer.WSID, id plog.RecordID) isequencer.PLogOffset {
	t.Helper()
	v, ok, err := st.Get(context.Background(), plog.RecordPKey(ws, id), plog.RecordCCols(id))
	require.NoError(t, err)
	if !ok {
		return 0
	}
	for off := isequencer.PLogOffset(1); off < 1<<12; off++ {
		if string(v) == string(plog.RecordValue(off)) {
			return off
		}
	}
	t.Fatalf("record (%d, %d): value %x names no offset below 4096", ws, id, v)
	return 0
}

func TestWriteRecordsOfPutsVersionedRecordsInBatches(t *testing.T) {
	ctx := context.Background()
	inner := mem.New(mem.Options{})
	t.Cleanup(func() { inner.Close() })
	st := &countingStore{Storage: inner, t: t}
	v, err := storage.NewVersions(2, 100, 1<<20, nil)
	require.NoError(t, err)
	w, err := plog.NewWriter(plog.WriterOptions{Storage: st, Partition: 1, Mode: plog.ModeTrust2, Versions: v})
	require.NoError(t, err)

	n := 2*plog.RecordBatchRows + 10
	var events []*plog.Event
	for i := range n {
		events = append(events, &plog.Event{Partition: 1, Offset: isequencer.PLogOffset(i + 1), WSID: 7, Records: []plog.RecordID{plog.RecordID(1000 + i)}})
	}
	// The second event names the first one's record again: its row must
	// stand, put in a batch after the first's.
	events[1].Records[0] = 1000

	before := st.putBatches.Load()
	require.NoError(t, w.WriteRecordsOf(ctx, events, func(e *plog.Event, err error) { t.Errorf("conflict at %d: %v", e.Offset, err) }))
	assert.Equal(t, int64(4), st.putBatches.Load()-before, "1 row, then %d rows in batches of %d", n-1, plog.RecordBatchRows)
	assert.Equal(t, isequencer.PLogOffset(2), recordAt(t, inner, 7, 1000))
	assert.Equal(t, isequencer.PLogOffset(0), recordAt(t, inner, 7, 1001))
	for i := 2; i < n; i++ {
		require.Equal(t, isequencer.PLogOffset(i+1), recordAt(t, inner, 7, plog.RecordID(1000+i)), "record %d", 1000+i)
	}
}

func TestWriteRecordsOfNamesTrust0Conflicts(t *testing.T) {
	ctx := context.Background()
	st := mem.New(mem.Options{})
	t.Cleanup(func() { st.Close() })
	w, err := plog.NewWriter(plog.WriterOptions{Storage: st, Partition: 1, Mode: plog.ModeTrust0})
	require.NoError(t, err)
	// Record 11 of WSID 7 is another event's, at offset 9.
	require.NoError(t, st.Put(ctx, plog.RecordPKey(7, 11), plog.RecordCCols(11), plog.RecordValue(9)))

	events := []*plog.Event{
		{Partition: 1, Offset: 1, WSID: 7, Records: []plog.RecordID{10}},
		{Partition: 1, Offset: 2, WSID: 7, Records: []plog.RecordID{11, 12}},
		{Partition: 1, Offset: 3, WSID: 7, Records: []plog.RecordID{13}},
	}
	var conflicts []isequencer.PLogOffset
	require.NoError(t, w.WriteRecordsOf(ctx, events, func(e *plog.Event, err error) {
		assert.ErrorIs(t, err, plog.ErrRecordConflict)
		conflicts = append(conflicts, e.Offset)
	}))
	assert.Equal(t, []isequencer.PLogOffset{2}, conflicts)
	assert.Equal(t, isequencer.PLogOffset(1), recordAt(t, st, 7, 10))
	assert.Equal(t, isequencer.PLogOffset(9), recordAt(t, st, 7, 11), "another event's record is not replaced")
	assert.Equal(t, isequencer.PLogOffset(3), recordAt(t, st, 7, 13))
}

func TestWriteRecordsRetriesTransientFailures(t *testing.T) {
	ctx := context.Background()
	inner := mem.New(mem.Options{})
	t.Cleanup(func() { inner.Close() })
	st, err := faulty.New(inner, faulty.Options{Seed: 1})
	require.NoError(t, err)
	w, err := plog.NewWriter(plog.WriterOptions{Storage: st, Partition: 1, Mode: plog.ModeTrust0})
	require.NoError(t, err)
	e := &plog.Event{Partition: 1, Offset: 4, WSID: 7, Records: []plog.RecordID{20, 21}}

	// Twice unavailable, then the insert lands with its answer lost.
	require.NoError(t, st.SetRules(
		faulty.Rule{Ops: []string{faulty.OpApplyBatchIf}, Action: faulty.Fail, Times: 2},
		faulty.Rule{Ops: []string{faulty.OpApplyBatchIf}, Action: faulty.Fail, Err: storage.ErrUnknownOutcome, AfterCall: true, Times: 1},
	))
	require.NoError(t, w.WriteRecords(ctx, e))
	assert.Equal(t, isequencer.PLogOffset(4), recordAt(t, inner, 7, 20))
	assert.Equal(t, isequencer.PLogOffset(4), recordAt(t, inner, 7, 21))

	// A failure that stays is returned once the attempts are spent.
	require.NoError(t, st.SetRules(faulty.Rule{Ops: []string{faulty.OpApplyBatchIf}, Action: faulty.Fail}))
	err = w.WriteRecords(ctx, &plog.Event{Partition: 1, Offset: 5, WSID: 7, Records: []plog.RecordID{22}})
	require.ErrorIs(t, err, storage.ErrUnavailable)
	assert.Equal(t, isequencer.PLogOffset(0), recordAt(t, inner, 7, 22))

	// A conflict is not retried.
	st.Clear()
	err = w.WriteRecords(ctx, &plog.Event{Partition: 1, Offset: 6, WSID: 7, Records: []plog.RecordID{20}})
	require.True(t, errors.Is(err, plog.ErrRecordConflict), "%v", err)
}
