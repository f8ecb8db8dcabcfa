package voedger_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/plog/voedger"
	"github.com/cqlseq/cqlseq/plog/voedger/voedgertest"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/boltdb"
	"github.com/cqlseq/cqlseq/storage/mem"
)

func golden(t testing.TB) *voedgertest.Golden {
	t.Helper()
	g, err := voedgertest.Load()
	require.NoError(t, err)
	return g
}

func memStores(t *testing.T) (storage.Storage, storage.Storage) {
	p, s := mem.New(mem.Options{}), mem.New(mem.Options{})
	t.Cleanup(func() { _ = p.Close(); _ = s.Close() })
	return p, s
}

func boltStores(t *testing.T) (storage.Storage, storage.Storage) {
	dir := t.TempDir()
	p, err := boltdb.Open(filepath.Join(dir, "app.db"), boltdb.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	s, err := boltdb.Open(filepath.Join(dir, "vvm.db"), boltdb.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return p, s
}

// oneStore keeps the PLog and the sequence rows in one store.
func oneStore(t *testing.T) (storage.Storage, storage.Storage) {
	p := mem.New(mem.Options{})
	t.Cleanup(func() { _ = p.Close() })
	return p, p
}

func TestGoldenMem(t *testing.T)      { voedgertest.Run(t, memStores) }
func TestGoldenBBolt(t *testing.T)    { voedgertest.Run(t, boltStores) }
func TestGoldenOneStore(t *testing.T) { voedgertest.Run(t, oneStore) }

func event(t testing.TB, g *voedgertest.Golden, part uint16, off uint64) (*voedgertest.Event, []byte) {
	t.Helper()
	for i := range g.Events {
		if e := &g.Events[i]; e.Partition == part && e.Offset == off {
			_, _, v := e.Bytes()
			return e, v
		}
	}
	t.Fatalf("no golden event at %d/%d", part, off)
	return nil, nil
}

func TestKeysAreVoedgers(t *testing.T) {
	for _, e := range golden(t).Events {
		p, c, _ := e.Bytes()
		assert.Equal(t, p, voedger.EventPKey(isequencer.PartitionID(e.Partition), isequencer.PLogOffset(e.Offset)), "%d/%d", e.Partition, e.Offset)
		assert.Equal(t, c, voedger.EventCCols(isequencer.PLogOffset(e.Offset)), "%d/%d", e.Partition, e.Offset)
	}
}

func TestDecodeErrorsNamePartitionAndOffset(t *testing.T) {
	g := golden(t)
	_, v := event(t, g, 1, 6)
	codec0 := append([]byte{0}, v[1:]...)
	wsid0 := bytes.Clone(v)
	binary.BigEndian.PutUint64(wsid0[13:], 0)
	badMask := bytes.Clone(v)
	// The create's row: QName ID at 45, system fields mask at 47.
	require.Equal(t, []byte{0, 1}, badMask[47:49], "the golden create's mask")
	badMask[48] = 0x10
	for name, tc := range map[string]struct {
		b    []byte
		werr error
	}{
		"codec 0":          {codec0, voedger.ErrUnsupportedCodec},
		"codec 3":          {append([]byte{3}, v[1:]...), voedger.ErrUnsupportedCodec},
		"empty":            {nil, voedger.ErrCorrupt},
		"truncated":        {v[:len(v)-1], voedger.ErrCorrupt},
		"trailing byte":    {append(bytes.Clone(v), 0), voedger.ErrCorrupt},
		"WSID 0":           {wsid0, voedger.ErrCorrupt},
		"unknown mask bit": {badMask, voedger.ErrCorrupt},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := voedger.Decode(1, 6, tc.b)
			require.ErrorIs(t, err, tc.werr)
			assert.Contains(t, err.Error(), "partition 1 offset 6")
		})
	}
	t.Run("another key", func(t *testing.T) {
		_, err := voedger.Decode(1, 7, v)
		require.ErrorIs(t, err, voedger.ErrCorrupt)
		assert.Contains(t, err.Error(), "partition 1 offset 7")
		assert.Contains(t, err.Error(), "names partition 1 offset 6")
	})
}

