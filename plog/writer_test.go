package plog

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/faulty"
)

func newWriter(t *testing.T, st storage.Storage, mode Mode) *Writer {
	t.Helper()
	w, err := NewWriter(WriterOptions{Storage: st, Partition: 4, Mode: mode})
	require.NoError(t, err)
	return w
}

func getRow(t *testing.T, st storage.Storage, pKey, cCols []byte) ([]byte, bool) {
	t.Helper()
	v, ok, err := st.Get(context.Background(), pKey, cCols)
	require.NoError(t, err)
	return v, ok
}

func testEvent(off isequencer.PLogOffset, recs ...RecordID) *Event {
	return &Event{Offset: off, WSID: 5, WSKind: 1, WLogOffset: uint64(off), Numbers: []SeqNumber{{1, isequencer.Number(off)}}, Records: recs, Payload: []byte("p")}
}

func TestWriterStoresEventAndRecords(t *testing.T) {
	for _, mode := range []Mode{ModeTrust0, ModeTrust1, ModeTrust2} {
		t.Run(mode.String(), func(t *testing.T) {
			st := newMem(t)
			w := newWriter(t, st, mode)
			// Records in two storage partitions, out of order.
			require.NoError(t, w.Write(context.Background(), testEvent(9, 4097, 4095, 4096, 10)))

			v, ok := getRow(t, st, EventPKey(4, 9), EventCCols(9))
			require.True(t, ok)
			want, _ := AppendEncoded(nil, testEvent(9, 4097, 4095, 4096, 10))
			assert.Equal(t, want, v)
			for _, id := range []RecordID{4097, 4095, 4096, 10} {
				v, ok := getRow(t, st, RecordPKey(5, id), RecordCCols(id))
				require.True(t, ok, "record %d", id)
				assert.Equal(t, RecordValue(9), v, "record %d", id)
			}
			r, _ := NewReader(st, ReaderOptions{})
			var got []isequencer.PLogOffset
			require.NoError(t, r.ReadEvents(context.Background(), 4, 9, func(e *Event) error {
				got = append(got, e.Offset)
				assert.Equal(t, []RecordID{4097, 4095, 4096, 10}, e.Records)
				return nil
			}))
			assert.Equal(t, []isequencer.PLogOffset{9}, got)
		})
	}
}

// TestTrust0EventConflict: an event already at the offset is an
// ErrConflict, nothing is overwritten and the writer stays stopped.
func TestTrust0EventConflict(t *testing.T) {
	for _, mode := range []Mode{ModeTrust0, ModeTrust1} {
		t.Run(mode.String(), func(t *testing.T) {
			st := newMem(t)
			ctx := context.Background()
			planted := []byte{0xEE}
			require.NoError(t, st.Put(ctx, EventPKey(4, 3), EventCCols(3), planted))
			w := newWriter(t, st, mode)
			require.NoError(t, w.Write(ctx, testEvent(2)))
			require.NoError(t, w.Stopped())

			err := w.Write(ctx, testEvent(3, 77))
			require.ErrorIs(t, err, ErrConflict)
			assert.Contains(t, err.Error(), "partition 4 offset 3")
			v, _ := getRow(t, st, EventPKey(4, 3), EventCCols(3))
			assert.Equal(t, planted, v, "not overwritten")
			_, ok := getRow(t, st, RecordPKey(5, 77), RecordCCols(77))
			assert.False(t, ok, "no record of the refused event")

			require.ErrorIs(t, w.Stopped(), ErrConflict)
			err = w.Write(ctx, testEvent(4))
			require.ErrorIs(t, err, ErrConflict, "the writer is stopped")
			_, ok = getRow(t, st, EventPKey(4, 4), EventCCols(4))
			assert.False(t, ok, "a stopped writer writes nothing")
		})
	}
}

// TestTrust0RecordConflict: a record already stored is an ErrConflict
// naming it; the record and the event's other records of that storage
// partition are not written; the event is.
func TestTrust0RecordConflict(t *testing.T) {
	st := newMem(t)
	ctx := context.Background()
	planted := []byte{1}
	require.NoError(t, st.Put(ctx, RecordPKey(5, 101), RecordCCols(101), planted))
	w := newWriter(t, st, ModeTrust0)
	err := w.Write(ctx, testEvent(1, 100, 101, 102))
	require.ErrorIs(t, err, ErrConflict)
	assert.Contains(t, err.Error(), "WSID 5")
	assert.Contains(t, err.Error(), "[101]")
	v, _ := getRow(t, st, RecordPKey(5, 101), RecordCCols(101))
	assert.Equal(t, planted, v, "not overwritten")
	for _, id := range []RecordID{100, 102} {
		_, ok := getRow(t, st, RecordPKey(5, id), RecordCCols(id))
		assert.False(t, ok, "record %d: the conditional batch is all or nothing", id)
	}
	_, ok := getRow(t, st, EventPKey(4, 1), EventCCols(1))
	assert.True(t, ok, "the event was written before its records")
	require.ErrorIs(t, w.Write(ctx, testEvent(2)), ErrConflict)
}

