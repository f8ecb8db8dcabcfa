package plogcheck

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/mem"
)

// The commands of these tests take a record ID and a WLog offset.
const (
	seqRecords isequencer.SeqID = 1
	seqWLog    isequencer.SeqID = 2
)

// ackPLog is a store whose PLog holds acknowledged commands' events and
// their record rows.
type ackPLog struct {
	t  *testing.T
	st storage.Storage
}

func newAckPLog(t *testing.T) *ackPLog {
	st := mem.New(mem.Options{})
	t.Cleanup(func() { _ = st.Close() })
	return &ackPLog{t: t, st: st}
}

// write stores a command's event (and its record row) as trust2 writes it
// and returns its acknowledgement.
func (p *ackPLog) write(part isequencer.PartitionID, off isequencer.PLogOffset, ws isequencer.WSID, rec, wlog isequencer.Number) Ack {
	p.t.Helper()
	w, err := plog.NewWriter(plog.WriterOptions{Storage: p.st, Partition: part, Mode: plog.ModeTrust2})
	require.NoError(p.t, err)
	nums := []plog.SeqNumber{{SeqID: seqRecords, Number: rec}, {SeqID: seqWLog, Number: wlog}}
	require.NoError(p.t, w.Write(context.Background(), &plog.Event{Offset: off, WSID: ws, WSKind: 1, Numbers: nums, Records: []plog.RecordID{plog.RecordID(rec)}, Payload: []byte{byte(off)}}))
	return Ack{Partition: part, Offset: off, WSID: ws, Numbers: nums}
}

// check numbers acks' lines from 1 and checks them.
func (p *ackPLog) check(acks []Ack) *AckReport {
	p.t.Helper()
	for i := range acks {
		acks[i].Line = i + 1
	}
	rd, err := plog.NewReader(p.st, plog.ReaderOptions{})
	require.NoError(p.t, err)
	r, err := Acks(context.Background(), rd, &AckLog{Acks: acks}, AckOptions{RecordSeqs: []isequencer.SeqID{seqRecords}, Records: p.st})
	require.NoError(p.t, err)
	return r
}

// clean writes offsets 1..3 of WSID 3 in partition 0 and of WSID 5 in
// partition 2, every event and record stored as acknowledged.
func (p *ackPLog) clean() []Ack {
	var acks []Ack
	for off := isequencer.PLogOffset(1); off <= 3; off++ {
		acks = append(acks, p.write(0, off, 3, isequencer.Number(off), isequencer.Number(off)))
		acks = append(acks, p.write(2, off, 5, isequencer.Number(off), isequencer.Number(off)))
	}
	return acks
}

func texts(fs []Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Text)
	}
	return out
}

func TestAcksPassesACleanLog(t *testing.T) {
	p := newAckPLog(t)
	r := p.check(p.clean())
	require.True(t, r.OK(), "%v", r.Listed)
	assert.Equal(t, &AckReport{Acks: 6, Partitions: 2, Records: 6}, r)
}

func TestAcksFindsLost(t *testing.T) {
	p := newAckPLog(t)
	clean := p.clean()
	other := clean[0]
	other.Numbers = []plog.SeqNumber{{SeqID: seqRecords, Number: 99}, {SeqID: seqWLog, Number: 99}}
	otherWS := clean[2]
	otherWS.WSID = 4
	for _, tt := range []struct {
		name  string
		ack   Ack
		wtext string
	}{
		{"no event", Ack{Partition: 0, Offset: 9, WSID: 3, Numbers: []plog.SeqNumber{{SeqID: seqWLog, Number: 9}}},
			"partition 0 offset 9 (ack log line 6): acknowledged, not in the PLog"},
		// Offset 5 of partition 2 is beyond a gap (4 is missing): a restart
		// never reads it.
		{"beyond a gap", p.write(2, 5, 5, 5, 5), "partition 2 offset 5 (ack log line 6): acknowledged, not in the PLog"},
		{"other numbers", other, "partition 0 offset 1 (ack log line 6): acknowledged WSID 3 [{1 99} {2 99}], the PLog holds WSID 3 [{1 1} {2 1}]"},
		{"other workspace", otherWS, "partition 0 offset 2 (ack log line 6): acknowledged WSID 4"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			acks := append(slices.Clone(clean[1:]), tt.ack)
			r := p.check(acks)
			assert.Equal(t, uint64(1), r.Count(Lost), "%v", r.Listed)
			require.NotEmpty(t, r.Listed)
			f := r.Listed[0]
			assert.Equal(t, Lost, f.Kind)
			assert.Equal(t, []any{tt.ack.Partition, tt.ack.Offset, tt.ack.WSID, 6}, []any{f.Partition, f.Offset, f.WSID, f.Line})
			assert.Contains(t, f.Text, tt.wtext)
			assert.Zero(t, r.Count(LostRecord), "a lost event is reported once")
		})
	}
}

