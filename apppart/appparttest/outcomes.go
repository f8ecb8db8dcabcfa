package appparttest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/apppart"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/faulty"
)

// plogWrites are the storage operations of a PLog write, in every mode
// and on every driver.
var plogWrites = []string{
	faulty.OpApplyBatchesIf, faulty.OpApplyBatchIf, faulty.OpPutBatch, faulty.OpPut, faulty.OpInsertIfNotExists,
}

// outcomeCmd is a command of workspace ws with its own payload (Settle
// tells commands apart by it) and no record.
func outcomeCmd(ws isequencer.WSID, payload string) apppart.Command {
	return apppart.Command{WSKind: Kind, WSID: ws, Seqs: []isequencer.SeqID{SeqWLogOffset}, Payload: []byte(payload)}
}

// outcomePartition opens partition part in mode over st, its PLog through
// a faulty store (the sequencer's own rows are not faulted), ready.
func outcomePartition(t *testing.T, st storage.Storage, part isequencer.PartitionID, mode plog.Mode, m apppart.Metrics) (*apppart.Partition, *faulty.Store) {
	t.Helper()
	fst, err := faulty.New(st, faulty.Options{})
	require.NoError(t, err)
	o := Options(st, part, mode)
	o.AppStorage = fst
	o.RecordSeqs = nil
	o.Metrics = m
	p := Open(t, o)
	require.NoError(t, p.WaitReady(outcomeCtx(t)))
	return p, fst
}

func outcomeCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// requireOutcome checks that err reports outcome at off.
func requireOutcome(t *testing.T, err error, outcome apppart.Outcome, off isequencer.PLogOffset) {
	t.Helper()
	require.Equal(t, outcome, apppart.OutcomeOf(err), "%v", err)
	e, ok := errors.AsType[*apppart.EventError](err)
	require.True(t, ok, "%v is not an *apppart.EventError", err)
	assert.Equal(t, off, e.Offset, "%v", err)
}

