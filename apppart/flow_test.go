package apppart

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
)

// scriptLog is a groupLog whose writes record their offsets, wait for
// hold (if set) and take their outcomes from outcome (nil: all stored).
type scriptLog struct {
	hold    chan struct{}
	outcome func(events []*plog.Event, errs []error)

	mu     sync.Mutex
	groups [][]isequencer.PLogOffset
}

func (l *scriptLog) writeGroup(_ context.Context, events []*plog.Event, errs []error) {
	offs := make([]isequencer.PLogOffset, len(events))
	for i, e := range events {
		offs[i] = e.Offset
	}
	l.mu.Lock()
	l.groups = append(l.groups, offs)
	hold, outcome := l.hold, l.outcome
	l.mu.Unlock()
	if hold != nil {
		<-hold
	}
	for i := range errs {
		errs[i] = nil
	}
	if outcome != nil {
		outcome(events, errs)
	}
}

func (l *scriptLog) written() [][]isequencer.PLogOffset {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([][]isequencer.PLogOffset(nil), l.groups...)
}

// durableNext records the last Durable.
type durableNext struct {
	mu   sync.Mutex
	next isequencer.PLogOffset
}

func (d *durableNext) Durable(next isequencer.PLogOffset) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.next = next
}

func (d *durableNext) get() isequencer.PLogOffset {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.next
}

func queued(t *testing.T, c *committer, off isequencer.PLogOffset) *pending {
	t.Helper()
	x := &pending{ev: plog.Event{Offset: off}, done: make(chan struct{})}
	require.NoError(t, c.enqueue(x))
	return x
}

func answered(t *testing.T, x *pending) error {
	t.Helper()
	select {
	case <-x.done:
		return x.err
	case <-time.After(10 * time.Second):
		t.Fatalf("offset %d: no answer", x.ev.Offset)
		return nil
	}
}

// TestCommitterHaltsOnAFailedGroup: a group stored up to an event whose
// outcome is unknown answers each command with its own outcome, reports
// only the stored prefix durable and halts the committer, which fails
// every command queued and writes nothing until it is resumed.
func TestCommitterHaltsOnAFailedGroup(t *testing.T) {
	hold := make(chan struct{})
	timeout := errors.New("timeout")
	l := &scriptLog{hold: hold, outcome: func(events []*plog.Event, errs []error) {
		for i, e := range events {
			if e.Offset == 3 {
				errs[i] = timeout
			}
		}
	}}
	d := &durableNext{}
	c := newCommitter(flowConfig{log: l, durable: d, maxGroup: DefaultMaxGroupEvents, timeout: time.Minute, logger: quiet(), metrics: nopMetrics{}})
	defer c.stop()

	x1 := queued(t, c, 1)
	require.Eventually(t, func() bool { return len(l.written()) == 1 }, 10*time.Second, time.Millisecond)
	x2, x3, x4 := queued(t, c, 2), queued(t, c, 3), queued(t, c, 4)
	close(hold)
	require.NoError(t, answered(t, x1))
	require.NoError(t, answered(t, x2))
	err3, err4 := answered(t, x3), answered(t, x4)
	require.ErrorIs(t, err3, ErrWrite)
	require.ErrorIs(t, err3, timeout)
	assert.Contains(t, err3.Error(), "outcome unknown: the event may be stored")
	requireOutcome(t, err3, Unknown, 3)
	require.ErrorIs(t, err4, ErrWrite)
	assert.Contains(t, err4.Error(), "outcome unknown: the event is stored, after one whose write failed")
	requireOutcome(t, err4, Unknown, 4) // the replay may stop before it
	assert.Equal(t, [][]isequencer.PLogOffset{{1}, {2, 3, 4}}, l.written())
	assert.Equal(t, isequencer.PLogOffset(3), d.get(), "durable: the stored prefix")

	o := c.failure()
	require.NotNil(t, o)
	assert.False(t, o.refused())
	assert.Equal(t, isequencer.PLogOffset(3), o.failedAt())

	err5 := answered(t, queued(t, c, 5))
	require.ErrorIs(t, err5, ErrWrite)
	require.ErrorIs(t, err5, timeout)
	assert.Contains(t, err5.Error(), "an earlier group failed")
	requireOutcome(t, err5, NotStored, 5)
	require.ErrorIs(t, err5, plog.ErrNotWritten)
	assert.Len(t, l.written(), 2, "halted: nothing written")

	l.mu.Lock()
	l.outcome = nil // the replay found offset 3 not written: written again
	l.mu.Unlock()
	c.resume()
	assert.Nil(t, c.failure())
	require.NoError(t, answered(t, queued(t, c, 3)), "resumed: writes again")
	assert.Equal(t, isequencer.PLogOffset(4), d.get())
}