// TestCodec1 decodes golden events recoded as codec 1, which differs from
// codec 2 only in the CUDs' emptied-field lists.
func TestCodec1(t *testing.T) {
	g := golden(t)
	// No argument, no CUDs: the bytes after the codec are the same.
	_, v := event(t, g, 1, 17)
	e, err := voedger.Decode(1, 17, append([]byte{voedger.Codec1}, v[1:]...))
	require.NoError(t, err)
	assert.Equal(t, voedger.Codec1, e.Codec)
	// One create with no emptied fields, no updates: drop its u16 count.
	w, v := event(t, g, 1, 6)
	require.Equal(t, []byte{0, 0, 0, 0}, v[len(v)-4:])
	v1 := append(append([]byte{voedger.Codec1}, v[1:len(v)-4]...), 0, 0)
	e, err = voedger.Decode(1, 6, v1)
	require.NoError(t, err)
	assert.Equal(t, w.Expect.CreatedIDs, e.CreatedIDs())
	_, err = voedger.Decode(1, 6, append([]byte{voedger.Codec1}, v[1:]...))
	assert.ErrorIs(t, err, voedger.ErrCorrupt, "codec 2 bytes read as codec 1 leave 2 bytes")
}

func TestEmptiedFields(t *testing.T) {
	_, v := event(t, golden(t), 1, 5)
	e, err := voedger.Decode(1, 5, v)
	require.NoError(t, err)
	var emptied [][]uint16
	for _, u := range e.Updates {
		emptied = append(emptied, u.Emptied)
	}
	// The README: offset 5 empties the Customer's note, user-field index 1.
	assert.ElementsMatch(t, [][]uint16{{1}, nil}, emptied)
}

// TestVoedgerDefectCorrupted: the sys.Corrupted event carries its original
// event, which created a record that exists in the Records view. Voedger's
// actualizer reads only the WLog offset; ours reads the original's records.
func TestVoedgerDefectCorrupted(t *testing.T) {
	g := golden(t)
	w, v := event(t, g, 1, 16)
	e, err := voedger.Decode(1, 16, v)
	require.NoError(t, err)
	require.Equal(t, voedger.QNameIDSysCorrupted, e.QNameID)
	require.NotNil(t, e.Original)
	lost := g.CorruptedRecords()[w.Expect.WSID]
	require.NotEmpty(t, lost, "the golden Records view holds a record no readable event created")
	assert.Equal(t, lost, e.Original.CreatedIDs())
	var voedgerIDs, ours []uint64
	for _, x := range voedger.VoedgerNumbers(nil, e) {
		if x.Key.SeqID == voedger.SeqIDRecordID {
			voedgerIDs = append(voedgerIDs, uint64(x.Value))
		}
	}
	for _, x := range voedger.Numbers(nil, e) {
		if x.Key.SeqID == voedger.SeqIDRecordID {
			ours = append(ours, uint64(x.Value))
		}
	}
	assert.Empty(t, voedgerIDs, "Voedger")
	assert.Equal(t, lost, ours, "ours")

	// The whole takeover: Voedger's sequencer hands out an existing record
	// ID again (golden transaction), ours the one after it.
	var tx *voedgertest.Transaction
	for i := range g.SeqStorage.Transactions {
		if g.SeqStorage.Transactions[i].WSID == w.Expect.WSID {
			tx = &g.SeqStorage.Transactions[i]
		}
	}
	require.NotNil(t, tx)
	voedgerNext := tx.Next["sys.RecordIDSequence"]
	assert.Contains(t, lost, voedgerNext, "Voedger's Next returned an existing record's ID")
	p, s := memStores(t)
	require.NoError(t, g.PutPLog(context.Background(), p))
	_, got := voedgertest.Sequencer(t, g, p, s, tx.Partition, tx.WSID)
	assert.Equal(t, isequencer.Number(voedgerNext+1), got[voedger.SeqIDRecordID], "ours: after the existing record")
}

