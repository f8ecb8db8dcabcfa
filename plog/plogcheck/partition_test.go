package plogcheck

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// concurrentReads is a Stored that counts the GetNumbersMax calls in
// flight. The first bound calls wait until bound are in flight, and then
// hold a little longer, so that a pool that starts more calls than bound
// shows them in peak; after that (or after a safety timeout, so that a
// pool running fewer than bound fails instead of hanging) no call waits.
type concurrentReads struct {
	Stored
	bound   int64
	hold    time.Duration
	running atomic.Int64
	peak    atomic.Int64
	calls   atomic.Int64

	once    sync.Once
	release sync.Once
	open    chan struct{}
}

func (c *concurrentReads) GetNumbersMax(ctx context.Context, ws isequencer.WSID, ids []isequencer.SeqID, dst []isequencer.Number) error {
	c.calls.Add(1)
	c.once.Do(func() { time.AfterFunc(5*time.Second, func() { c.release.Do(func() { close(c.open) }) }) })
	n := c.running.Add(1)
	defer c.running.Add(-1)
	for {
		p := c.peak.Load()
		if n <= p || c.peak.CompareAndSwap(p, n) {
			break
		}
	}
	if n == c.bound {
		time.AfterFunc(c.hold, func() { c.release.Do(func() { close(c.open) }) })
	}
	select {
	case <-c.open:
	case <-ctx.Done():
		return ctx.Err()
	}
	return c.Stored.GetNumbersMax(ctx, ws, ids, dst)
}

// TestPartitionReadsStoredNumbersBoundedConcurrently: Partition reads the
// stored numbers of 3 x storedReadWorkers workspaces, storedReadWorkers at
// a time and no more, and checks each against what was read for it.
func TestPartitionReadsStoredNumbersBoundedConcurrently(t *testing.T) {
	const wss = 3 * storedReadWorkers
	var p plogchecktest.Planted
	for i := range wss {
		ws := isequencer.WSID(100 + i)
		p.Events = append(p.Events, ev(isequencer.PLogOffset(i+1), ws, isequencer.Number(i+1)))
		p.Stored = append(p.Stored, val(ws, 1, isequencer.Number(i+1)))
	}
	p.StoredNext = wss + 1
	p.Stored[wss-1].Value-- // the last workspace's read says a regression
	st := mem.New(mem.Options{})
	defer st.Close()
	p.Write(t, st)
	rd, err := plog.NewReader(st, plog.ReaderOptions{})
	require.NoError(t, err)
	stored := &concurrentReads{Stored: vvmadapter.New(st, plogchecktest.App), bound: storedReadWorkers, hold: 20 * time.Millisecond,
		open: make(chan struct{})}
	r, err := Partition(context.Background(), rd, 0, PartitionOptions{Stored: stored})
	require.NoError(t, err)
	assert.Equal(t, int64(wss), stored.calls.Load(), "one read per workspace")
	assert.Equal(t, int64(storedReadWorkers), stored.peak.Load(), "storedReadWorkers reads at a time")
	assert.Equal(t, wss, r.Workspaces)
	assert.Equal(t, map[Kind]uint64{Regression: 1}, kinds(&r.Findings), "%v", r.Listed)
	require.Len(t, r.Listed, 1)
	assert.Equal(t, isequencer.WSID(100+wss-1), r.Listed[0].WSID, "each workspace checked against its own read")
}

// TestPartitionPoolFirstErrorWinsAndContextStops: in forEachBounded (the
// pool Partition reads stored numbers with) the first error is returned,
// cancels the others' context and starts no new call; a caller's ctx that
// ends starts no new call and is returned when no call failed.
func TestPartitionPoolFirstErrorWinsAndContextStops(t *testing.T) {
	boom := errors.New("boom")
	var calls atomic.Int32
	err := forEachBounded(context.Background(), 1000, 2, func(ctx context.Context, i int) error {
		calls.Add(1)
		if i == 1 {
			return boom
		}
		<-ctx.Done() // the others wait until the failure cancels them
		return ctx.Err()
	})
	assert.Equal(t, boom, err, "the first error, not the others' context.Canceled")
	assert.LessOrEqual(t, calls.Load(), int32(2), "no call after the first error")

	calls.Store(0)
	ctx, cancel := context.WithCancel(context.Background())
	err = forEachBounded(ctx, 1000, 2, func(context.Context, int) error { calls.Add(1); cancel(); return nil })
	assert.ErrorIs(t, err, context.Canceled, "a cancelled caller is reported even when the calls succeeded")
	assert.LessOrEqual(t, calls.Load(), int32(2), "no call after the caller's ctx ended")

	assert.NoError(t, forEachBounded(context.Background(), 0, 8, nil))
	assert.ErrorIs(t, forEachBounded(ctx, 0, 8, nil), context.Canceled)
	got := make([]int, 50)
	require.NoError(t, forEachBounded(context.Background(), len(got), 0, func(_ context.Context, i int) error { got[i] = i + 1; return nil }))
	for i, v := range got {
		require.Equal(t, i+1, v, "workers 0 runs every call on one goroutine")
	}
}
