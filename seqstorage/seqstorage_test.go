package seqstorage

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/drivertest"
	"github.com/cqlseq/cqlseq/storage/mem"
	"github.com/cqlseq/cqlseq/vvmadapter"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	app  isequencer.ClusterAppID = 7
	part isequencer.PartitionID  = 3
)

// newStorage returns a Storage of app's partition part over o, which
// takes the partition over (a new Owner) unless o.Owner is set.
func newStorage(t *testing.T, o Options) *Storage {
	t.Helper()
	o.App, o.Partition = app, part
	if o.Owner == nil {
		o.Owner = takeOver(t, o.Storage, app)
	}
	s, err := New(o)
	require.NoError(t, err)
	return s
}

func key(ws isequencer.WSID, id isequencer.SeqID) isequencer.NumberKey {
	return isequencer.NumberKey{WSID: ws, SeqID: id}
}

func TestNumbersAndOffset(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st storage.Storage) {
		s := newStorage(t, Options{Storage: st})
		off, err := s.ReadNextPLogOffset()
		require.NoError(t, err)
		assert.Zero(t, off, "nothing stored")
		nums, err := s.ReadNumbers(1, []isequencer.SeqID{1, 2})
		require.NoError(t, err)
		assert.Equal(t, []isequencer.Number{0, 0}, nums)

		require.NoError(t, s.WriteValuesAndNextPLogOffset([]isequencer.SeqValue{
			{Key: key(1, 2), Value: 20}, {Key: key(2, 1), Value: 5},
		}, 42))
		require.NoError(t, s.WriteValuesAndNextPLogOffset(nil, 43), "an empty batch moves the offset")
		off, err = s.ReadNextPLogOffset()
		require.NoError(t, err)
		assert.Equal(t, isequencer.PLogOffset(43), off)
		nums, err = s.ReadNumbers(1, []isequencer.SeqID{1, 2})
		require.NoError(t, err)
		assert.Equal(t, []isequencer.Number{0, 20}, nums)

		// The rows are vvmadapter's: another app or partition sees none.
		o2, err := New(Options{Storage: st, App: app + 1, Partition: part})
		require.NoError(t, err)
		nums, _ = o2.ReadNumbers(1, []isequencer.SeqID{2})
		assert.Equal(t, []isequencer.Number{0}, nums)
		o3, _ := New(Options{Storage: st, App: app, Partition: part + 1})
		off, _ = o3.ReadNextPLogOffset()
		assert.Zero(t, off)
	})
}

// failingStorage fails the numbers' PutBatch or the offset's (failPut) on
// demand and records the order of writes ("PutBatch" for numbers, "Put"
// for the offset).
type failingStorage struct {
	storage.Storage
	mu       sync.Mutex
	failPB   error
	failPut  error
	writes   []string
	blockAll bool
}

func (s *failingStorage) PutBatch(ctx context.Context, rows []storage.Row) error {
	s.mu.Lock()
	what, err := "PutBatch", s.failPB
	if len(rows) == 1 && bytes.Equal(rows[0].PKey, vvmadapter.PartKey(app, part)) {
		what, err = "Put", s.failPut
	}
	s.writes = append(s.writes, what)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.Storage.PutBatch(ctx, rows)
}

func (s *failingStorage) Read(ctx context.Context, pKey, from, to []byte, cb func(cCols, value []byte) error) error {
	if s.blockAll {
		<-ctx.Done()
		return ctx.Err()
	}
	return s.Storage.Read(ctx, pKey, from, to, cb)
}

