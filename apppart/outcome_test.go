package apppart

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/storage/faulty"
	"github.com/cqlseq/cqlseq/storage/mem"
)

// requireOutcome checks that err is an EventError of outcome at off.
func requireOutcome(t *testing.T, err error, outcome Outcome, off isequencer.PLogOffset) {
	t.Helper()
	e, ok := errors.AsType[*EventError](err)
	require.True(t, ok, "%v is not an *EventError", err)
	assert.Equal(t, outcome, e.Outcome, "%v", err)
	assert.Equal(t, outcome, OutcomeOf(err))
	assert.Equal(t, off, e.Offset, "%v", err)
}

// TestCommitterStopAnswersQueuedNotStored: the commands still queued when
// the committer stops were never sent.
func TestCommitterStopAnswersQueuedNotStored(t *testing.T) {
	hold := make(chan struct{})
	l := &scriptLog{hold: hold}
	c := newCommitter(flowConfig{log: l, durable: &durableNext{}, maxGroup: 1, timeout: time.Minute, logger: quiet(), metrics: nopMetrics{}})
	x1 := queued(t, c, 1)
	require.Eventually(t, func() bool { return len(l.written()) == 1 }, 10*time.Second, time.Millisecond)
	x2 := queued(t, c, 2)
	close(hold)
	c.stop()
	require.NoError(t, answered(t, x1))
	if err := answered(t, x2); err != nil { // taken by the committer before it stopped: stored
		requireOutcome(t, err, NotStored, 2)
		require.ErrorIs(t, err, ErrClosed)
	}
}

// TestDoOutcomes: Do's errors before an offset is taken report NoEvent;
// a failed write reports its outcome and offset, with the event's offset
// and numbers in Result; ctx ending while the command waits for its group
// reports Unknown at its offset, and the event is then stored all the
// same.
func TestDoOutcomes(t *testing.T) {
	inner := mem.New(mem.Options{})
	defer inner.Close()
	st, err := faulty.New(inner, faulty.Options{})
	require.NoError(t, err)
	p := newPartition(t, st)
	cmd := Command{WSKind: kind, WSID: 1, Seqs: []isequencer.SeqID{seqRec}}

	_, err = p.Do(context.Background(), Command{WSKind: kind})
	require.ErrorIs(t, err, ErrInvalidCommand)
	assert.Equal(t, NoEvent, OutcomeOf(err))
	r1, err := do(t, p, cmd)
	require.NoError(t, err)
	assert.Equal(t, Stored, OutcomeOf(err))

	// A write that fails (mem applies a group in one ApplyBatchesIf): the
	// outcome of an error that is not a refusal is unknown.
	require.NoError(t, st.SetRules(faulty.Rule{
		Ops: []string{faulty.OpApplyBatchesIf}, Times: 1, Action: faulty.Fail, Err: errors.New("disk on fire"),
	}))
	r2, err := do(t, p, cmd)
	requireOutcome(t, err, Unknown, r1.Offset+1)
	assert.Equal(t, r1.Offset+1, r2.Offset)
	assert.Equal(t, []isequencer.Number{r1.Numbers[0] + 1}, r2.Numbers)
	_, ok := readEvent(t, inner, r2.Offset)
	assert.False(t, ok, "not stored: the replay gives its offset again")
	st.Clear()

	// ctx ends while the command waits for its group: Unknown at its
	// offset; the write goes on and stores the event.
	require.NoError(t, st.SetRules(faulty.Rule{
		Ops: []string{faulty.OpApplyBatchesIf}, Times: 1, Action: faulty.Delay, Delay: 300 * time.Millisecond,
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	var r3 Result
	for {
		r3, err = p.Do(ctx, cmd)
		if !errors.Is(err, ErrBusy) {
			break
		}
		time.Sleep(100 * time.Microsecond)
	}
	cancel()
	requireOutcome(t, err, Unknown, r2.Offset)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, r2.Offset, r3.Offset)
	require.Eventually(t, func() bool { _, ok := readEvent(t, inner, r3.Offset); return ok }, 10*time.Second, time.Millisecond)
	r4, err := do(t, p, cmd)
	require.NoError(t, err)
	assert.Equal(t, r3.Offset+1, r4.Offset, "the event ctx gave up on is stored")
	assert.Equal(t, r3.Numbers[0]+1, r4.Numbers[0])

	require.NoError(t, p.Close())
	_, err = p.Do(context.Background(), cmd)
	require.ErrorIs(t, err, ErrClosed)
	assert.Equal(t, NoEvent, OutcomeOf(err))
}

func TestOutcomeString(t *testing.T) {
	for o, want := range map[Outcome]string{NoEvent: "no event", NotStored: "not stored", Stored: "stored", Unknown: "unknown", 9: "Outcome(9)"} {
		assert.Equal(t, want, o.String())
	}
}