// TestVoedgerDefectSingleton: a workspace whose only record is a
// singleton. Voedger actualizes its record-ID number to the singleton ID
// and hands out the next singleton ID; ours starts at FirstUserRecordID.
func TestVoedgerDefectSingleton(t *testing.T) {
	g := golden(t)
	for _, tx := range g.SeqStorage.Transactions {
		var ids []uint64
		for _, e := range g.Events {
			if e.Expect.WSID == tx.WSID {
				ids = append(ids, e.Expect.CreatedIDs...)
			}
		}
		if len(ids) != 1 || ids[0] != g.SingletonIDs["test.Settings"] {
			continue
		}
		voedgerNext := tx.Next["sys.RecordIDSequence"]
		assert.Equal(t, ids[0]+1, voedgerNext, "Voedger's Next continues from the singleton ID")
		assert.Less(t, voedgerNext, g.RecordIDConstants["FirstUserRecordID"], "Voedger's Next is in the reserved range")
		p, s := memStores(t)
		require.NoError(t, g.PutPLog(context.Background(), p))
		_, got := voedgertest.Sequencer(t, g, p, s, tx.Partition, tx.WSID)
		assert.Equal(t, isequencer.Number(g.RecordIDConstants["FirstUserRecordID"]), got[voedger.SeqIDRecordID], "ours")
		return
	}
	t.Fatal("no golden transaction in a singleton-only workspace")
}

func TestReaderStopsAtCorruptRow(t *testing.T) {
	g := golden(t)
	ctx := context.Background()
	st := mem.New(mem.Options{})
	defer st.Close()
	require.NoError(t, g.PutPLog(ctx, st))
	_, v := event(t, g, 1, 9)
	require.NoError(t, st.Put(ctx, voedger.EventPKey(1, 9), voedger.EventCCols(9), append([]byte{0}, v[1:]...)))
	r, err := voedger.NewReader(st, voedger.ReaderOptions{})
	require.NoError(t, err)
	var offs []isequencer.PLogOffset
	err = r.ReadEvents(ctx, 1, 0, func(e *voedger.Event) error { offs = append(offs, e.Offset); return nil })
	require.ErrorIs(t, err, voedger.ErrUnsupportedCodec)
	assert.Contains(t, err.Error(), "partition 1 offset 9")
	assert.Equal(t, []isequencer.PLogOffset{1, 2, 3, 4, 5, 6, 7, 8}, offs)
	// Through the sequencer's interface too.
	err = r.SeqReader().ReadEvents(ctx, 1, 0, func(*plog.Event) error { return nil })
	require.ErrorIs(t, err, plog.ErrCorrupt)
	require.ErrorIs(t, err, voedger.ErrUnsupportedCodec)
}

func TestReaderOpaqueCorrupted(t *testing.T) {
	g := golden(t)
	ctx := context.Background()
	st := mem.New(mem.Options{})
	defer st.Close()
	require.NoError(t, g.PutPLog(ctx, st))
	_, v := event(t, g, 1, 16)
	bad := bytes.Clone(v)
	bad[len(bad)-1] = 1 // the original event's updates count: 1 update, no bytes
	require.NoError(t, st.Put(ctx, voedger.EventPKey(1, 16), voedger.EventCCols(16), bad))
	strict, err := voedger.NewReader(st, voedger.ReaderOptions{})
	require.NoError(t, err)
	err = strict.ReadEvents(ctx, 1, 16, func(*voedger.Event) error { return nil })
	require.ErrorIs(t, err, voedger.ErrCorrupt)
	assert.Contains(t, err.Error(), "partition 1 offset 16: original bytes of the sys.Corrupted event")
	opaque, err := voedger.NewReader(st, voedger.ReaderOptions{OpaqueCorrupted: true})
	require.NoError(t, err)
	var got *voedger.Event
	require.NoError(t, opaque.ReadEvents(ctx, 1, 16, func(e *voedger.Event) error {
		if e.Offset == 16 {
			got = e
		}
		return nil
	}))
	require.NotNil(t, got)
	assert.Nil(t, got.Original)
	assert.ErrorIs(t, got.OriginalErr, voedger.ErrCorrupt)
}

