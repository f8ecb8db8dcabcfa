package seqstorage

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/drivertest"
	"github.com/cqlseq/cqlseq/storage/faulty"
	"github.com/cqlseq/cqlseq/storage/mem"
	"github.com/cqlseq/cqlseq/vvmadapter"
)

// advancer takes the partition over (fencing the PLog) and returns its
// Storage and the mode's writer, as `cqlseq advance` does.
func advancer(t *testing.T, st storage.Storage, mode plog.Mode) (*Storage, plog.GroupWriter) {
	t.Helper()
	own, err := TakeOver(context.Background(), TakeOverOptions{Storage: st, App: app, Partition: part, FencePLog: st})
	require.NoError(t, err)
	s := newStorage(t, Options{Storage: st, Owner: own.Owner})
	w, err := plog.NewGroupWriter(plog.WriterOptions{Storage: st, Partition: part, Mode: mode, Versions: own.Owner.Versions()}, own.Owner.Epoch())
	require.NoError(t, err)
	return s, w
}

// TestAdvanceMovesNumbersAndOffsetsPastTheMargins: after 10 events (WSIDs
// 1-3, SeqID 1 up to 1010, SeqID 2 up to 10) and a stored number of WSID 2
// above them, Advance raises each SeqID's floor to its largest number plus
// the margin, writes a gap marker after the last event and stores the
// next offset after the gap; a new owner then hands out numbers above the
// floors in every workspace (one the PLog never named too) and writes its
// first event after the gap, which a read from offset 1 reaches.
func TestAdvanceMovesNumbersAndOffsetsPastTheMargins(t *testing.T) {
	for _, mode := range []plog.Mode{plog.ModeTrust0, plog.ModeTrust2, plog.ModeFenced} {
		t.Run(mode.String(), func(t *testing.T) {
			drivertest.Each(t, func(t *testing.T, st storage.Storage) {
				ctx := context.Background()
				writeEvents(t, st, 10)
				before := newStorage(t, Options{Storage: st})
				require.NoError(t, before.WriteValuesAndNextPLogOffset([]isequencer.SeqValue{{Key: key(2, 2), Value: 77}}, 4))

				s, w := advancer(t, st, mode)
				adv, err := s.Advance(ctx, AdvanceOptions{Numbers: 500, Offsets: 5000, Writer: w, Initial: map[isequencer.SeqID]isequencer.Number{3: 200001}})
				require.NoError(t, err)
				assert.Equal(t, []vvmadapter.Floor{{SeqID: 1, Number: 1510}, {SeqID: 2, Number: 577}, {SeqID: 3, Number: 200500}}, adv.Floors)
				assert.Equal(t, isequencer.PLogOffset(11), adv.Gap)
				assert.Equal(t, isequencer.PLogOffset(5012), adv.Next)
				assert.Equal(t, uint64(10), adv.Events, "the whole PLog replayed")
				assert.True(t, adv.Written)

				after := newStorage(t, Options{Storage: st})
				off, err := after.ReadNextPLogOffset()
				require.NoError(t, err)
				assert.Equal(t, isequencer.PLogOffset(5012), off)
				nums, err := after.ReadNumbers(2, []isequencer.SeqID{1, 2, 3, 4})
				require.NoError(t, err)
				assert.Equal(t, []isequencer.Number{1510, 577, 200500, 0}, nums, "a named workspace: the floors; an unfloored SeqID: as stored")
				nums, err = after.ReadNumbers(12345, []isequencer.SeqID{1, 2})
				require.NoError(t, err)
				assert.Equal(t, []isequencer.Number{1510, 577}, nums, "a workspace the PLog never named gets the floors too")

				// The next owner's actualization starts after the gap; its
				// event there is read from offset 1 across the marker.
				a, err := after.ActualizeOnce(ctx, nil, false)
				require.NoError(t, err)
				assert.Equal(t, isequencer.PLogOffset(5012), a.Next)
				w2, err := plog.NewWriter(plog.WriterOptions{Storage: st, Partition: part, Mode: plog.ModeTrust0})
				require.NoError(t, err)
				require.NoError(t, w2.Write(ctx, &plog.Event{Offset: 5012, WSID: 4, Numbers: []plog.SeqNumber{{SeqID: 1, Number: 1511}}}))
				r, err := replay(t, after, 1)
				require.NoError(t, err)
				assert.Equal(t, append(span(1, 10), 5011, 5012), r.offsets, "the marker reported at the last offset it covers")
			})
		})
	}
}

func span(from, to isequencer.PLogOffset) []isequencer.PLogOffset {
	var out []isequencer.PLogOffset
	for o := from; o <= to; o++ {
		out = append(out, o)
	}
	return out
}

