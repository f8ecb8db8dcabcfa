package voedgertest

import (
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog/voedger"
	"github.com/cqlseq/cqlseq/seqstorage"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/vvmadapter"
)

// Stores returns a subtest's empty stores: the one for Voedger's PLog rows
// and the one for the sequence rows (they may be one store). The caller
// closes them at t's cleanup.
type Stores func(t *testing.T) (plogStore, seqStore storage.Storage)

// Run checks plog/voedger and the Voedger takeover against the golden
// data on the stores open gives:
//   - Reader: every golden row read back through the reader (from the
//     partition's first event, and from offsets around the block crossing)
//     decodes to what Voedger's decoder read (expect), and
//     voedger.VoedgerNumbers gives Voedger's actualizer_batch;
//   - Numbers: voedger.Numbers gives that batch corrected (record IDs
//     below FirstUserRecordID out; a sys.Corrupted event adds the records
//     of the Records view that no other event created);
//   - Actualize: seqstorage.NewVoedger's ActualizeOnce writes nothing
//     without write, and with it the sequence rows of Voedger's phase A
//     byte for byte, except the corrected record-ID rows;
//   - Sequencer: a sequencer over NewVoedger starts each golden
//     transaction at Voedger's offset and hands out Voedger's numbers, or
//     the corrected ones.
func Run(t *testing.T, open Stores) {
	g, err := Load()
	require.NoError(t, err)
	t.Run("Reader", func(t *testing.T) { testReader(t, g, open) })
	t.Run("Numbers", func(t *testing.T) { testNumbers(t, g) })
	t.Run("Actualize", func(t *testing.T) { testActualize(t, g, open) })
	t.Run("Sequencer", func(t *testing.T) { testSequencer(t, g, open) })
	t.Run("Check", func(t *testing.T) { testCheck(t, g, open) })
}

// PutPLog writes the golden PLog rows (their final values) to st.
func (g *Golden) PutPLog(ctx context.Context, st storage.Storage) error {
	rows := make([]storage.Row, 0, len(g.Events))
	for _, e := range g.Events {
		p, c, v := e.Bytes()
		rows = append(rows, storage.Row{PKey: p, CCols: c, Value: v})
	}
	return st.PutBatch(ctx, rows)
}

func loaded(t *testing.T, g *Golden, open Stores) (plogSt, seqSt storage.Storage) {
	t.Helper()
	plogSt, seqSt = open(t)
	require.NoError(t, g.PutPLog(context.Background(), plogSt))
	return plogSt, seqSt
}

func readAll(t *testing.T, r *voedger.Reader, part uint16, from uint64) []*voedger.Event {
	t.Helper()
	var out []*voedger.Event
	require.NoError(t, r.ReadEvents(context.Background(), isequencer.PartitionID(part), isequencer.PLogOffset(from), func(e *voedger.Event) error {
		out = append(out, e)
		return nil
	}))
	return out
}

func testReader(t *testing.T, g *Golden, open Stores) {
	plogSt, _ := loaded(t, g, open)
	r, err := voedger.NewReader(plogSt, voedger.ReaderOptions{PageTimeout: time.Minute})
	require.NoError(t, err)
	var got []*voedger.Event
	for _, p := range g.Partitions() {
		got = append(got, readAll(t, r, p, 0)...)
	}
	require.Len(t, got, len(g.Events), "events read from the partitions' first events")
	for i, w := range g.Events {
		e := got[i]
		require.Equal(t, w.Partition, uint16(e.Partition), "event %d", i)
		require.Equal(t, w.Offset, uint64(e.Offset), "event %d", i)
		CheckEvent(t, g, &w, e)
	}
	// From inside a partition, on both sides of the block crossing.
	for _, from := range []uint64{5, 4094, 4095, 4096, 4102, 4103} {
		for _, p := range g.Partitions() {
			// From from to the first missing offset.
			var want []uint64
			for _, w := range g.Events {
				if w.Partition == p && w.Offset == from+uint64(len(want)) {
					want = append(want, w.Offset)
				}
			}
			var offs []uint64
			for _, e := range readAll(t, r, p, from) {
				offs = append(offs, uint64(e.Offset))
			}
			assert.Equal(t, want, offs, "partition %d from %d", p, from)
		}
	}
}

