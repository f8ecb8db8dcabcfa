package plog

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/drivertest"
	"github.com/cqlseq/cqlseq/storage/faulty"
	"github.com/cqlseq/cqlseq/storage/mem"
)

// newMem returns a fresh mem store that counts its calls.
func newMem(t *testing.T) *drivertest.Counting {
	st := mem.New(mem.Options{})
	t.Cleanup(func() { _ = st.Close() })
	return drivertest.NewCounting(st)
}

// putEvents stores an event at each offset, with WSID = offset and one
// number = 10*offset, by raw puts.
func putEvents(t *testing.T, st storage.Storage, part isequencer.PartitionID, offs ...isequencer.PLogOffset) {
	t.Helper()
	var rows []storage.Row
	for _, off := range offs {
		b, err := AppendEncoded(nil, &Event{WSID: isequencer.WSID(off), Numbers: []SeqNumber{{1, isequencer.Number(10 * off)}}})
		require.NoError(t, err)
		rows = append(rows, storage.Row{PKey: EventPKey(part, off), CCols: EventCCols(off), Value: b})
	}
	require.NoError(t, st.PutBatch(context.Background(), rows))
}

func span(from, to isequencer.PLogOffset) []isequencer.PLogOffset {
	var out []isequencer.PLogOffset
	for o := from; o <= to; o++ {
		out = append(out, o)
	}
	return out
}

// readAll returns the offsets ReadEvents yields, checking each event.
func readAll(t *testing.T, r PLogReader, part isequencer.PartitionID, from isequencer.PLogOffset) ([]isequencer.PLogOffset, error) {
	t.Helper()
	var got []isequencer.PLogOffset
	err := r.ReadEvents(context.Background(), part, from, func(e *Event) error {
		if e.Partition != part || e.WSID != isequencer.WSID(e.Offset) || len(e.Numbers) != 1 || e.Numbers[0].Number != isequencer.Number(10*e.Offset) {
			t.Errorf("event %+v does not match its offset", e)
		}
		got = append(got, e.Offset)
		return nil
	})
	return got, err
}

func TestReaderCrossesStoragePartitions(t *testing.T) {
	st := newMem(t)
	const part = 3
	last := isequencer.PLogOffset(2*EventsPerPartition + 10) // 8202
	putEvents(t, st, part, span(1, last)...)
	putEvents(t, st, part+1, span(1, 5)...) // another partition is not read
	serial, err := NewReader(st, ReaderOptions{ReadAhead: -1})
	require.NoError(t, err)
	ahead, err := NewReader(st, ReaderOptions{})
	require.NoError(t, err)

	for _, tc := range []struct {
		from   isequencer.PLogOffset
		wfirst isequencer.PLogOffset
		wn     int
		wreads int64 // without read-ahead: the complete storage partitions read, and one more
	}{
		{0, 1, int(last), 3},
		{1, 1, int(last), 3},
		{4095, 4095, int(last) - 4094, 3},
		{4096, 4096, int(last) - 4095, 2},
		{8191, 8191, 12, 2},
		{last, last, 1, 1},
		{last + 1, 0, 0, 1},
		{100_000, 0, 0, 1},
	} {
		// With read-ahead, each complete storage partition is followed by
		// DefaultReadAhead concurrent reads; the one the read starts in is
		// read alone.
		waheadReads := tc.wreads
		if tc.wreads > 1 {
			waheadReads = tc.wreads - 1 + DefaultReadAhead
		}
		for _, c := range []struct {
			name   string
			r      *Reader
			wreads int64
		}{{"serial", serial, tc.wreads}, {"read-ahead", ahead, waheadReads}} {
			st.Reset()
			got, err := readAll(t, c.r, part, tc.from)
			require.NoError(t, err)
			require.Len(t, got, tc.wn, "%s from %d", c.name, tc.from)
			if tc.wn > 0 {
				assert.Equal(t, tc.wfirst, got[0], "%s from %d", c.name, tc.from)
				assert.Equal(t, last, got[len(got)-1], "%s from %d", c.name, tc.from)
				for i := 1; i < len(got); i++ {
					require.Equal(t, got[i-1]+1, got[i], "%s from %d: offsets in order, no repeats", c.name, tc.from)
				}
			}
			assert.Equal(t, c.wreads, st.Calls(faulty.OpRead), "%s from %d: storage reads", c.name, tc.from)
		}
	}
}

func TestReaderFullStoragePartitionThenEnd(t *testing.T) {
	st := newMem(t)
	putEvents(t, st, 1, span(1, 2*EventsPerPartition-1)...) // ends exactly at a storage partition's end
	r, _ := NewReader(st, ReaderOptions{ReadAhead: -1})
	got, err := readAll(t, r, 1, 1)
	require.NoError(t, err)
	assert.Len(t, got, 2*EventsPerPartition-1)
	assert.Equal(t, int64(3), st.Calls(faulty.OpRead), "the empty third storage partition ends the log")

	st.Reset()
	r, _ = NewReader(st, ReaderOptions{ReadAhead: 2})
	got, err = readAll(t, r, 1, 1)
	require.NoError(t, err)
	assert.Len(t, got, 2*EventsPerPartition-1)
	assert.Equal(t, int64(4), st.Calls(faulty.OpRead), "read-ahead: two reads after each complete storage partition")
}