// TestAdvanceAgainRaisesAgain: the floors only grow, and a second advance
// (after a failed or repeated run) adds a gap of its own after the first.
func TestAdvanceAgainRaisesAgain(t *testing.T) {
	st := mem.New(mem.Options{})
	defer st.Close()
	writeEvents(t, st, 3)
	for i, want := range []struct {
		floor1 isequencer.Number
		gap    isequencer.PLogOffset
	}{{1103, 4}, {1203, 105}} {
		s, w := advancer(t, st, plog.ModeTrust0)
		adv, err := s.Advance(context.Background(), AdvanceOptions{Numbers: 100, Offsets: 100, Writer: w})
		require.NoError(t, err, "run %d", i+1)
		assert.Equal(t, want.floor1, adv.Floors[0].Number, "run %d", i+1)
		assert.Equal(t, want.gap, adv.Gap, "run %d", i+1)
	}
}

// TestAdvanceRefusesBadInput: options, no owner, a number overflow: an
// error, and nothing written.
func TestAdvanceRefusesBadInput(t *testing.T) {
	st := drivertest.NewCounting(mem.New(mem.Options{}))
	defer st.Close()
	writeEvents(t, st, 3)
	s, w := advancer(t, st, plog.ModeTrust0)
	for name, o := range map[string]AdvanceOptions{
		"no numbers":  {Offsets: 1, Writer: w},
		"no offsets":  {Numbers: 1, Writer: w},
		"big offsets": {Numbers: 1, Offsets: plog.MaxSkip + 1, Writer: w},
		"no writer":   {Numbers: 1, Offsets: 1},
	} {
		st.Reset()
		_, err := s.Advance(context.Background(), o)
		require.ErrorIs(t, err, ErrInvalidOptions, name)
		assert.Zero(t, st.Calls(faulty.OpPutBatch)+st.Calls(faulty.OpGet), name)
	}

	reader := newStorage(t, Options{Storage: st})
	reader.o.Owner = nil
	_, err := reader.Advance(context.Background(), AdvanceOptions{Numbers: 1, Offsets: 1, Writer: w})
	require.ErrorIs(t, err, ErrNotOwner)

	st.Reset()
	_, err = s.Advance(context.Background(), AdvanceOptions{Numbers: 1<<64 - 1000, Offsets: 1, Writer: w})
	require.ErrorIs(t, err, isequencer.ErrNumberOverflow)
	assert.Contains(t, err.Error(), "SeqID 1: 1003 + ")
	assert.Zero(t, st.Calls(faulty.OpPutBatch)+st.Calls(faulty.OpInsertIfNotExists), "nothing written")
}

// TestAdvanceStopsAtAFailedStep: a failed floors write leaves no marker; a
// failed marker write leaves the stored offset; each says so.
func TestAdvanceStopsAtAFailedStep(t *testing.T) {
	ctx := context.Background()
	base := mem.New(mem.Options{})
	defer base.Close()
	writeEvents(t, base, 3)
	st, err := faulty.New(base, faulty.Options{})
	require.NoError(t, err)
	s, w := advancer(t, st, plog.ModeTrust0)
	require.NoError(t, st.SetRules(faulty.Rule{Ops: []string{faulty.OpPutBatch}, Action: faulty.Fail, Times: 1}))
	_, err = s.Advance(ctx, AdvanceOptions{Numbers: 10, Offsets: 10, Writer: w})
	require.ErrorIs(t, err, storage.ErrUnavailable)
	r := newStorage(t, Options{Storage: base})
	got, err := replay(t, r, 1)
	require.NoError(t, err)
	assert.Equal(t, span(1, 3), got.offsets, "no marker after a failed floors write")

	s, w = advancer(t, st, plog.ModeTrust0)
	require.NoError(t, st.SetRules(faulty.Rule{Ops: []string{faulty.OpInsertIfNotExists, faulty.OpApplyBatchIf, faulty.OpApplyBatchesIf}, Action: faulty.Fail, Times: 1}))
	_, err = s.Advance(ctx, AdvanceOptions{Numbers: 10, Offsets: 10, Writer: w})
	require.ErrorIs(t, err, storage.ErrUnavailable)
	assert.Contains(t, err.Error(), "floors written: advance again")
	floors, err := vvmadapter.New(base, app).GetFloors(ctx, part)
	require.NoError(t, err)
	assert.Equal(t, isequencer.Number(1013), floors[0].Number)
}

