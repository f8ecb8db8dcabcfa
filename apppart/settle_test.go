package apppart

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage/faulty"
	"github.com/cqlseq/cqlseq/storage/mem"
)

func settleFixture(t *testing.T) (*Partition, *faulty.Store) {
	t.Helper()
	inner := mem.New(mem.Options{})
	t.Cleanup(func() { inner.Close() })
	st, err := faulty.New(inner, faulty.Options{})
	require.NoError(t, err)
	p := newPartition(t, st)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, p.WaitReady(ctx))
	return p, st
}

func cmdWith(payload string) Command {
	return Command{WSKind: kind, WSID: 1, Seqs: []isequencer.SeqID{seqRec}, Payload: []byte(payload)}
}

func settleCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestSettleStoredAfterALostAnswer: the store applied the group but its
// answer was lost: Unknown; Settle actualizes the partition, whose replay
// reads the event: Stored, with no later command.
func TestSettleStoredAfterALostAnswer(t *testing.T) {
	p, st := settleFixture(t)
	require.NoError(t, st.SetRules(faulty.Rule{
		Ops: []string{faulty.OpApplyBatchesIf}, Times: 1, Action: faulty.Fail, AfterCall: true, Err: errors.New("answer lost"),
	}))
	cmd := cmdWith("a")
	res, err := p.Do(settleCtx(t), cmd)
	requireOutcome(t, err, Unknown, 1)
	got, err := p.Settle(settleCtx(t), cmd, res)
	require.NoError(t, err)
	assert.Equal(t, Stored, got)
	next, err := do(t, p, cmdWith("b"))
	require.NoError(t, err)
	assert.Equal(t, res.Offset+1, next.Offset, "the settled event keeps its offset")
	assert.Equal(t, res.Numbers[0]+1, next.Numbers[0], "and its numbers")
}

// TestSettleNotStoredOnceTheOffsetIsTaken: the group was not applied:
// Unknown; a later command's event takes the offset (the replay did not
// read the event): Settle answers NotStored, and Stored for the later
// command. (An idle partition claims the offset itself:
// TestAnIdlePartitionSettles.)
func TestSettleNotStoredOnceTheOffsetIsTaken(t *testing.T) {
	p, st := settleFixture(t)
	require.NoError(t, st.SetRules(faulty.Rule{
		Ops: []string{faulty.OpApplyBatchesIf}, Times: 1, Action: faulty.Fail, Err: errors.New("disk on fire"),
	}))
	cmd := cmdWith("a")
	res, err := p.Do(settleCtx(t), cmd)
	requireOutcome(t, err, Unknown, 1)

	other, err := do(t, p, cmdWith("b"))
	require.NoError(t, err)
	assert.Equal(t, res.Offset, other.Offset, "the offset is taken again")
	assert.Equal(t, res.Numbers, other.Numbers, "and the numbers")
	got, err := p.Settle(settleCtx(t), cmd, res)
	require.NoError(t, err)
	assert.Equal(t, NotStored, got)
	// The later command's own settlement: Stored.
	got, err = p.Settle(settleCtx(t), cmdWith("b"), other)
	require.NoError(t, err)
	assert.Equal(t, Stored, got)
}

// TestSettleAfterCtxEnded: ctx ended while the command waited for its
// group; the write goes on and stores the event: Settle says Stored.
func TestSettleAfterCtxEnded(t *testing.T) {
	p, st := settleFixture(t)
	require.NoError(t, st.SetRules(faulty.Rule{
		Ops: []string{faulty.OpApplyBatchesIf}, Times: 1, Action: faulty.Delay, Delay: 200 * time.Millisecond,
	}))
	cmd := cmdWith("a")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	res, err := p.Do(ctx, cmd)
	cancel()
	requireOutcome(t, err, Unknown, 1)
	got, err := p.Settle(settleCtx(t), cmd, res)
	require.NoError(t, err)
	assert.Equal(t, Stored, got)
}

// TestSettleRefusals: a Result without an offset; a partition stopped
// before the offset is final (a trust-0 conflict: another writer's event
// holds it) cannot settle it; a stored event's settlement still works
// once stopped.
func TestSettleRefusals(t *testing.T) {
	p, _ := settleFixture(t)
	_, err := p.Settle(settleCtx(t), cmdWith("a"), Result{})
	require.ErrorIs(t, err, ErrInvalidSettle)

	st := mem.New(mem.Options{})
	defer st.Close()
	q := open(t, openOptions(st, plog.ModeTrust0))
	ctx := settleCtx(t)
	require.NoError(t, q.WaitReady(ctx))
	first := cmdFor(1)
	r1, err := q.Do(ctx, first)
	require.NoError(t, err)
	w, err := plog.NewWriter(plog.WriterOptions{Storage: st, Partition: testPart, Mode: plog.ModeTrust0})
	require.NoError(t, err)
	require.NoError(t, w.Write(ctx, &plog.Event{Partition: testPart, Offset: r1.Offset + 1, WSID: 77, WSKind: kind, Payload: []byte("other")}))
	r2, err := q.Do(ctx, cmdFor(1))
	requireOutcome(t, err, NotStored, r1.Offset+1)
	_, err = q.Settle(ctx, cmdFor(1), r2)
	require.ErrorIs(t, err, ErrStopped)
	got, err := q.Settle(ctx, first, r1)
	require.NoError(t, err)
	assert.Equal(t, Stored, got, "below the durable offset: settled although stopped")
	got, err = q.Settle(ctx, cmdFor(2), r1)
	require.NoError(t, err)
	assert.Equal(t, NotStored, got, "another workspace's command at that offset")
}
