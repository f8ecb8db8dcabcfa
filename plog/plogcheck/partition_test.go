package plogcheck

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/plog/plogcheck/plogchecktest"
	"github.com/cqlseq/cqlseq/storage/mem"
	"github.com/cqlseq/cqlseq/vvmadapter"
)

var (
	ev  = plogchecktest.Event
	val = plogchecktest.Value
)

// check writes p to a new store and runs Partition on it.
func check(t *testing.T, p plogchecktest.Planted) *PartitionReport {
	t.Helper()
	st := mem.New(mem.Options{})
	t.Cleanup(func() { _ = st.Close() })
	p.Write(t, st)
	rd, err := plog.NewReader(st, plog.ReaderOptions{})
	require.NoError(t, err)
	r, err := Partition(context.Background(), rd, p.Partition, PartitionOptions{Stored: vvmadapter.New(st, plogchecktest.App)})
	require.NoError(t, err)
	return r
}

// kinds returns the report's counts by kind, for comparing with a
// literal.
func kinds(f *Findings) map[Kind]uint64 {
	if f.ByKind == nil {
		return map[Kind]uint64{}
	}
	return f.ByKind
}

func TestPartitionPassesAConsistentLog(t *testing.T) {
	p := plogchecktest.Consistent()
	p.Partition = 2
	r := check(t, p)
	assert.True(t, r.OK(), "%v", r.Listed)
	assert.Equal(t, &PartitionReport{Partition: 2, StoredNext: 4, Events: 4, Last: 4, Tail: 1, Workspaces: 2, Keys: 4, Numbers: 8}, r)
}

func TestPartitionFindsDuplicate(t *testing.T) {
	r := check(t, plogchecktest.Duplicate())
	assert.Equal(t, map[Kind]uint64{Duplicate: 1}, kinds(&r.Findings))
	assert.Equal(t, []Finding{{Kind: Duplicate, Offset: 2, WSID: 7, SeqID: 1, Number: 5, PrevOffset: 1, PrevNumber: 5,
		Text: "WSID 7 SeqID 1: number 5 at offset 2 was already issued at offset 1"}}, r.Listed)
}

func TestPartitionFindsBackwards(t *testing.T) {
	r := check(t, plogchecktest.Backwards())
	assert.Equal(t, map[Kind]uint64{Backwards: 1}, kinds(&r.Findings))
	require.Len(t, r.Listed, 1)
	f := r.Listed[0]
	assert.Equal(t, Finding{Kind: Backwards, Offset: 3, WSID: 7, SeqID: 1, Number: 6, PrevOffset: 2, PrevNumber: 9, Text: f.Text}, f)
	assert.Contains(t, f.String(), "backwards: WSID 7 SeqID 1: number 6 at offset 3 is below 9 at offset 2")
}

func TestPartitionFindsRegression(t *testing.T) {
	p := plogchecktest.Regression()
	p.Events = append(p.Events, ev(4, 8, 1)) // in the tail: no stored number needed
	r := check(t, p)
	assert.Equal(t, map[Kind]uint64{Regression: 1}, kinds(&r.Findings))
	require.Len(t, r.Listed, 1)
	f := r.Listed[0]
	assert.Equal(t, Finding{Kind: Regression, Offset: 2, WSID: 7, SeqID: 2, Number: 4, Stored: 3, Text: f.Text}, f)
	assert.Contains(t, f.Text, "WSID 7 SeqID 2: stored number 3 is below 4 at offset 2")

	r = check(t, plogchecktest.MissingStored())
	assert.Equal(t, map[Kind]uint64{Regression: 1}, kinds(&r.Findings))
	assert.Contains(t, r.Listed[0].Text, "WSID 7 SeqID 1: stored number 0 is below 5 at offset 1")
}

func TestPartitionFindsOffsetBeyondLog(t *testing.T) {
	r := check(t, plogchecktest.OffsetBeyondLog())
	assert.Equal(t, map[Kind]uint64{OffsetBeyondLog: 1}, kinds(&r.Findings))
	assert.Equal(t, Finding{Kind: OffsetBeyondLog, Offset: 4, PrevOffset: 1,
		Text: "stored next PLog offset 4 is beyond the log's end (last event at offset 1): the events between are missing"}, r.Listed[0])
	assert.Equal(t, uint64(1), r.Events)

	r = check(t, plogchecktest.Planted{Events: []plog.Event{ev(1, 7, 5), ev(2, 7, 6)}, StoredNext: 3, Stored: []isequencer.SeqValue{val(7, 1, 6)}})
	assert.True(t, r.OK(), "one past the last event: %v", r.Listed)
}

