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

// zonePart is the PLog partition of the zone tests.
const zonePart = 3

// zoneEvent is an event of zonePart at off.
func zoneEvent(off isequencer.PLogOffset, payload string) *Event {
	return &Event{Partition: zonePart, Offset: off, WSID: 1, Numbers: []SeqNumber{{1, isequencer.Number(off)}}, Payload: []byte(payload)}
}

// readFiveAt10 returns a store whose PLog holds events 1..5 ("read"),
// written at version 10 (an earlier owner's), and a new owner's versions
// from 100.
func readFiveAt10(t *testing.T) (*mem.Store, *storage.Versions) {
	t.Helper()
	st := mem.New(mem.Options{})
	t.Cleanup(func() { _ = st.Close() })
	for off := isequencer.PLogOffset(1); off <= 5; off++ {
		putVersioned(t, st, zoneEvent(off, "read"), 10)
	}
	v, err := storage.NewVersions(2, 100, 1000, nil)
	require.NoError(t, err)
	return st, v
}

// readZone returns what a reader reads of zonePart from offset 1: each
// event's payload, a gap marker as "gap OFFSET".
func readZone(t *testing.T, st storage.Storage) []string {
	t.Helper()
	rd, err := NewReader(st, ReaderOptions{})
	require.NoError(t, err)
	var got []string
	require.NoError(t, rd.ReadEvents(context.Background(), zonePart, 1, func(e *Event) error {
		if e.Skip > 0 {
			got = append(got, fmt.Sprint("gap ", e.Offset))
		} else {
			got = append(got, string(e.Payload))
		}
		return nil
	}))
	return got
}

// TestSealZoneVersioned: after a versioned writer, the marker and the rows
// the replay read are written with the new owner's version, so that a
// late write of the earlier owner (a lower version) replaces neither, and
// what lands in the sealed gap is read by no reader.
func TestSealZoneVersioned(t *testing.T) {
	st, v := readFiveAt10(t)
	next, err := SealZone(context.Background(), ZoneOptions{Storage: st, Partition: zonePart, At: 6, From: 1, Versioned: true, Versions: v})
	require.NoError(t, err)
	assert.Equal(t, isequencer.PLogOffset(4096), next)

	// The earlier owner's late writes, at versions below the new owner's.
	putVersioned(t, st, zoneEvent(4, "late"), 50) // over a row the replay read
	putVersioned(t, st, zoneEvent(6, "late"), 50) // over the marker
	putVersioned(t, st, zoneEvent(9, "late"), 50) // inside the gap
	assert.Equal(t, []string{"read", "read", "read", "read", "read", "gap 6"}, readZone(t, st))
}

// TestMarkerWriterWritesAgainWhatWasRead: advance's marker writer
// re-stamps the rows below its marker in the marker's block and the block
// before, so that a late versioned write of an earlier run (a lower
// version than the new one, above the row's) replaces none of them.
func TestMarkerWriterWritesAgainWhatWasRead(t *testing.T) {
	st, v := readFiveAt10(t)
	require.NoError(t, NewMarkerWriter(st, zonePart, v).WriteGroup(context.Background(), []*Event{{Partition: zonePart, Offset: 6, Skip: 100}}))
	putVersioned(t, st, &Event{Partition: zonePart, Offset: 5, Skip: 50}, 50) // an earlier run's marker, held, lands
	assert.Equal(t, []string{"read", "read", "read", "read", "read", "gap 6"}, readZone(t, st))
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