func TestValuesBeforeOffset(t *testing.T) {
	st := &failingStorage{Storage: mem.New(mem.Options{})}
	defer st.Close()
	s := newStorage(t, Options{Storage: st})
	batch := []isequencer.SeqValue{{Key: key(1, 1), Value: 9}}
	require.NoError(t, s.WriteValuesAndNextPLogOffset(batch, 5))
	assert.Equal(t, []string{"PutBatch", "Put"}, st.writes, "values, then the offset")

	st.failPB = errors.New("boom")
	err := s.WriteValuesAndNextPLogOffset([]isequencer.SeqValue{{Key: key(1, 1), Value: 10}}, 6)
	require.ErrorContains(t, err, "boom")
	assert.Contains(t, err.Error(), "app 7 partition 3")
	off, _ := s.ReadNextPLogOffset()
	assert.Equal(t, isequencer.PLogOffset(5), off, "no offset without its values")
	assert.Equal(t, []string{"PutBatch", "Put", "PutBatch"}, st.writes)

	st.failPB, st.failPut = nil, errors.New("offset lost")
	err = s.WriteValuesAndNextPLogOffset([]isequencer.SeqValue{{Key: key(1, 1), Value: 11}}, 7)
	require.ErrorContains(t, err, "offset lost")
	var pe *isequencer.PartialWriteError
	require.ErrorAs(t, err, &pe, "the values were written")
	assert.Empty(t, pe.Failed)
	nums, _ := s.ReadNumbers(1, []isequencer.SeqID{1})
	assert.Equal(t, []isequencer.Number{11}, nums, "values may be ahead of the offset; replay from the old offset is harmless")
}

func TestCallsAreBoundedByTimeout(t *testing.T) {
	st := &failingStorage{Storage: mem.New(mem.Options{}), blockAll: true}
	defer st.Close()
	s := newStorage(t, Options{Storage: st, Timeout: 20 * time.Millisecond})
	began := time.Now()
	_, err := s.ReadNumbers(1, []isequencer.SeqID{1})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(began), 5*time.Second)
}

// writeEvents writes events 1..n with the plog writer: event i is in
// WSID 1+i%3 and took number 1000+i of SeqID 1 and number i of SeqID 2.
func writeEvents(t *testing.T, st storage.Storage, n int) {
	t.Helper()
	w, err := plog.NewWriter(plog.WriterOptions{Storage: st, Partition: part, Mode: plog.ModeTrust2})
	require.NoError(t, err)
	for i := 1; i <= n; i++ {
		e := &plog.Event{Offset: isequencer.PLogOffset(i), WSID: isequencer.WSID(1 + i%3), Numbers: []plog.SeqNumber{
			{SeqID: 1, Number: isequencer.Number(1000 + i)}, {SeqID: 2, Number: isequencer.Number(i)},
		}}
		require.NoError(t, w.Write(context.Background(), e))
	}
}

type replayed struct {
	offsets []isequencer.PLogOffset
	values  map[isequencer.NumberKey]isequencer.Number
	firsts  map[*isequencer.SeqValue]bool // distinct backing arrays seen
}

func replay(t *testing.T, s *Storage, from isequencer.PLogOffset) (replayed, error) {
	t.Helper()
	r := replayed{values: map[isequencer.NumberKey]isequencer.Number{}, firsts: map[*isequencer.SeqValue]bool{}}
	err := s.ActualizeSequencesFromPLog(context.Background(), from, func(b []isequencer.SeqValue, off isequencer.PLogOffset) error {
		r.offsets = append(r.offsets, off)
		if len(b) > 0 {
			r.firsts[&b[:1][0]] = true
		}
		for _, v := range b {
			r.values[v.Key] = max(r.values[v.Key], v.Value)
		}
		return nil
	})
	return r, err
}

func TestActualizeFromPLog(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st storage.Storage) {
		const n = 2*plog.EventsPerPartition + 100
		writeEvents(t, st, n)
		s := newStorage(t, Options{Storage: st})

		r, err := replay(t, s, 4000)
		require.NoError(t, err)
		require.Len(t, r.offsets, n-4000+1)
		for i, off := range r.offsets {
			require.Equal(t, isequencer.PLogOffset(4000+i), off)
		}
		assert.Equal(t, isequencer.Number(1000+n), r.values[key(1+n%3, 1)])
		assert.Equal(t, isequencer.Number(n), r.values[key(1+n%3, 2)])
		assert.Len(t, r.values, 6)
		assert.Len(t, r.firsts, 1, "one batch slice, reused for every event")

		r, err = replay(t, s, n+1)
		require.NoError(t, err)
		assert.Empty(t, r.offsets)
	})
}

