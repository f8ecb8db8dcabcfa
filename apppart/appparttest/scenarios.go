package appparttest

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/apppart"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/plog/plogcheck"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/drivertest"
	"github.com/cqlseq/cqlseq/storage/faulty"
)

// RestartReplaysOnlyTail writes n events across workspaces workspaces of
// partition part (from restartWriters clients at once: offsets 1..n, each
// once), closes the partition and opens it again on st: the replay reads
// exactly the events from the stored next offset on (written minus
// stored), and every number is above every number handed out before. It
// then sets the stored offset back to the middle of the log (a lost offset
// write) and restarts again: the replay reads exactly that longer tail.
func RestartReplaysOnlyTail(t *testing.T, st storage.Storage, part isequencer.PartitionID, mode plog.Mode, n, workspaces int) {
	o := Options(st, part, mode)
	o.Sequencer.BatcherDelay = time.Millisecond // leave a tail at Close
	before := Maxes{}
	p := Open(t, o)
	var (
		mu   sync.Mutex
		next int
		offs = make([]isequencer.PLogOffset, 0, n)
		errs []error
		wg   sync.WaitGroup
	)
	for range restartWriters {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= n {
					return
				}
				cmd := Cmd(WS(part, 1+i%workspaces))
				r, err := Do(t, p, cmd)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					offs = append(offs, r.Offset)
					before.Add(cmd, r)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Empty(t, errs)
	slices.Sort(offs)
	for i, off := range offs {
		require.Equal(t, isequencer.PLogOffset(i+1), off, "offsets 1..%d, each once", n)
	}
	require.NoError(t, p.Close())
	stored := StoredOffset(t, st, part)
	require.LessOrEqual(t, stored, isequencer.PLogOffset(n+1))
	t.Logf("%d events written, stored next offset %d: tail %d", n, stored, n-int(stored)+1)

	// A trust2 owner that opens again seals the block its replay ends in
	// and starts at the next (apppart's sealZone): first is where.
	first := func(end isequencer.PLogOffset) isequencer.PLogOffset {
		if mode == plog.ModeTrust2 {
			return plog.ZoneMarker(part, end).NextOffset()
		}
		return end
	}
	replays := &Replays{}
	o.Sequencer.Metrics = replays
	p2 := Open(t, o)
	var last isequencer.PLogOffset
	for i := 1; i <= workspaces; i++ {
		cmd := Cmd(WS(part, i))
		r, err := Do(t, p2, cmd)
		require.NoError(t, err)
		if i == 1 {
			assert.Equal(t, int64(n)-int64(stored)+1, replays.Events(), "the replay reads only the tail")
			assert.Equal(t, first(isequencer.PLogOffset(n+1)), r.Offset)
		}
		last = r.Offset
		before.RequireAbove(t, cmd, r)
		before.Add(cmd, r)
	}
	require.NoError(t, p2.Close())

	rewound := isequencer.PLogOffset(n/2 + 1)
	RewindOffset(t, st, part, rewound)
	// What a replay from the rewound offset reads: the events (and the
	// sealed gap's marker) up to the last.
	rd, err := plog.NewReader(st, plog.ReaderOptions{})
	require.NoError(t, err)
	var tail int64
	require.NoError(t, rd.ReadEvents(context.Background(), part, rewound, func(*plog.Event) error { tail++; return nil }))
	wantTail := int64(n+workspaces) - int64(rewound) + 1
	if mode == plog.ModeTrust2 {
		wantTail++ // the sealed gap's marker
	}
	require.Equal(t, wantTail, tail, "the log from the rewound offset")
	replays = &Replays{}
	o.Sequencer.Metrics = replays
	p3 := Open(t, o)
	cmd := Cmd(WS(part, 7))
	r, err := Do(t, p3, cmd)
	require.NoError(t, err)
	assert.Equal(t, tail, replays.Events(), "the replay reads from the stored offset")
	assert.Equal(t, first(last+1), r.Offset)
	before.RequireAbove(t, cmd, r)
}

// restartWriters is how many clients RestartReplaysOnlyTail writes its
// events from: the events of concurrent commands share a group write, so a
// remote store's round trips do not add up per event.
const restartWriters = 16

// FailedWritesReuseNoNumber runs commands on partition part over a
// storage/faulty wrapper of st that fails event writes mid-stream: 2% are
// refused, 2% are applied and then reported as of unknown outcome (in
// trust2 mode the rules hit the sequencer's number flushes too, which it
// retries). The partition actualizes after each failure and goes on (in
// trust2 it writes the failed group again, the same bytes, until stored:
// no command fails): no number is handed out twice, neither to callers nor
// in the PLog, which holds contiguous offsets.
//
// Trust levels 0 and 1 and the fenced mode insert events with
// ApplyBatchIf (trust0 its records too: a fault there fails one command as
// well, its outcome unknown); trust level 2 puts them with PutBatch.
func FailedWritesReuseNoNumber(t *testing.T, st storage.Storage, part isequencer.PartitionID, mode plog.Mode, commands int) {
	op := faulty.OpApplyBatchIf
	if mode == plog.ModeTrust2 {
		op = faulty.OpPutBatch
	}
	// The contract's calls are faulted: a MultiApplier's one-call group
	// path (storage/boltdb, storage/mem) is hidden.
	fs, err := faulty.New(drivertest.ContractOnly(st), faulty.Options{Seed: uint64(part)})
	require.NoError(t, err)
	p := Open(t, Options(fs, part, mode))
	// Faults from the first command on: the takeover (a fenced one sweeps
	// with ApplyBatchIf) is not what this tests.
	require.NoError(t, fs.SetRules(
		faulty.Rule{Ops: []string{op}, Action: faulty.Fail, Probability: 0.02},
		faulty.Rule{Ops: []string{op}, Action: faulty.Fail, Probability: 0.02, AfterCall: true, Err: storage.ErrUnknownOutcome},
	))
	handed := Maxes{}
	results := map[isequencer.PLogOffset]apppart.Result{}
	failed := 0
	for i := range commands {
		cmd := Cmd(WS(part, 1+i%20))
		r, err := Do(t, p, cmd)
		if err != nil {
			require.ErrorIs(t, err, apppart.ErrWrite)
			require.ErrorIs(t, err, faulty.ErrInjected)
			failed++
			continue
		}
		handed.RequireAbove(t, cmd, r)
		handed.Add(cmd, r)
		require.NotContains(t, results, r.Offset, "offset handed out twice")
		results[r.Offset] = r
	}
	require.NoError(t, p.Close())
	fs.Clear()
	if mode != plog.ModeTrust2 {
		require.Positive(t, failed)
		assert.Equal(t, int(fs.Injected()), failed, "every injected fault failed one command")
	} else {
		// trust2 writes a failed group again, the same bytes, until it is
		// stored: a fault delays its commands, none fails.
		require.Positive(t, fs.Injected())
	}

	rd, err := plog.NewReader(st, plog.ReaderOptions{})
	require.NoError(t, err)
	pr, err := plogcheck.Partition(context.Background(), rd, part, plogcheck.PartitionOptions{})
	require.NoError(t, err)
	requireNoFindings(t, "the PLog (a number reused?)", &pr.Findings)
	require.NoError(t, rd.ReadEvents(context.Background(), part, 1, func(e *plog.Event) error {
		if res, ok := results[e.Offset]; ok {
			assert.Equal(t, res.Numbers[0], isequencer.Number(e.WLogOffset))
			assert.Equal(t, []plog.RecordID{plog.RecordID(res.Numbers[1])}, e.Records)
		}
		return nil
	}))
	lost := int(pr.Events) - len(results)
	t.Logf("%d commands: %d succeeded, %d failed of which %d were applied (unknown outcome)", commands, len(results), failed, lost)
	if mode != plog.ModeTrust2 { // trust2 stores every command: none failed
		assert.Positive(t, lost, "some events were applied although their write was reported failed")
	}
	assert.LessOrEqual(t, lost, failed)
}

// TrustLevelConflicts plants a row at the key the next command's event, or
// its record, will take, on partitions part..part+5. Trust levels 0 and 1
// refuse to overwrite the event (plog.ErrConflict) and stop the partition;
// level 0 also refuses the record; levels 1 and 2 overwrite the record;
// level 2 also overwrites the event (its documented price).
func TrustLevelConflicts(t *testing.T, st storage.Storage, part isequencer.PartitionID) {
	planted := []byte{1}
	for i, tc := range []struct {
		mode      plog.Mode
		plantRec  bool
		wconflict bool
	}{
		{plog.ModeTrust0, false, true},
		{plog.ModeTrust0, true, true},
		{plog.ModeTrust1, false, true},
		{plog.ModeTrust1, true, false},
		{plog.ModeTrust2, false, false},
		{plog.ModeTrust2, true, false},
	} {
		what := "event"
		if tc.plantRec {
			what = "record"
		}
		part := part + isequencer.PartitionID(i)
		t.Run(tc.mode.String()+"/"+what, func(t *testing.T) {
			ctx := context.Background()
			p := Open(t, Options(st, part, tc.mode))
			ws := WS(part, 1)
			var r apppart.Result
			var err error
			for range 5 {
				r, err = Do(t, p, Cmd(ws))
				require.NoError(t, err)
			}
			nextOff, nextRec := r.Offset+1, plog.RecordID(r.Numbers[1]+1)
			evKey, evCC := plog.EventPKey(part, nextOff), plog.EventCCols(nextOff)
			recKey, recCC := plog.RecordPKey(ws, nextRec), plog.RecordCCols(nextRec)
			if tc.plantRec {
				require.NoError(t, st.Put(ctx, recKey, recCC, planted))
			} else {
				require.NoError(t, st.Put(ctx, evKey, evCC, planted))
			}

			r, err = Do(t, p, Cmd(ws))
			ev, evOK, gerr := st.Get(ctx, evKey, evCC)
			require.NoError(t, gerr)
			rec, recOK, gerr := st.Get(ctx, recKey, recCC)
			require.NoError(t, gerr)
			if tc.wconflict {
				require.ErrorIs(t, err, apppart.ErrWrite)
				require.ErrorIs(t, err, plog.ErrConflict)
				require.ErrorIs(t, err, apppart.ErrStopped)
				t.Log(err)
				if tc.plantRec {
					assert.Equal(t, planted, rec, "the planted record is not overwritten")
					assert.True(t, evOK, "the event was written before its records")
				} else {
					assert.Equal(t, planted, ev, "the planted event is not overwritten")
					assert.False(t, recOK, "no record of the refused event")
				}
				_, err = p.Do(ctx, Cmd(WS(part, 2)))
				require.ErrorIs(t, err, apppart.ErrStopped, "the partition stays stopped")
				require.ErrorIs(t, err, plog.ErrConflict)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, nextOff, r.Offset)
			assert.Equal(t, isequencer.Number(nextRec), r.Numbers[1])
			var e plog.Event
			require.True(t, evOK)
			require.NoError(t, plog.Decode(part, nextOff, ev, &e), "the event at the offset is the command's")
			assert.Equal(t, []plog.RecordID{nextRec}, e.Records)
			require.True(t, recOK)
			assert.Equal(t, plog.RecordValue(nextOff), rec, "the planted record is overwritten")
		})
	}
}

// CorruptTailKeepsRetrying writes 3,000 events on partition part, sets the
// stored offset back to 1,001 (lost offset writes) and corrupts the event
// at 2,500. The reopened partition stays busy, logging on every retry an
// error that names partition and offset; once the bytes are repaired it
// goes on at offset 3,001 with numbers above all before: nothing lost.
func CorruptTailKeepsRetrying(t *testing.T, st storage.Storage, part isequencer.PartitionID) {
	ctx := context.Background()
	o := Options(st, part, plog.ModeTrust0)
	p := Open(t, o)
	before := Maxes{}
	const n = 3000
	for i := range n {
		cmd := Cmd(WS(part, 1+i%10))
		r, err := Do(t, p, cmd)
		require.NoError(t, err)
		before.Add(cmd, r)
	}
	require.NoError(t, p.Close())
	RewindOffset(t, st, part, 1001)
	const bad = 2500
	key, cc := plog.EventPKey(part, bad), plog.EventCCols(bad)
	good, ok, err := st.Get(ctx, key, cc)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, st.Put(ctx, key, cc, []byte{plog.FormatV1, 0xFF}))

	logs := NewLogCapture()
	o.Logger = slog.New(logs)
	p2 := Open(t, o)
	where := fmt.Sprintf("partition %d offset %d", part, bad)
	t.Log(logs.WaitFor(t, 1, "ActualizeSequencesFromPLog", where, plog.ErrCorrupt.Error()))
	logs.WaitFor(t, 2, "ActualizeSequencesFromPLog", where)
	_, err = p2.Do(ctx, Cmd(WS(part, 1)))
	require.ErrorIs(t, err, apppart.ErrBusy, "still actualizing")

	require.NoError(t, st.Put(ctx, key, cc, good))
	for i := 1; i <= 10; i++ {
		cmd := Cmd(WS(part, i))
		r, err := Do(t, p2, cmd)
		require.NoError(t, err)
		if i == 1 {
			assert.Equal(t, isequencer.PLogOffset(n+1), r.Offset, "no event lost")
		}
		before.RequireAbove(t, cmd, r)
	}
}