func TestNewReaderValidates(t *testing.T) {
	_, err := voedger.NewReader(nil, voedger.ReaderOptions{PageTimeout: -1})
	require.ErrorIs(t, err, voedger.ErrInvalidOptions)
	assert.Contains(t, err.Error(), "Storage is nil")
	assert.Contains(t, err.Error(), "PageTimeout")
}

// TestCheckFindsDuplicates plants a copy of the first event of partition 1
// after its last: its record IDs are created twice and its WLog offset
// goes back.
func TestCheckFindsDuplicates(t *testing.T) {
	g := golden(t)
	ctx := context.Background()
	st := mem.New(mem.Options{})
	defer st.Close()
	require.NoError(t, g.PutPLog(ctx, st))
	var last uint64
	for _, e := range g.Events {
		if e.Partition == 1 {
			last = e.Offset
		}
	}
	first, v := event(t, g, 1, 1)
	dup := bytes.Clone(v)
	binary.BigEndian.PutUint64(dup[5:], last+1) // the value's PLog offset
	require.NoError(t, st.Put(ctx, voedger.EventPKey(1, isequencer.PLogOffset(last+1)), voedger.EventCCols(isequencer.PLogOffset(last+1)), dup))
	r, err := voedger.NewReader(st, voedger.ReaderOptions{})
	require.NoError(t, err)
	rep, err := voedger.Check(ctx, r, 1)
	require.NoError(t, err)
	assert.False(t, rep.OK())
	var kinds []voedger.ProblemKind
	var ids []uint64
	for _, p := range rep.Problems {
		kinds = append(kinds, p.Kind)
		if p.Kind == voedger.DuplicateRecordID {
			ids = append(ids, p.Value)
			assert.Equal(t, isequencer.PLogOffset(1), p.PrevOffset)
		}
	}
	assert.Equal(t, first.Expect.CreatedIDs, ids)
	assert.Contains(t, kinds, voedger.WLogOffsetBack)
	assert.Equal(t, isequencer.PLogOffset(last+1), rep.Last)
}

// TestSeqReaderLargestPerSeqID: SeqReader passes, per event and SeqID, the
// largest of the event's Numbers, once.
func TestSeqReaderLargestPerSeqID(t *testing.T) {
	g := golden(t)
	st, _ := memStores(t)
	ctx := context.Background()
	require.NoError(t, g.PutPLog(ctx, st))
	r, err := voedger.NewReader(st, voedger.ReaderOptions{})
	require.NoError(t, err)
	for _, p := range g.Partitions() {
		part := isequencer.PartitionID(p)
		want := map[isequencer.PLogOffset]map[isequencer.SeqID]isequencer.Number{}
		several := 0 // events with several numbers of one SeqID
		require.NoError(t, r.ReadEvents(ctx, part, 0, func(e *voedger.Event) error {
			w := map[isequencer.SeqID]isequencer.Number{}
			vals := voedger.Numbers(nil, e)
			for _, v := range vals {
				w[v.Key.SeqID] = max(w[v.Key.SeqID], v.Value)
			}
			if len(vals) > len(w) {
				several++
			}
			want[e.Offset] = w
			return nil
		}))
		got := map[isequencer.PLogOffset]map[isequencer.SeqID]isequencer.Number{}
		require.NoError(t, r.SeqReader().ReadEvents(ctx, part, 0, func(e *plog.Event) error {
			m := map[isequencer.SeqID]isequencer.Number{}
			for _, n := range e.Numbers {
				_, dup := m[n.SeqID]
				assert.False(t, dup, "partition %d offset %d: SeqID %d twice", p, e.Offset, n.SeqID)
				m[n.SeqID] = n.Number
			}
			got[e.Offset] = m
			return nil
		}))
		assert.Equal(t, want, got, "partition %d", p)
		t.Logf("partition %d: %d events, %d with several numbers of one SeqID", p, len(want), several)
	}
}