func TestAcksFindsAnotherPayload(t *testing.T) {
	p := newAckPLog(t)
	acks := p.clean()
	for i := range acks {
		acks[i].Payload = []byte{byte(acks[i].Offset)}
	}
	r := p.check(slices.Clone(acks))
	require.True(t, r.OK(), "%v", r.Listed)
	acks[3].Payload = []byte("overwritten")
	r = p.check(acks)
	assert.Equal(t, map[Kind]uint64{Lost: 1}, kinds(&r.Findings))
	assert.Contains(t, r.Listed[0].Text, "partition 2 offset 2 (ack log line 4): acknowledged a payload of 11 bytes")
}

// The defects of issue 20 items 1 and 2: one number of (WSID 3, SeqID 2)
// acknowledged in two partitions, one offset acknowledged twice with the
// same numbers.
func TestAcksFindsDuplicate(t *testing.T) {
	p := newAckPLog(t)
	clean := p.clean()

	// WSID 3 moved to partition 2 and was given number 2 of SeqID 2 again
	// (its event and record are stored as acknowledged).
	moved := p.write(2, 4, 3, 9, 2)
	r := p.check(append(slices.Clone(clean), moved))
	assert.Equal(t, map[Kind]uint64{Duplicate: 1}, kinds(&r.Findings), "%v", r.Listed)
	assert.Equal(t, Finding{Kind: Duplicate, Partition: 2, Offset: 4, WSID: 3, SeqID: 2, Number: 2, Line: 7,
		PrevPartition: 0, PrevOffset: 2, PrevNumber: 2, PrevLine: 3,
		Text: "WSID 3 SeqID 2: number 2 acknowledged at partition 0 offset 2 (line 3) and at partition 2 offset 4 (line 7)"}, r.Listed[0])

	r = p.check(append(slices.Clone(clean), clean[2]))
	assert.Equal(t, map[Kind]uint64{Duplicate: 1}, kinds(&r.Findings), "%v", r.Listed)
	assert.Equal(t, "partition 0 offset 2: acknowledged twice (ack log lines 3 and 7)", r.Listed[0].Text)
	assert.Equal(t, []int{7, 3}, []int{r.Listed[0].Line, r.Listed[0].PrevLine})
}

func TestAcksFindsRegression(t *testing.T) {
	p := newAckPLog(t)
	clean := p.clean()
	// Offset 4 of partition 0 acknowledged a WLog offset below offset 3's.
	back := Ack{Partition: 0, Offset: 4, WSID: 3, Numbers: []plog.SeqNumber{{SeqID: seqWLog, Number: 2}}}
	r := p.check(append(slices.Clone(clean), back))
	assert.Equal(t, uint64(1), r.Count(Regression), "%v", r.Listed)
	assert.Contains(t, texts(r.Listed), "partition 0 WSID 3 SeqID 2: number 2 acknowledged at offset 4 is below 3 at offset 3")
	assert.Equal(t, uint64(1), r.Count(Duplicate), "number 2 was acknowledged at offset 2 too")
	assert.Equal(t, uint64(1), r.Count(Lost), "offset 4 is not in the PLog")
}

// The defect of issue 20 item 7: record 3 of WSID 5 lost, record 1 of
// WSID 3 overwritten by an event at another offset.
func TestAcksFindsLostRecord(t *testing.T) {
	ctx := context.Background()
	p := newAckPLog(t)
	clean := p.clean()
	pk, cc := plog.RecordPKey(5, 3), plog.RecordCCols(3)
	ok, err := p.st.CompareAndDelete(ctx, pk, cc, plog.RecordValue(3))
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, p.st.Put(ctx, plog.RecordPKey(3, 1), plog.RecordCCols(1), plog.RecordValue(77)))
	r := p.check(slices.Clone(clean))
	assert.Equal(t, map[Kind]uint64{LostRecord: 2}, kinds(&r.Findings), "%v", r.Listed)
	assert.Contains(t, texts(r.Listed), "partition 2 offset 3 (ack log line 6): record 3 of WSID 5 is not stored")
	assert.Contains(t, texts(r.Listed), "partition 0 offset 1 (ack log line 1): record 1 of WSID 3 names offset 77")
	assert.Contains(t, r.Listed, Finding{Kind: LostRecord, Partition: 2, Offset: 3, WSID: 5, SeqID: seqRecords, Number: 3, Line: 6,
		Text: "partition 2 offset 3 (ack log line 6): record 3 of WSID 5 is not stored"})

	rd, err := plog.NewReader(p.st, plog.ReaderOptions{})
	require.NoError(t, err)
	r, err = Acks(ctx, rd, &AckLog{Acks: clean}, AckOptions{})
	require.NoError(t, err)
	assert.True(t, r.OK(), "without RecordSeqs no record row is checked")
	assert.Zero(t, r.Records)
	_, err = Acks(ctx, rd, &AckLog{}, AckOptions{RecordSeqs: []isequencer.SeqID{seqRecords}})
	require.ErrorIs(t, err, ErrInvalidOptions)
}