// Outcomes runs the outcome scenarios in mode over st, on partitions part
// to part+3: a write whose answer is lost, one that is not applied, ctx
// ending while the command waits, and (in trust0, trust1 and fenced) a
// refused write. Each is answered as a value with its offset, Settle makes
// the unknown ones final, and a refusal stops the partition with its
// reason in the metrics.
func Outcomes(t *testing.T, st storage.Storage, part isequencer.PartitionID, mode plog.Mode) {
	t.Run("lost-answer", func(t *testing.T) {
		p, fst := outcomePartition(t, st, part, mode, nil)
		ws := WS(part, 1)
		_, err := Do(t, p, outcomeCmd(ws, "first"))
		require.NoError(t, err)
		require.NoError(t, fst.SetRules(faulty.Rule{Ops: plogWrites, Times: 1, Action: faulty.Fail, AfterCall: true}))
		cmd := outcomeCmd(ws, "lost")
		res, err := p.Do(outcomeCtx(t), cmd)
		if mode == plog.ModeTrust2 {
			// trust2 writes the group again, the same bytes: stored.
			require.NoError(t, err)
		} else {
			requireOutcome(t, err, apppart.Unknown, res.Offset)
		}
		fst.Clear()
		got, err := p.Settle(outcomeCtx(t), cmd, res)
		require.NoError(t, err)
		assert.Equal(t, apppart.Stored, got, "the replay reads the event: no later command needed")
		next, err := Do(t, p, outcomeCmd(ws, "next"))
		require.NoError(t, err)
		assert.Equal(t, res.Offset+1, next.Offset, "the settled event keeps its offset")
		assert.Equal(t, res.Numbers[0]+1, next.Numbers[0], "and its number")
	})
	t.Run("not-applied", func(t *testing.T) {
		p, fst := outcomePartition(t, st, part+1, mode, nil)
		ws := WS(part+1, 1)
		require.NoError(t, fst.SetRules(faulty.Rule{Ops: plogWrites, Times: 1, Action: faulty.Fail}))
		cmd := outcomeCmd(ws, "failed")
		res, err := p.Do(outcomeCtx(t), cmd)
		if mode == plog.ModeTrust2 {
			require.NoError(t, err, "trust2 writes the group again, the same bytes")
			return
		}
		requireOutcome(t, err, apppart.Unknown, res.Offset)
		fst.Clear()
		// No later command: Settle claims the offset of the idle
		// partition (a void gap marker) and answers NotStored.
		got, err := p.Settle(outcomeCtx(t), cmd, res)
		require.NoError(t, err)
		assert.Equal(t, apppart.NotStored, got)
		other := outcomeCmd(ws, "other")
		ores, err := Do(t, p, other)
		require.NoError(t, err)
		assert.Greater(t, ores.Offset, res.Offset, "the claimed offset is not taken again")
		assert.Equal(t, res.Numbers, ores.Numbers, "the numbers are")
		got, err = p.Settle(outcomeCtx(t), other, ores)
		require.NoError(t, err)
		assert.Equal(t, apppart.Stored, got)
	})
	t.Run("ctx-ended", func(t *testing.T) {
		p, fst := outcomePartition(t, st, part+2, mode, nil)
		require.NoError(t, fst.SetRules(faulty.Rule{Ops: plogWrites, Times: 1, Action: faulty.Delay, Delay: 500 * time.Millisecond}))
		cmd := outcomeCmd(WS(part+2, 1), "late")
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		var res apppart.Result
		var err error
		for {
			res, err = p.Do(ctx, cmd)
			if !errors.Is(err, apppart.ErrBusy) {
				break
			}
		}
		cancel()
		requireOutcome(t, err, apppart.Unknown, res.Offset)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		got, err := p.Settle(outcomeCtx(t), cmd, res)
		require.NoError(t, err)
		assert.Equal(t, apppart.Stored, got, "the write went on")
	})
	if mode == plog.ModeTrust2 {
		return // trust2 refuses nothing
	}
	t.Run("refused", func(t *testing.T) {
		m := &StopRecorder{}
		p, _ := outcomePartition(t, st, part+3, mode, m)
		ws := WS(part+3, 1)
		r1, err := Do(t, p, outcomeCmd(ws, "first"))
		require.NoError(t, err)
		want := apppart.StopConflict
		if mode == plog.ModeFenced {
			// Another owner takes the partition over.
			Open(t, Options(st, part+3, mode))
			want = apppart.StopFenced
		} else {
			// Another writer's event at the next offset.
			w, err := plog.NewWriter(plog.WriterOptions{Storage: st, Partition: part + 3, Mode: mode})
			require.NoError(t, err)
			require.NoError(t, w.Write(outcomeCtx(t), &plog.Event{Partition: part + 3, Offset: r1.Offset + 1, WSID: ws, WSKind: Kind, Payload: []byte("another writer")}))
		}
		cmd := outcomeCmd(ws, "refused")
		res, err := p.Do(outcomeCtx(t), cmd)
		requireOutcome(t, err, apppart.NotStored, r1.Offset+1)
		require.ErrorIs(t, err, apppart.ErrStopped)
		_, err = p.Settle(outcomeCtx(t), cmd, res)
		require.ErrorIs(t, err, apppart.ErrStopped, "stopped before the offset is final: the next owner settles it")
		got, err := p.Settle(outcomeCtx(t), outcomeCmd(ws, "first"), r1)
		require.NoError(t, err)
		assert.Equal(t, apppart.Stored, got)
		require.ErrorIs(t, p.WaitReady(outcomeCtx(t)), apppart.ErrStopped)
		assert.Equal(t, []apppart.StopReason{want}, m.Reasons())
	})
}

// StopRecorder is an apppart.Metrics that records the stops.
type StopRecorder struct {
	mu      sync.Mutex
	reasons []apppart.StopReason
}

func (*StopRecorder) Opened(uint64)                                {}
func (*StopRecorder) Command(apppart.CommandResult, time.Duration) {}
func (*StopRecorder) Durable(isequencer.PLogOffset)                {}

// Stopped implements apppart.Metrics.
func (m *StopRecorder) Stopped(r apppart.StopReason) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reasons = append(m.reasons, r)
}

// Reasons returns the stops recorded so far.
func (m *StopRecorder) Reasons() []apppart.StopReason {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]apppart.StopReason(nil), m.reasons...)
}