func TestReaderStopsAtFirstGap(t *testing.T) {
	st := newMem(t)
	putEvents(t, st, 1, span(1, 10)...)
	putEvents(t, st, 1, span(12, 20)...)
	putEvents(t, st, 2, span(1, 4095)...)
	putEvents(t, st, 2, span(4097, 4100)...) // gap at a storage partition's first offset
	putEvents(t, st, 3, span(2, 5)...)       // offset 1 missing
	r, _ := NewReader(st, ReaderOptions{})

	got, err := readAll(t, r, 1, 1)
	require.NoError(t, err)
	assert.Equal(t, span(1, 10), got)
	got, err = readAll(t, r, 1, 12)
	require.NoError(t, err)
	assert.Equal(t, span(12, 20), got, "reading from after the gap")
	got, err = readAll(t, r, 2, 1)
	require.NoError(t, err)
	assert.Len(t, got, 4095)
	got, err = readAll(t, r, 3, 1)
	require.NoError(t, err)
	assert.Empty(t, got)
}

func TestReaderCorruptEvent(t *testing.T) {
	st := newMem(t)
	putEvents(t, st, 7, span(1, 5000)...)
	require.NoError(t, st.Put(context.Background(), EventPKey(7, 4500), EventCCols(4500), []byte{1, 2}))
	r, _ := NewReader(st, ReaderOptions{})
	got, err := readAll(t, r, 7, 4000)
	require.ErrorIs(t, err, ErrCorrupt)
	assert.Contains(t, err.Error(), "partition 7 offset 4500")
	assert.Equal(t, span(4000, 4499), got, "events before the corrupt one are delivered")

	// A clustering key of the wrong size is corrupt too.
	require.NoError(t, st.Put(context.Background(), EventPKey(8, 1), []byte{0, 1, 2}, []byte{1}))
	_, err = readAll(t, r, 8, 1)
	require.ErrorIs(t, err, ErrCorrupt)
	assert.Contains(t, err.Error(), "partition 8")
}

// TestReadEvent: one event by its offset, with one Get; a missing one is
// not found, bad bytes are ErrCorrupt, offset 0 is refused without a call.
func TestReadEvent(t *testing.T) {
	st := newMem(t)
	putEvents(t, st, 7, span(4095, 4097)...) // across a storage partition's end
	require.NoError(t, st.Put(context.Background(), EventPKey(7, 9), EventCCols(9), []byte{1, 2}))
	r, _ := NewReader(st, ReaderOptions{})
	ctx := context.Background()
	for _, off := range span(4095, 4097) {
		var e Event
		st.Reset()
		ok, err := r.ReadEvent(ctx, 7, off, &e)
		require.NoError(t, err)
		require.True(t, ok, "offset %d", off)
		assert.Equal(t, isequencer.PartitionID(7), e.Partition)
		assert.Equal(t, off, e.Offset)
		assert.Equal(t, isequencer.WSID(off), e.WSID)
		assert.Equal(t, []SeqNumber{{1, isequencer.Number(10 * off)}}, e.Numbers)
		assert.Equal(t, int64(1), st.Calls(faulty.OpGet), "one Get")
		assert.Equal(t, int64(0), st.Calls(faulty.OpRead), "no Read")
	}
	var e Event
	ok, err := r.ReadEvent(ctx, 7, 4098, &e)
	require.NoError(t, err)
	assert.False(t, ok)
	ok, err = r.ReadEvent(ctx, 8, 4095, &e)
	require.NoError(t, err)
	assert.False(t, ok, "another partition")
	_, err = r.ReadEvent(ctx, 7, 9, &e)
	require.ErrorIs(t, err, ErrCorrupt)
	assert.Contains(t, err.Error(), "partition 7 offset 9")
	st.Reset()
	_, err = r.ReadEvent(ctx, 7, 0, &e)
	require.ErrorIs(t, err, storage.ErrInvalidArgument)
	assert.Equal(t, int64(0), st.Calls(faulty.OpGet))

	fs, err := faulty.New(st, faulty.Options{})
	require.NoError(t, err)
	require.NoError(t, fs.SetRules(faulty.Rule{Ops: []string{faulty.OpGet}, Action: faulty.Fail}))
	fr, _ := NewReader(fs, ReaderOptions{})
	_, err = fr.ReadEvent(ctx, 7, 4095, &e)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "plog: read event of partition 7 offset 4095")
}

func TestReaderCallbackErrorAndContext(t *testing.T) {
	st := newMem(t)
	putEvents(t, st, 1, span(1, 10)...)
	r, _ := NewReader(st, ReaderOptions{})
	stop := errors.New("stop")
	n := 0
	err := r.ReadEvents(context.Background(), 1, 1, func(*Event) error {
		n++
		if n == 3 {
			return stop
		}
		return nil
	})
	assert.Same(t, stop, err, "a callback error is returned as is")
	assert.Equal(t, 3, n)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = r.ReadEvents(ctx, 1, 1, func(*Event) error { t.Error("no event after cancel"); return nil })
	require.ErrorIs(t, err, context.Canceled)
	assert.Contains(t, err.Error(), "partition 1")
}

func TestReaderPageTimeout(t *testing.T) {
	st := newMem(t)
	putEvents(t, st, 1, span(1, 10)...)
	hung, err := faulty.New(st, faulty.Options{Rules: []faulty.Rule{{Ops: []string{faulty.OpRead}, Action: faulty.Timeout}}})
	require.NoError(t, err)
	r, err := NewReader(hung, ReaderOptions{PageTimeout: 20 * time.Millisecond})
	require.NoError(t, err)
	err = r.ReadEvents(context.Background(), 1, 1, func(*Event) error { return nil })
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestNewReaderValidates(t *testing.T) {
	_, err := NewReader(nil, ReaderOptions{PageTimeout: -1})
	require.ErrorIs(t, err, ErrInvalidOptions)
	assert.Contains(t, err.Error(), "Storage is nil")
	assert.Contains(t, err.Error(), "PageTimeout")
}