func TestPartitionTakesTheLargestNumberPerSeqOfAnEvent(t *testing.T) {
	e := ev(2, 7, 9)
	e.Numbers = append(e.Numbers, plog.SeqNumber{SeqID: 1, Number: 6}) // SeqID 1 twice in one event: 9 counts
	r := check(t, plogchecktest.Planted{Events: []plog.Event{ev(1, 7, 5), e, ev(3, 7, 10)}})
	assert.True(t, r.OK(), "%v", r.Listed)
	assert.Equal(t, uint64(3), r.Numbers)
}

func TestPartitionListsAtMostMaxListed(t *testing.T) {
	var events []plog.Event
	for i := range 2*MaxListed + 1 {
		events = append(events, ev(isequencer.PLogOffset(i+1), 7, 5))
	}
	r := check(t, plogchecktest.Planted{Events: events})
	assert.Equal(t, uint64(2*MaxListed), r.Problems)
	assert.Len(t, r.Listed, MaxListed)
	assert.Equal(t, uint64(MaxListed), r.Unlisted())
}

func TestPartitionWithoutStoredChecksThePLogAlone(t *testing.T) {
	st := mem.New(mem.Options{})
	defer st.Close()
	plogchecktest.Planted{Events: []plog.Event{ev(1, 7, 5), ev(2, 7, 5)}, StoredNext: 9}.Write(t, st)
	rd, err := plog.NewReader(st, plog.ReaderOptions{})
	require.NoError(t, err)
	var progress uint64
	r, err := Partition(context.Background(), rd, 0, PartitionOptions{Progress: func(n, _ uint64) { progress = n }})
	require.NoError(t, err)
	assert.Equal(t, map[Kind]uint64{Duplicate: 1}, kinds(&r.Findings), "no regression, no offset finding")
	assert.Zero(t, r.StoredNext)
	assert.Equal(t, uint64(2), r.Tail)
	assert.Equal(t, uint64(2), progress)

	_, err = Partition(context.Background(), nil, 0, PartitionOptions{})
	require.ErrorIs(t, err, ErrInvalidOptions)
}

func TestKindNamesRoundTrip(t *testing.T) {
	for _, k := range Kinds() {
		b, err := k.MarshalText()
		require.NoError(t, err)
		var got Kind
		require.NoError(t, got.UnmarshalText(b))
		assert.Equal(t, k, got)
	}
	assert.Equal(t, "lost record", LostRecord.String())
	assert.Equal(t, "offset", OffsetBeyondLog.String())
	assert.Equal(t, "Kind(0)", Kind(0).String())
	var k Kind
	require.Error(t, k.UnmarshalText([]byte("missing")))
	_, err := Kind(0).MarshalText()
	require.Error(t, err)
}

func TestReportJSONRoundTrip(t *testing.T) {
	r := check(t, plogchecktest.Planted{Events: []plog.Event{ev(1, 7, 5), ev(2, 7, 5)}, StoredNext: 3, Stored: []isequencer.SeqValue{val(7, 1, 5)}})
	rep := Report{Partitions: []*PartitionReport{r}, Acks: &AckReport{Acks: 3}}
	rep.OK = rep.Problems() == 0
	b, err := json.Marshal(&rep)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"by_kind":{"duplicate":1}`)
	assert.Contains(t, string(b), `"stored_next_offset":3`)
	var back Report
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, rep, back)
	assert.False(t, back.Passed())
	assert.Equal(t, uint64(1), back.Count(Duplicate, Backwards))
	assert.Zero(t, back.Count(Lost))

	// A report that says OK and counts a finding has not passed.
	require.NoError(t, json.Unmarshal([]byte(`{"ok": true, "partitions": [{"problems": 1, "by_kind": {"offset": 1}}]}`), &back))
	assert.False(t, back.Passed())
	assert.Equal(t, uint64(1), back.Count(OffsetBeyondLog))
	require.Error(t, json.Unmarshal([]byte(`{"partitions": [{"by_kind": {"gone": 1}}]}`), &back), "an unknown kind")
}