// TestCommitterRefusalStops: a refused event stops the partition: the
// outcome says so, and every error wraps ErrStopped.
func TestCommitterRefusalStops(t *testing.T) {
	l := &scriptLog{outcome: func(_ []*plog.Event, errs []error) {
		errs[0] = plog.ErrFenced
	}}
	c := newCommitter(flowConfig{log: l, durable: &durableNext{}, maxGroup: DefaultMaxGroupEvents, timeout: time.Minute, logger: quiet(), metrics: nopMetrics{}})
	defer c.stop()
	err := answered(t, queued(t, c, 1))
	require.ErrorIs(t, err, ErrStopped)
	require.ErrorIs(t, err, plog.ErrFenced)
	require.NotNil(t, c.failure())
	assert.True(t, c.failure().refused())
	err = answered(t, queued(t, c, 2))
	require.ErrorIs(t, err, ErrStopped)
}

// TestCommitterOutcomesAfterAFailure: in one group, an event of unknown
// outcome, one plog did not send (plog.ErrNotWritten) and, later, a
// refused one. Each command is answered its own outcome, not-written ones
// as such; the refusal, though not the first failure, stops the
// partition, and the commands queued behind are not written.
func TestCommitterOutcomesAfterAFailure(t *testing.T) {
	hold := make(chan struct{})
	timeout := errors.New("timeout")
	l := &scriptLog{hold: hold, outcome: func(events []*plog.Event, errs []error) {
		for i, e := range events {
			switch e.Offset {
			case 3:
				errs[i] = timeout
			case 4:
				errs[i] = fmt.Errorf("%w: after offset 3 failed: %w", plog.ErrNotWritten, timeout)
			case 5:
				errs[i] = plog.ErrConflict
			}
		}
	}}
	c := newCommitter(flowConfig{log: l, durable: &durableNext{}, maxGroup: DefaultMaxGroupEvents, timeout: time.Minute, logger: quiet(), metrics: nopMetrics{}})
	defer c.stop()

	x1 := queued(t, c, 1)
	require.Eventually(t, func() bool { return len(l.written()) == 1 }, 10*time.Second, time.Millisecond)
	x2, x3, x4, x5 := queued(t, c, 2), queued(t, c, 3), queued(t, c, 4), queued(t, c, 5)
	close(hold)
	require.NoError(t, answered(t, x1))
	require.NoError(t, answered(t, x2))
	err3, err4, err5 := answered(t, x3), answered(t, x4), answered(t, x5)
	assert.Contains(t, err3.Error(), "outcome unknown")
	requireOutcome(t, err3, Unknown, 3)
	requireOutcome(t, err4, NotStored, 4)
	requireOutcome(t, err5, NotStored, 5) // refused
	require.ErrorIs(t, err4, ErrWrite)
	require.ErrorIs(t, err4, plog.ErrNotWritten)
	assert.Contains(t, err4.Error(), "(not written)")
	assert.NotContains(t, err4.Error(), "outcome unknown")
	require.ErrorIs(t, err5, ErrStopped)

	o := c.failure()
	require.NotNil(t, o)
	assert.True(t, o.refused(), "a refusal after the first failure stops the partition")
	require.ErrorIs(t, o.err(), ErrStopped)
	require.ErrorIs(t, o.err(), plog.ErrConflict)

	err6 := answered(t, queued(t, c, 6))
	require.ErrorIs(t, err6, plog.ErrNotWritten, "queued behind a failed group: never sent")
	require.ErrorIs(t, err6, ErrStopped)
}