// TestAdvanceWritesEveryEventsRecords: a backup may lack the record rows
// of events below its stored next offset (an event its owner's replay took
// without them, settled after the backup); Advance writes them for every
// event, and in trust0 reports, without failing, an event whose record ID
// a row naming another offset holds.
func TestAdvanceWritesEveryEventsRecords(t *testing.T) {
	for _, mode := range []plog.Mode{plog.ModeTrust0, plog.ModeTrust1, plog.ModeTrust2, plog.ModeFenced} {
		t.Run(mode.String(), func(t *testing.T) {
			ctx := context.Background()
			st := mem.New(mem.Options{})
			defer st.Close()
			for off := isequencer.PLogOffset(1); off <= 3; off++ {
				e := &plog.Event{Partition: part, Offset: off, WSID: 4, Numbers: []plog.SeqNumber{{SeqID: 1, Number: isequencer.Number(off)}}, Records: []plog.RecordID{plog.RecordID(100 + off)}}
				b, err := plog.AppendEncoded(nil, e)
				require.NoError(t, err)
				require.NoError(t, st.Put(ctx, plog.EventPKey(part, off), plog.EventCCols(off), b))
			}
			before := newStorage(t, Options{Storage: st})
			require.NoError(t, before.WriteValuesAndNextPLogOffset(nil, 4)) // every event below the stored offset
			require.NoError(t, st.Put(ctx, plog.RecordPKey(4, 102), plog.RecordCCols(102), plog.RecordValue(99)))

			s, w := advancer(t, st, mode)
			adv, err := s.Advance(ctx, AdvanceOptions{Numbers: 10, Offsets: 10, Writer: w, Records: w.(plog.RecordsWriter)})
			require.NoError(t, err)
			assert.Equal(t, 3, adv.RecordEvents)
			want := map[plog.RecordID]isequencer.PLogOffset{101: 1, 102: 2, 103: 3}
			if mode == plog.ModeTrust0 {
				assert.Equal(t, []isequencer.PLogOffset{2}, adv.RecordConflicts)
				want[102] = 99
			} else {
				assert.Empty(t, adv.RecordConflicts)
			}
			for id, off := range want {
				v, ok, err := st.Get(ctx, plog.RecordPKey(4, id), plog.RecordCCols(id))
				require.NoError(t, err)
				require.True(t, ok, "record %d", id)
				assert.Equal(t, plog.RecordValue(off), v, "record %d", id)
			}
		})
	}
}

// chunkCounter is a plog.RecordsWriter that records the size of each
// WriteRecordsOf call and fails the call numbered failAt (from 1, 0: none).
type chunkCounter struct {
	plog.RecordsWriter
	sizes  []int
	failAt int
}

func (c *chunkCounter) WriteRecordsOf(ctx context.Context, events []*plog.Event, conflict func(*plog.Event, error)) error {
	c.sizes = append(c.sizes, len(events))
	if len(c.sizes) == c.failAt {
		return storage.ErrUnavailable
	}
	return c.RecordsWriter.WriteRecordsOf(ctx, events, conflict)
}

// TestAdvanceWritesRecordsInChunks: Advance holds at most
// advanceRecordEvents events' records at a time, writing every event's;
// a chunk that fails ends it before the floors, naming the offsets.
func TestAdvanceWritesRecordsInChunks(t *testing.T) {
	ctx := context.Background()
	const events = 2*advanceRecordEvents + 3
	st := mem.New(mem.Options{})
	defer st.Close()
	for off := isequencer.PLogOffset(1); off <= events; off++ {
		e := &plog.Event{Partition: part, Offset: off, WSID: 4, Numbers: []plog.SeqNumber{{SeqID: 1, Number: isequencer.Number(off)}}, Records: []plog.RecordID{plog.RecordID(100 + off)}}
		b, err := plog.AppendEncoded(nil, e)
		require.NoError(t, err)
		require.NoError(t, st.Put(ctx, plog.EventPKey(part, off), plog.EventCCols(off), b))
	}

	s, w := advancer(t, st, plog.ModeTrust2)
	failing := &chunkCounter{RecordsWriter: w.(plog.RecordsWriter), failAt: 2}
	_, err := s.Advance(ctx, AdvanceOptions{Numbers: 10, Offsets: 10, Writer: w, Records: failing})
	require.ErrorIs(t, err, storage.ErrUnavailable)
	assert.Contains(t, err.Error(), fmt.Sprintf("PLog offsets %d-%d", advanceRecordEvents+1, 2*advanceRecordEvents))
	floors, err := vvmadapter.New(st, app).GetFloors(ctx, part)
	require.NoError(t, err)
	assert.Empty(t, floors, "no floors after a failed records write")

	s, w = advancer(t, st, plog.ModeTrust2)
	counted := &chunkCounter{RecordsWriter: w.(plog.RecordsWriter)}
	adv, err := s.Advance(ctx, AdvanceOptions{Numbers: 10, Offsets: 10, Writer: w, Records: counted})
	require.NoError(t, err)
	assert.Equal(t, []int{advanceRecordEvents, advanceRecordEvents, 3}, counted.sizes)
	assert.Equal(t, events, adv.RecordEvents)
	for _, id := range []isequencer.PLogOffset{1, advanceRecordEvents, events} {
		v, ok, err := st.Get(ctx, plog.RecordPKey(4, plog.RecordID(100+id)), plog.RecordCCols(plog.RecordID(100+id)))
		require.NoError(t, err)
		require.True(t, ok, "record of offset %d", id)
		assert.Equal(t, plog.RecordValue(id), v)
	}
}