func TestActualizeMinAccepted(t *testing.T) {
	st := mem.New(mem.Options{})
	defer st.Close()
	writeEvents(t, st, 10)
	// SeqID 1 numbers are 1001..1010: accept from 1005; SeqID 2 numbers 1..10: accept from 100 (none).
	s := newStorage(t, Options{Storage: st, MinAccepted: map[isequencer.SeqID]isequencer.Number{1: 1005, 2: 100}})
	var got []isequencer.SeqValue
	var offs []isequencer.PLogOffset
	require.NoError(t, s.ActualizeSequencesFromPLog(context.Background(), 1, func(b []isequencer.SeqValue, off isequencer.PLogOffset) error {
		offs = append(offs, off)
		got = append(got, b...)
		return nil
	}))
	assert.Len(t, offs, 10, "events whose numbers are all below the threshold are still passed")
	require.Len(t, got, 6)
	for _, v := range got {
		assert.Equal(t, isequencer.SeqID(1), v.Key.SeqID)
		assert.GreaterOrEqual(t, v.Value, isequencer.Number(1005))
	}
}

func TestActualizeErrors(t *testing.T) {
	st := mem.New(mem.Options{})
	defer st.Close()
	writeEvents(t, st, 20)
	s := newStorage(t, Options{Storage: st})

	stop := errors.New("batcher says stop")
	err := s.ActualizeSequencesFromPLog(context.Background(), 1, func([]isequencer.SeqValue, isequencer.PLogOffset) error { return stop })
	assert.Same(t, stop, err, "a batcher error is returned as is")

	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	err = s.ActualizeSequencesFromPLog(ctx, 1, func([]isequencer.SeqValue, isequencer.PLogOffset) error {
		if n++; n == 5 {
			cancel()
		}
		return nil
	})
	assert.Equal(t, context.Canceled, err, "ctx.Err() once ctx is done")

	require.NoError(t, st.Put(context.Background(), plog.EventPKey(part, 15), plog.EventCCols(15), []byte{9, 9}))
	r, err := replay(t, s, 10)
	require.ErrorIs(t, err, plog.ErrCorrupt)
	assert.Contains(t, err.Error(), "partition 3 offset 15")
	assert.Len(t, r.offsets, 5, "events before the corrupt one were passed")
}

// TestCustomReader: another PLogReader is used as given.
func TestCustomReader(t *testing.T) {
	st := mem.New(mem.Options{})
	defer st.Close()
	rd := readerFunc(func(ctx context.Context, p isequencer.PartitionID, from isequencer.PLogOffset, cb func(*plog.Event) error) error {
		assert.Equal(t, part, p)
		return cb(&plog.Event{Partition: p, Offset: from, WSID: 4, Numbers: []plog.SeqNumber{{SeqID: 9, Number: 99}}})
	})
	s := newStorage(t, Options{Storage: st, Reader: rd})
	r, err := replay(t, s, 77)
	require.NoError(t, err)
	assert.Equal(t, []isequencer.PLogOffset{77}, r.offsets)
	assert.Equal(t, isequencer.Number(99), r.values[key(4, 9)])
}

type readerFunc func(context.Context, isequencer.PartitionID, isequencer.PLogOffset, func(*plog.Event) error) error

func (f readerFunc) ReadEvents(ctx context.Context, p isequencer.PartitionID, from isequencer.PLogOffset, cb func(*plog.Event) error) error {
	return f(ctx, p, from, cb)
}

func TestNewValidates(t *testing.T) {
	_, err := New(Options{Timeout: -1, WriteWorkers: -1})
	require.ErrorIs(t, err, ErrInvalidOptions)
	assert.Contains(t, err.Error(), "Storage is nil")
	assert.Contains(t, err.Error(), "Timeout")
	assert.Contains(t, err.Error(), "WriteWorkers -1, must be >= 1")
}

// TestStoredRowsAreVVMAdapters pins where the numbers go.
func TestStoredRowsAreVVMAdapters(t *testing.T) {
	st := mem.New(mem.Options{})
	defer st.Close()
	s := newStorage(t, Options{Storage: st})
	require.NoError(t, s.WriteValuesAndNextPLogOffset([]isequencer.SeqValue{{Key: key(5, 2), Value: 77}}, 9))
	v, ok, err := st.Get(context.Background(), vvmadapter.WSKey(app, 5), vvmadapter.SeqCCols(2))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, vvmadapter.EncodeU64(77), v)
	v, ok, _ = st.Get(context.Background(), vvmadapter.PartKey(app, part), vvmadapter.PartCCols(vvmadapter.PLogOffsetCC))
	require.True(t, ok)
	assert.Equal(t, vvmadapter.EncodeU64(9), v)
}
