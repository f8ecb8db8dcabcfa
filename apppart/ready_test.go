package apppart

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage/faulty"
	"github.com/cqlseq/cqlseq/storage/mem"
)

// slowReads makes every read of st wait d (the actualization's replay).
func slowReads(t *testing.T, st *faulty.Store, d time.Duration) {
	t.Helper()
	require.NoError(t, st.SetRules(faulty.Rule{
		Ops:    []string{faulty.OpGet, faulty.OpGetBatch, faulty.OpRead, faulty.OpReadPartitions},
		Action: faulty.Delay, Delay: d,
	}))
}

// TestWaitReadyAfterOpen: a partition opened over a slow store is busy
// while it actualizes; WaitReady returns once it is done, and a command
// is then taken at once.
func TestWaitReadyAfterOpen(t *testing.T) {
	inner := mem.New(mem.Options{})
	defer inner.Close()
	st, err := faulty.New(inner, faulty.Options{})
	require.NoError(t, err)
	slowReads(t, st, 20*time.Millisecond)
	p := newPartition(t, st)
	cmd := Command{WSKind: kind, WSID: 1, Seqs: []isequencer.SeqID{seqRec}}
	_, err = p.Do(context.Background(), cmd)
	require.ErrorIs(t, err, ErrBusy, "actualizing after Open")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, p.WaitReady(ctx))
	st.Clear()
	r, err := p.Do(ctx, cmd)
	require.NoError(t, err, "ready: no busy answer")
	assert.Equal(t, isequencer.PLogOffset(1), r.Offset)
	require.NoError(t, p.WaitReady(ctx), "ready stays ready")
}

// TestWaitReadyEndsWithCtx: ctx ends before the actualization does.
func TestWaitReadyEndsWithCtx(t *testing.T) {
	inner := mem.New(mem.Options{})
	defer inner.Close()
	st, err := faulty.New(inner, faulty.Options{})
	require.NoError(t, err)
	slowReads(t, st, time.Second)
	p := newPartition(t, st)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	began := time.Now()
	require.ErrorIs(t, p.WaitReady(ctx), context.DeadlineExceeded)
	assert.Less(t, time.Since(began), 900*time.Millisecond, "returned with ctx, not with the actualization")
	st.Clear()
}

// TestWaitReadyNever: a stopped or closed partition never takes a command
// again: WaitReady says why at once.
func TestWaitReadyNever(t *testing.T) {
	st := mem.New(mem.Options{})
	defer st.Close()
	p := open(t, openOptions(st, plog.ModeTrust0))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, p.WaitReady(ctx))
	r, err := p.Do(ctx, cmdFor(1))
	require.NoError(t, err)
	// Another writer's event at the next offset: the next command's write
	// conflicts (trust level 0) and stops the partition.
	w, err := plog.NewWriter(plog.WriterOptions{Storage: st, Partition: testPart, Mode: plog.ModeTrust0})
	require.NoError(t, err)
	require.NoError(t, w.Write(ctx, &plog.Event{Partition: testPart, Offset: r.Offset + 1, WSID: 77, WSKind: kind, Payload: []byte("other")}))
	_, err = p.Do(ctx, cmdFor(1))
	require.ErrorIs(t, err, ErrStopped)
	require.ErrorIs(t, p.WaitReady(ctx), ErrStopped)

	require.NoError(t, p.Close())
	require.ErrorIs(t, p.WaitReady(ctx), ErrClosed)
}
