package plog

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/mem"
)

func TestZoneMarkerCoversTheRestOfItsBlock(t *testing.T) {
	for _, tc := range []struct{ at, wskip, wnext isequencer.PLogOffset }{
		{1, 4094, 4096},
		{7, 4088, 4096},
		{4095, 4096, 8192}, // the block's last offset: the whole next block too
		{4096, 4095, 8192},
		{8193, 4094, 12288},
	} {
		m := ZoneMarker(3, tc.at)
		assert.Equal(t, uint64(tc.wskip), m.Skip, "at %d", tc.at)
		assert.Equal(t, tc.wnext, m.NextOffset(), "at %d", tc.at)
		assert.True(t, m.Void)
	}
}

// putVersioned writes e at its offset with a put of version v: an earlier
// owner's trust2 write.
func putVersioned(t *testing.T, st storage.Storage, e *Event, v uint64) {
	t.Helper()
	b, err := AppendEncoded(nil, e)
	require.NoError(t, err)
	require.NoError(t, st.PutBatch(context.Background(), []storage.Row{{PKey: EventPKey(e.Partition, e.Offset), CCols: EventCCols(e.Offset), Value: b, Version: v}}))
}

// TestSealZoneVersioned: after a versioned writer, the marker and the rows
// the replay read are written with the new owner's version, so that a
// late write of the earlier owner (a lower version) replaces neither, and
// what lands in the sealed gap is read by no reader.
func TestSealZoneVersioned(t *testing.T) {
	ctx := context.Background()
	st := mem.New(mem.Options{})
	defer st.Close()
	const part = 3
	ev := func(off isequencer.PLogOffset, payload string) *Event {
		return &Event{Partition: part, Offset: off, WSID: 1, Numbers: []SeqNumber{{1, isequencer.Number(off)}}, Payload: []byte(payload)}
	}
	for off := isequencer.PLogOffset(1); off <= 5; off++ {
		putVersioned(t, st, ev(off, "read"), 10)
	}
	v, err := storage.NewVersions(2, 100, 1000, nil)
	require.NoError(t, err)
	next, err := SealZone(ctx, ZoneOptions{Storage: st, Partition: part, At: 6, From: 1, Versioned: true, Versions: v})
	require.NoError(t, err)
	assert.Equal(t, isequencer.PLogOffset(4096), next)

	// The earlier owner's late writes, at versions below the new owner's.
	putVersioned(t, st, ev(4, "late"), 50) // over a row the replay read
	putVersioned(t, st, ev(6, "late"), 50) // over the marker
	putVersioned(t, st, ev(9, "late"), 50) // inside the gap
	rd, err := NewReader(st, ReaderOptions{})
	require.NoError(t, err)
	var got []string
	require.NoError(t, rd.ReadEvents(ctx, part, 1, func(e *Event) error {
		if e.Skip > 0 {
			got = append(got, "void")
		} else {
			got = append(got, string(e.Payload))
		}
		return nil
	}))
	assert.Equal(t, []string{"read", "read", "read", "read", "read", "void"}, got)
}

// TestMarkerWriterWritesAgainWhatWasRead: advance's marker writer
// re-stamps the rows below its marker in the marker's block and the block
// before, so that a late versioned write of an earlier run (a lower
// version than the new one, above the row's) replaces none of them.
func TestMarkerWriterWritesAgainWhatWasRead(t *testing.T) {
	ctx := context.Background()
	st := mem.New(mem.Options{})
	defer st.Close()
	const part = 3
	ev := func(off isequencer.PLogOffset, payload string) *Event {
		return &Event{Partition: part, Offset: off, WSID: 1, Numbers: []SeqNumber{{1, isequencer.Number(off)}}, Payload: []byte(payload)}
	}
	for off := isequencer.PLogOffset(1); off <= 5; off++ {
		putVersioned(t, st, ev(off, "read"), 10)
	}
	v, err := storage.NewVersions(2, 100, 1000, nil)
	require.NoError(t, err)
	require.NoError(t, NewMarkerWriter(st, part, v).WriteGroup(ctx, []*Event{{Partition: part, Offset: 6, Skip: 100}}))
	putVersioned(t, st, &Event{Partition: part, Offset: 5, Skip: 50}, 50) // an earlier run's marker, held, lands
	rd, err := NewReader(st, ReaderOptions{})
	require.NoError(t, err)
	var got []string
	require.NoError(t, rd.ReadEvents(ctx, part, 1, func(e *Event) error {
		if e.Skip > 0 {
			got = append(got, fmt.Sprint("gap ", e.Offset))
		} else {
			got = append(got, string(e.Payload))
		}
		return nil
	}))
	assert.Equal(t, []string{"read", "read", "read", "read", "read", "gap 6"}, got)
}

// TestSealZoneConditional: after conditional writers only, the marker is
// inserted only if its offset is empty.
func TestSealZoneConditional(t *testing.T) {
	ctx := context.Background()
	st := mem.New(mem.Options{})
	defer st.Close()
	next, err := SealZone(ctx, ZoneOptions{Storage: st, Partition: 3, At: 2})
	require.NoError(t, err)
	assert.Equal(t, isequencer.PLogOffset(4096), next)
	b, err := AppendEncoded(nil, &Event{WSID: 1})
	require.NoError(t, err)
	require.NoError(t, st.Put(ctx, EventPKey(3, 4100), EventCCols(4100), b))
	_, err = SealZone(ctx, ZoneOptions{Storage: st, Partition: 3, At: 4100})
	require.ErrorIs(t, err, ErrZoneTaken)
	require.ErrorIs(t, err, ErrOffsetTaken)
	_, err = SealZone(ctx, ZoneOptions{Storage: st, Partition: 3, At: 5, Versioned: true})
	require.ErrorIs(t, err, ErrInvalidOptions, "Versioned without Versions")
}