// TestTrust1And2Overwrite: what trust levels 1 and 2 overwrite.
func TestTrust1And2Overwrite(t *testing.T) {
	ctx := context.Background()
	t.Run("trust1 records", func(t *testing.T) {
		st := newMem(t)
		require.NoError(t, st.Put(ctx, RecordPKey(5, 101), RecordCCols(101), []byte{1}))
		w := newWriter(t, st, ModeTrust1)
		require.NoError(t, w.Write(ctx, testEvent(1, 101)))
		v, _ := getRow(t, st, RecordPKey(5, 101), RecordCCols(101))
		assert.Equal(t, RecordValue(1), v, "trust1 puts records")
	})
	t.Run("trust2 event and records", func(t *testing.T) {
		st := newMem(t)
		require.NoError(t, st.Put(ctx, EventPKey(4, 3), EventCCols(3), []byte{0xEE}))
		require.NoError(t, st.Put(ctx, RecordPKey(5, 101), RecordCCols(101), []byte{1}))
		w := newWriter(t, st, ModeTrust2)
		require.NoError(t, w.Write(ctx, testEvent(3, 101)))
		v, _ := getRow(t, st, EventPKey(4, 3), EventCCols(3))
		want, _ := AppendEncoded(nil, testEvent(3, 101))
		assert.Equal(t, want, v, "trust2 overwrites the event")
		v, _ = getRow(t, st, RecordPKey(5, 101), RecordCCols(101))
		assert.Equal(t, RecordValue(3), v, "trust2 overwrites the record")
		require.NoError(t, w.Stopped())
	})
}

func TestWriterRejectsInvalidEvents(t *testing.T) {
	st := newMem(t)
	w := newWriter(t, st, ModeTrust0)
	ctx := context.Background()
	for name, e := range map[string]*Event{
		"offset 0":    {WSID: 1},
		"WSID 0":      {Offset: 1},
		"number 0":    {Offset: 1, WSID: 1, Numbers: []SeqNumber{{1, 0}}},
		"record ID 0": {Offset: 1, WSID: 1, Records: []RecordID{0}},
	} {
		err := w.Write(ctx, e)
		require.ErrorIs(t, err, storage.ErrInvalidArgument, name)
		_, ok := getRow(t, st, EventPKey(4, 1), EventCCols(1))
		require.False(t, ok, name)
	}
	require.NoError(t, w.Stopped(), "invalid events do not stop the writer")
	require.NoError(t, w.Write(ctx, testEvent(1)))
}

func TestWriterStorageErrors(t *testing.T) {
	st := newMem(t)
	w := newWriter(t, st, ModeTrust0)
	require.NoError(t, st.Close())
	err := w.Write(context.Background(), testEvent(1))
	require.ErrorIs(t, err, storage.ErrClosed)
	assert.Contains(t, err.Error(), "partition 4 offsets 1..1")
	require.NoError(t, w.Stopped(), "a storage error does not stop the writer")
}

func TestNewWriterValidates(t *testing.T) {
	_, err := NewWriter(WriterOptions{Mode: 7})
	require.ErrorIs(t, err, ErrInvalidOptions)
	assert.Contains(t, err.Error(), "Storage is nil")
	assert.Contains(t, err.Error(), "unknown mode Mode(7)")
	w := newWriter(t, newMem(t), ModeTrust1)
	assert.Equal(t, ModeTrust1, w.Mode())
	assert.Equal(t, isequencer.PartitionID(4), w.Partition())
}

// TestTrust1RecordsRetried: trust 1 writes records with Put after the event
// is stored; a transient failure is retried (the Put is idempotent), one
// that outlasts the retries is reported with the event stored.
func TestTrust1RecordsRetried(t *testing.T) {
	inner := newMem(t)
	st, err := faulty.New(inner, faulty.Options{})
	require.NoError(t, err)
	w := newWriter(t, st, ModeTrust1)
	ctx := context.Background()

	require.NoError(t, st.SetRules(faulty.Rule{Ops: []string{faulty.OpPutBatch}, Action: faulty.Fail, Times: 2}))
	require.NoError(t, w.Write(ctx, testEvent(1, 100)))
	_, ok := getRow(t, inner, RecordPKey(5, 100), RecordCCols(100))
	assert.True(t, ok, "the record is written after two failed Puts")
	assert.Equal(t, uint64(2), st.Injected())

	require.NoError(t, st.SetRules(faulty.Rule{Ops: []string{faulty.OpPutBatch}, Action: faulty.Fail}))
	err = w.Write(ctx, testEvent(2, 200))
	require.ErrorIs(t, err, storage.ErrUnavailable)
	assert.Contains(t, err.Error(), "the event is stored")
	assert.Equal(t, uint64(2+putAttempts), st.Injected(), "bounded retries")
	_, ok = getRow(t, inner, EventPKey(4, 2), EventCCols(2))
	assert.True(t, ok)
	require.NoError(t, w.Stopped())
}