// CheckEvent compares an event decoded by plog/voedger with what Voedger
// read from it.
func CheckEvent(t *testing.T, g *Golden, w *Event, e *voedger.Event) {
	t.Helper()
	x := w.Expect
	at := func(what string) string { return what + " at " + w.PKey + "/" + w.CCols }
	assert.Equal(t, x.QNameID, e.QNameID, at("qname_id"))
	assert.Equal(t, x.QName, g.QName(e.QNameID), at("qname"))
	assert.Equal(t, x.Valid, e.Valid, at("valid"))
	assert.Equal(t, x.Error, e.Error, at("error"))
	if x.Valid {
		assert.Equal(t, ".", x.OriginalQName)
		assert.Empty(t, e.OriginalQName, at("original_qname"))
	} else {
		assert.Equal(t, x.OriginalQName, e.OriginalQName, at("original_qname"))
	}
	assert.Equal(t, x.OriginalBytes, hex.EncodeToString(e.OriginalBytes), at("original_event_bytes_hex"))
	assert.Equal(t, x.Partition, uint16(e.HandlingPartition), at("partition"))
	assert.Equal(t, x.PLogOffset, uint64(e.PLogOffset), at("plog_offset"))
	assert.Equal(t, x.WSID, uint64(e.WSID), at("wsid"))
	assert.Equal(t, x.WLogOffset, e.WLogOffset, at("wlog_offset"))
	assert.Equal(t, x.RegisteredAt, e.RegisteredAt, at("registered_at"))
	assert.Equal(t, x.Synced, e.Synced, at("synced"))
	assert.Equal(t, x.DeviceID, e.DeviceID, at("device_id"))
	assert.Equal(t, x.SyncedAt, e.SyncedAt, at("synced_at"))
	assert.Equal(t, x.ArgumentQName, g.QName(e.Argument.QNameID), at("argument_qname"))
	assert.Equal(t, x.UnloggedArgQName, g.QName(e.Unlogged.QNameID), at("unlogged_argument_qname"))
	if x.Argument != nil {
		assert.Equal(t, *x.Argument, g.object(&e.Argument), at("argument"))
	} else {
		assert.Zero(t, e.Argument.QNameID, at("argument"))
	}
	assert.Equal(t, orEmpty(x.ArgumentIDs), orEmpty(e.ArgumentIDs()), at("argument_ids"))
	assert.Equal(t, orEmpty(x.CreatedIDs), orEmpty(e.CreatedIDs()), at("created_ids"))
	var upd []uint64
	for _, u := range e.Updates {
		upd = append(upd, u.ID)
	}
	slices.Sort(upd)
	assert.Equal(t, orEmpty(x.UpdatedIDs), orEmpty(upd), at("updated_ids"))
	var singles []uint64
	for _, id := range e.CreatedIDs() {
		if isequencer.Number(id) >= voedger.FirstSingletonID && isequencer.Number(id) <= voedger.MaxSingletonID {
			singles = append(singles, id)
		}
	}
	assert.Equal(t, orEmpty(x.SingletonIDs), orEmpty(singles), at("singleton_ids (the created IDs in the singleton range)"))
	var cuds []CUD
	for _, c := range e.Creates {
		cuds = append(cuds, g.cud(&c.Row, true))
	}
	for _, c := range e.Updates {
		cuds = append(cuds, g.cud(&c.Row, false))
	}
	assert.ElementsMatch(t, x.CUDs, cuds, at("cuds"))
	assert.Equal(t, orEmpty(x.ActualizerBatch), orEmpty(batch(voedger.VoedgerNumbers(nil, e))), at("actualizer_batch"))
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func (g *Golden) object(o *voedger.Object) Object {
	out := Object{QName: g.QName(o.QNameID), ID: o.ID, ParentID: o.ParentID, Container: g.Container(o.ContainerID)}
	for i := range o.Children {
		out.Children = append(out.Children, g.object(&o.Children[i]))
	}
	return out
}

func (g *Golden) cud(r *voedger.Row, isNew bool) CUD {
	return CUD{QName: g.QName(r.QNameID), ID: r.ID, ParentID: r.ParentID, Container: g.Container(r.ContainerID), IsNew: isNew, IsActive: !r.Inactive}
}

func batch(vs []isequencer.SeqValue) []SeqValue {
	var out []SeqValue
	for _, v := range vs {
		out = append(out, SeqValue{WSID: uint64(v.Key.WSID), SeqID: uint16(v.Key.SeqID), Number: uint64(v.Value)})
	}
	return out
}

// CorruptedRecords returns, per workspace, the record IDs (at least
// FirstUserRecordID) of the Records view that no valid golden event
// created: the records of the events that sys.Corrupted overwrote.
func (g *Golden) CorruptedRecords() map[uint64][]uint64 {
	created := map[[2]uint64]bool{}
	for _, e := range g.Events {
		for _, id := range append(slices.Clone(e.Expect.ArgumentIDs), e.Expect.CreatedIDs...) {
			created[[2]uint64{e.Expect.WSID, id}] = true
		}
	}
	out := map[uint64][]uint64{}
	for _, r := range g.Records {
		if r.ID >= uint64(voedger.FirstUserRecordID) && !created[[2]uint64{r.WSID, r.ID}] {
			out[r.WSID] = append(out[r.WSID], r.ID)
		}
	}
	return out
}

// CorrectedBatch is Voedger's actualizer batch of event w corrected as
// voedger.Numbers corrects it, derived from the golden data alone.
func (g *Golden) CorrectedBatch(w *Event) []SeqValue {
	var out, wlog []SeqValue
	for _, v := range w.Expect.ActualizerBatch {
		switch {
		case v.SeqID == uint16(voedger.SeqIDWLogOffset):
			wlog = append(wlog, v)
		case v.Number >= uint64(voedger.FirstUserRecordID):
			out = append(out, v)
		}
	}
	if w.Expect.QNameID == voedger.QNameIDSysCorrupted {
		for _, id := range g.CorruptedRecords()[w.Expect.WSID] {
			out = append(out, SeqValue{WSID: w.Expect.WSID, SeqID: uint16(voedger.SeqIDRecordID), Number: id})
		}
	}
	return append(out, wlog...)
}

func testNumbers(t *testing.T, g *Golden) {
	corrected := 0
	for i := range g.Events {
		w := &g.Events[i]
		_, _, v := w.Bytes()
		e, err := voedger.Decode(isequencer.PartitionID(w.Partition), isequencer.PLogOffset(w.Offset), v)
		require.NoError(t, err)
		want := g.CorrectedBatch(w)
		assert.Equal(t, orEmpty(want), orEmpty(batch(voedger.Numbers(nil, e))), "partition %d offset %d", w.Partition, w.Offset)
		if !slices.Equal(want, w.Expect.ActualizerBatch) {
			corrected++
		}
	}
	// The singleton-only creates and the sys.Corrupted event at least.
	assert.GreaterOrEqual(t, corrected, 2, "events whose numbers differ from Voedger's")
}

// ExpectedRows returns Voedger's phase-A sequence rows corrected: a
// record-ID row holds the largest record ID of the workspace (PLog and
// Records view) of at least FirstUserRecordID, and is absent when there
// is none. Other rows are Voedger's, byte for byte.
func (g *Golden) ExpectedRows() []Row {
	maxRec := map[uint64]uint64{}
	for _, e := range g.Events {
		for _, v := range e.Expect.ActualizerBatch {
			if v.SeqID == uint16(voedger.SeqIDRecordID) && v.Number >= uint64(voedger.FirstUserRecordID) {
				maxRec[v.WSID] = max(maxRec[v.WSID], v.Number)
			}
		}
	}
	for ws, ids := range g.CorruptedRecords() {
		maxRec[ws] = max(maxRec[ws], slices.Max(ids))
	}
	var out []Row
	for _, r := range g.SeqStorage.Snapshots[0].Rows {
		p, c, _ := r.Bytes()
		if len(p) == 16 && bytes.Equal(c, vvmadapter.SeqCCols(voedger.SeqIDRecordID)) {
			ws := uint64(p[8])<<56 | uint64(p[9])<<48 | uint64(p[10])<<40 | uint64(p[11])<<32 | uint64(p[12])<<24 | uint64(p[13])<<16 | uint64(p[14])<<8 | uint64(p[15])
			n, ok := maxRec[ws]
			if !ok {
				continue
			}
			r.Value = hex.EncodeToString(vvmadapter.EncodeU64(n))
		}
		out = append(out, r)
	}
	return out
}

// newVoedger returns seqstorage.NewVoedger's Storage of partition part;
// with write, it takes the partition over first (its Owner writes).
func newVoedger(t *testing.T, g *Golden, plogSt, seqSt storage.Storage, part uint16, write bool) *seqstorage.Storage {
	t.Helper()
	o := seqstorage.VoedgerOptions{PLog: plogSt, Seq: seqSt, App: isequencer.ClusterAppID(g.ClusterAppID), Partition: isequencer.PartitionID(part), Timeout: time.Minute}
	if write {
		own, err := seqstorage.TakeOver(context.Background(), seqstorage.TakeOverOptions{Storage: seqSt, App: o.App, Partition: o.Partition})
		require.NoError(t, err)
		o.Owner = own.Owner
	}
	s, err := seqstorage.NewVoedger(o)
	require.NoError(t, err)
	return s
}

// getRows reads the rows of the given keys from st (hex values; "" when
// absent).
func getRows(t *testing.T, st storage.Storage, rows []Row) []string {
	t.Helper()
	var out []string
	for _, r := range rows {
		p, c, _ := r.Bytes()
		v, ok, err := st.Get(context.Background(), p, c)
		require.NoError(t, err)
		if !ok {
			out = append(out, "")
			continue
		}
		out = append(out, hex.EncodeToString(v))
	}
	return out
}

func values(rows []Row, keys []Row) []string {
	var out []string
	for _, k := range keys {
		v := ""
		for _, r := range rows {
			if r.PKey == k.PKey && r.CCols == k.CCols {
				v = r.Value
			}
		}
		out = append(out, v)
	}
	return out
}

func testActualize(t *testing.T, g *Golden, open Stores) {
	plogSt, seqSt := loaded(t, g, open)
	ctx := context.Background()
	keys := g.SeqStorage.Snapshots[0].Rows
	for _, p := range g.Partitions() {
		a, err := newVoedger(t, g, plogSt, seqSt, p, false).ActualizeOnce(ctx, voedger.SeqTypes(), false)
		require.NoError(t, err)
		require.False(t, a.Written)
	}
	assert.Equal(t, make([]string, len(keys)), getRows(t, seqSt, keys), "nothing written without write")

	for _, p := range g.Partitions() {
		a, err := newVoedger(t, g, plogSt, seqSt, p, true).ActualizeOnce(ctx, voedger.SeqTypes(), true)
		require.NoError(t, err)
		var n uint64
		for _, e := range g.Events {
			if e.Partition == p {
				n++
			}
		}
		assert.Equal(t, n, a.Events, "partition %d", p)
	}
	want := g.ExpectedRows()
	assert.Equal(t, values(want, keys), getRows(t, seqSt, keys), "sequence rows after actualization (Voedger's phase A, corrected)")

	// Again: from the stored offsets, nothing left to read.
	for _, p := range g.Partitions() {
		a, err := newVoedger(t, g, plogSt, seqSt, p, true).ActualizeOnce(ctx, voedger.SeqTypes(), true)
		require.NoError(t, err)
		assert.Zero(t, a.Events, "partition %d", p)
	}
	assert.Equal(t, values(want, keys), getRows(t, seqSt, keys), "unchanged by a second actualization")
}

// WantNext returns what our sequencer's first Next of seq returns in
// workspace ws after actualizing the golden PLog: Voedger's value for the
// WLog offset; for record IDs one past the largest record ID of the
// workspace (PLog and Records view), at least FirstUserRecordID.
func (g *Golden) WantNext(ws uint64, seq isequencer.SeqID, voedgerNext uint64) uint64 {
	if seq == voedger.SeqIDWLogOffset {
		return voedgerNext
	}
	n := uint64(voedger.FirstUserRecordID)
	for _, e := range g.Events {
		for _, v := range e.Expect.ActualizerBatch {
			if v.WSID == ws && v.SeqID == uint16(seq) {
				n = max(n, v.Number+1)
			}
		}
	}
	for _, r := range g.Records {
		if r.WSID == ws {
			n = max(n, r.ID+1)
		}
	}
	return n
}

// Sequencer runs a sequencer over seqstorage.NewVoedger on partition part
// and one transaction in workspace ws; it returns Start's offset and the
// numbers Next returned, after the flush is stored.
func Sequencer(t *testing.T, g *Golden, plogSt, seqSt storage.Storage, part uint16, ws uint64) (isequencer.PLogOffset, map[isequencer.SeqID]isequencer.Number) {
	t.Helper()
	s := newVoedger(t, g, plogSt, seqSt, part, true)
	kind := isequencer.WSKind(g.WorkspaceKindQName)
	seq, cleanup, err := isequencer.New(&isequencer.Params{SeqTypes: map[isequencer.WSKind]map[isequencer.SeqID]isequencer.Number{kind: voedger.SeqTypes()}, SeqStorage: s, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	defer cleanup()
	var off isequencer.PLogOffset
	deadline := time.Now().Add(time.Minute)
	for ok := false; !ok; {
		if off, ok = seq.Start(kind, isequencer.WSID(ws)); !ok {
			require.True(t, time.Now().Before(deadline), "Start still busy after a minute")
			time.Sleep(5 * time.Millisecond)
		}
	}
	got := map[isequencer.SeqID]isequencer.Number{}
	for _, id := range []isequencer.SeqID{voedger.SeqIDRecordID, voedger.SeqIDWLogOffset} {
		n, err := seq.Next(id)
		require.NoError(t, err)
		got[id] = n
	}
	seq.Flush()
	for {
		nums, err := s.ReadNumbers(isequencer.WSID(ws), []isequencer.SeqID{voedger.SeqIDRecordID, voedger.SeqIDWLogOffset})
		require.NoError(t, err)
		if nums[0] == got[voedger.SeqIDRecordID] && nums[1] == got[voedger.SeqIDWLogOffset] {
			break
		}
		require.True(t, time.Now().Before(deadline), "flush not stored after a minute")
		time.Sleep(5 * time.Millisecond)
	}
	return off, got
}

func seqIDOf(name string) isequencer.SeqID {
	if name == "sys.WLogOffsetSequence" {
		return voedger.SeqIDWLogOffset
	}
	return voedger.SeqIDRecordID
}

func testSequencer(t *testing.T, g *Golden, open Stores) {
	plogSt, seqSt := loaded(t, g, open)
	for _, tx := range g.SeqStorage.Transactions {
		off, got := Sequencer(t, g, plogSt, seqSt, tx.Partition, tx.WSID)
		assert.Equal(t, tx.StartOffset, uint64(off), "partition %d: Start", tx.Partition)
		for name, vn := range tx.Next {
			id := seqIDOf(name)
			assert.Equal(t, g.WantNext(tx.WSID, id, vn), uint64(got[id]), "WSID %d %s: Voedger's Next returned %d", tx.WSID, name, vn)
		}
	}
}

func testCheck(t *testing.T, g *Golden, open Stores) {
	plogSt, _ := loaded(t, g, open)
	r, err := voedger.NewReader(plogSt, voedger.ReaderOptions{})
	require.NoError(t, err)
	for _, p := range g.Partitions() {
		rep, err := voedger.Check(context.Background(), r, isequencer.PartitionID(p))
		require.NoError(t, err)
		assert.True(t, rep.OK(), "partition %d: %v", p, rep.Problems)
	}
}
