package plog

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/storage"
)

func TestGoldenGapMarker(t *testing.T) {
	b, err := AppendEncoded(nil, &Event{Offset: 9, Skip: 300})
	require.NoError(t, err)
	require.Equal(t, "02"+"ac02", hex.EncodeToString(b), "u8 2 ‖ uvarint 300")
	var e Event
	require.NoError(t, Decode(1, 9, b, &e))
	require.Equal(t, uint64(300), e.Skip)
	require.Equal(t, isequencer.WSID(0), e.WSID)
	require.Equal(t, isequencer.PLogOffset(310), e.NextOffset())
}

func TestGoldenVoidMarker(t *testing.T) {
	b, err := AppendEncoded(nil, &Event{Offset: 9, Skip: 300, Void: true})
	require.NoError(t, err)
	require.Equal(t, "03"+"ac02", hex.EncodeToString(b), "u8 3 ‖ uvarint 300")
	var e Event
	require.NoError(t, Decode(1, 9, b, &e))
	require.Equal(t, Event{Partition: 1, Offset: 9, Skip: 300, Void: true, Numbers: e.Numbers, Records: e.Records}, e)
	require.Equal(t, isequencer.PLogOffset(310), e.NextOffset())
	_, err = AppendEncoded(nil, &Event{Offset: 9, WSID: 1, Void: true})
	require.Error(t, err, "Void on an event")
	for name, b := range map[string][]byte{"zero": {FormatVoid, 0}, "truncated": {FormatVoid}, "trailing": {FormatVoid, 1, 0}} {
		require.ErrorIs(t, Decode(1, 5, b, &e), ErrCorrupt, name)
	}
}

func TestGapMarkerRefusedWithOtherFields(t *testing.T) {
	for name, e := range map[string]*Event{
		"WSID":    {Skip: 1, WSID: 4},
		"numbers": {Skip: 1, Numbers: []SeqNumber{{1, 2}}},
		"records": {Skip: 1, Records: []RecordID{7}},
		"payload": {Skip: 1, Payload: []byte{1}},
		"too big": {Skip: MaxSkip + 1},
	} {
		_, err := AppendEncoded(nil, e)
		require.Error(t, err, name)
	}
	for name, b := range map[string][]byte{
		"zero":      {FormatSkip, 0},
		"truncated": {FormatSkip},
		"trailing":  {FormatSkip, 1, 0},
		"too big":   binary.AppendUvarint([]byte{FormatSkip}, MaxSkip+1),
	} {
		var e Event
		require.ErrorIs(t, Decode(1, 5, b, &e), ErrCorrupt, name)
	}
}

// putGap stores a gap marker at off skipping n offsets.
func putGap(t *testing.T, st storage.Storage, part isequencer.PartitionID, off isequencer.PLogOffset, n uint64) {
	t.Helper()
	b, err := AppendEncoded(nil, &Event{Skip: n})
	require.NoError(t, err)
	require.NoError(t, st.Put(context.Background(), EventPKey(part, off), EventCCols(off), b))
}

// TestReaderCrossesGapMarkers: events, a marker at 5 skipping into the
// third block, events, a marker skipping one offset, events; a read from
// 1, from inside the gap (nothing), and from the marker itself.
func TestReaderCrossesGapMarkers(t *testing.T) {
	st := newMem(t)
	const part = 3
	farther := isequencer.PLogOffset(2*4096 + 10)
	putEvents(t, st, part, span(1, 4)...)
	putGap(t, st, part, 5, uint64(farther-6)) // 6 .. farther-1 skipped
	putEvents(t, st, part, span(farther, farther+2)...)
	putGap(t, st, part, farther+3, 1)
	putEvents(t, st, part, farther+5, farther+6)
	// An event inside a gap is never read.
	putEvents(t, st, part, 4096)

	r, err := NewReader(st, ReaderOptions{})
	require.NoError(t, err)
	var got []isequencer.PLogOffset
	var gaps []uint64
	read := func(from isequencer.PLogOffset) {
		got, gaps = nil, nil
		require.NoError(t, r.ReadEvents(context.Background(), part, from, func(e *Event) error {
			got = append(got, e.Offset)
			if e.Skip > 0 {
				gaps = append(gaps, e.Skip)
			}
			return nil
		}))
	}
	read(1)
	want := append(span(1, 5), farther, farther+1, farther+2, farther+3, farther+5, farther+6)
	require.Equal(t, want, got)
	require.Equal(t, []uint64{uint64(farther - 6), 1}, gaps)

	read(6)
	require.Empty(t, got, "a read starting inside a gap stops there")
	read(5)
	require.Equal(t, want[4:], got)
}
