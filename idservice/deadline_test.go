package idservice

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type ctxKey struct{}

// closedWithin reports whether done is closed within d.
func closedWithin(done <-chan struct{}, d time.Duration) bool {
	select {
	case <-done:
		return true
	default:
	}
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// TestRequestContextEndsAtItsDeadline: Done closes at the deadline with
// DeadlineExceeded; Err says so once the deadline passed, whether or not
// Done was asked for; Deadline is the earlier of parent's and its own.
func TestRequestContextEndsAtItsDeadline(t *testing.T) {
	parent := context.WithValue(context.Background(), ctxKey{}, "v")
	ctx, stop := withRequestDeadline(parent, 50*time.Millisecond)
	defer stop()
	d, ok := ctx.Deadline()
	require.True(t, ok)
	assert.WithinDuration(t, time.Now().Add(50*time.Millisecond), d, 40*time.Millisecond)
	assert.Equal(t, "v", ctx.Value(ctxKey{}))
	assert.NoError(t, ctx.Err())
	require.True(t, closedWithin(ctx.Done(), 10*time.Second), "Done closes at the deadline")
	assert.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
	assert.Equal(t, "v", ctx.Value(ctxKey{}))

	// Never asked for Done: Err reads the clock.
	lazy, stopLazy := withRequestDeadline(context.Background(), time.Millisecond)
	time.Sleep(5 * time.Millisecond)
	assert.ErrorIs(t, lazy.Err(), context.DeadlineExceeded)
	stopLazy()
	assert.ErrorIs(t, lazy.Err(), context.DeadlineExceeded, "stop keeps the first error")
	assert.True(t, closedWithin(lazy.Done(), 0))

	early, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, stopC := withRequestDeadline(early, time.Hour)
	defer stopC()
	want, _ := early.Deadline()
	got, _ := c.Deadline()
	assert.Equal(t, want, got, "the parent's earlier deadline")
}

// TestRequestContextEndsWithItsParent: cancelling the parent ends it,
// with Done asked for before or after, and a context derived from it ends
// with it.
func TestRequestContextEndsWithItsParent(t *testing.T) {
	for _, doneFirst := range []bool{true, false} {
		parent, cancel := context.WithCancel(context.Background())
		ctx, stop := withRequestDeadline(parent, time.Hour)
		if doneFirst {
			_ = ctx.Done()
		}
		child, cancelChild := context.WithCancel(ctx)
		cancel()
		require.True(t, closedWithin(ctx.Done(), 10*time.Second))
		require.True(t, closedWithin(child.Done(), 10*time.Second))
		assert.ErrorIs(t, ctx.Err(), context.Canceled)
		cancelChild()
		stop()
	}
}

// TestRequestContextStopEndsIt: stop ends the context with Canceled,
// whether or not Done was asked for, and a context derived from it
// before or after.
func TestRequestContextStopEndsIt(t *testing.T) {
	for _, doneFirst := range []bool{true, false} {
		ctx, stop := withRequestDeadline(context.WithValue(context.Background(), ctxKey{}, "v"), time.Hour)
		before, cancelBefore := context.WithCancel(ctx)
		defer cancelBefore()
		if doneFirst {
			_ = ctx.Done()
		}
		stop()
		assert.ErrorIs(t, ctx.Err(), context.Canceled)
		assert.True(t, closedWithin(ctx.Done(), 0))
		assert.True(t, closedWithin(before.Done(), 10*time.Second), "derived before stop")
		after, cancelAfter := context.WithCancel(ctx)
		assert.True(t, closedWithin(after.Done(), 10*time.Second), "derived after stop")
		cancelAfter()
		assert.Equal(t, "v", ctx.Value(ctxKey{}), "values outlive stop")
		stop() // twice is harmless
	}
}

// TestRequestContextMakesNoTimerUnlessAskedFor: a request that never asks
// for Done allocates less than context.WithTimeout (no timer, no inner
// context), and a derived context needs no goroutine to follow it.
func TestRequestContextMakesNoTimerUnlessAskedFor(t *testing.T) {
	parent := context.Background()
	lazy := testing.AllocsPerRun(100, func() {
		ctx, stop := withRequestDeadline(parent, time.Second)
		_ = ctx.Err()
		stop()
	})
	eager := testing.AllocsPerRun(100, func() {
		ctx, cancel := context.WithTimeout(parent, time.Second)
		_ = ctx.Err()
		cancel()
	})
	assert.Less(t, lazy, eager)

	ctx, stop := withRequestDeadline(parent, time.Hour)
	before := runtime.NumGoroutine()
	child, cancel := context.WithCancel(ctx)
	assert.LessOrEqual(t, runtime.NumGoroutine(), before, "no goroutine to propagate cancellation")
	stop()
	require.True(t, closedWithin(child.Done(), 10*time.Second))
	cancel()
}
