package idservice

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// requestContext is what context.WithDeadline(parent, deadline) returns,
// except that its timer is made only when a caller first asks for Done: a
// request answered from memory (a value of the current chunk, a timeshard
// ID) never waits and costs no timer, which is about 5% of a request's
// CPU (docs/benchmarks.md, bench-service profiles). For every caller it
// behaves as the context WithDeadline returns:
//   - Deadline is the earlier of parent's and deadline;
//   - Err is context.DeadlineExceeded once deadline has passed, parent's
//     error once parent is done, context.Canceled after stop, whether or
//     not Done was asked for;
//   - Done is closed on the first of these;
//   - Value is parent's, and a context derived from it is cancelled with
//     it (Value finds the inner context's cancellation, so the context
//     package needs no goroutine to propagate it).
//
// The handler that made it calls stop once the request is answered.
type requestContext struct {
	parent   context.Context
	deadline time.Time
	mu       sync.Mutex // serialises making inner
	inner    atomic.Pointer[innerContext]
}

// innerContext is the context requestContext's Done and Err come from
// once made.
type innerContext struct {
	ctx    context.Context
	cancel context.CancelFunc
	// derived says ctx derives from parent (it carries parent's values
	// and cancellation); the context stop stores in place of a made one
	// does not.
	derived bool
}

// stoppedContext is the inner context of a requestContext stopped before
// anyone asked for its Done: done, context.Canceled.
var stoppedContext = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// stoppedInner is the innerContext of stoppedContext.
var stoppedInner = &innerContext{ctx: stoppedContext, cancel: func() {}}

// withRequestDeadline returns a requestContext of parent and deadline
// now+timeout, and the function that stops it.
func withRequestDeadline(parent context.Context, timeout time.Duration) (*requestContext, func()) {
	c := &requestContext{parent: parent, deadline: time.Now().Add(timeout)}
	return c, c.stop
}

// Deadline implements context.Context.
func (c *requestContext) Deadline() (time.Time, bool) {
	if d, ok := c.parent.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

// Done implements context.Context: it makes the timer on the first call.
func (c *requestContext) Done() <-chan struct{} {
	if in := c.inner.Load(); in != nil {
		return in.ctx.Done()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if in := c.inner.Load(); in != nil {
		return in.ctx.Done()
	}
	ctx, cancel := context.WithDeadline(c.parent, c.deadline)
	c.inner.Store(&innerContext{ctx: ctx, cancel: cancel, derived: true})
	return ctx.Done()
}

// Err implements context.Context.
func (c *requestContext) Err() error {
	if in := c.inner.Load(); in != nil {
		return in.ctx.Err()
	}
	if err := c.parent.Err(); err != nil {
		return err
	}
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// Value implements context.Context.
func (c *requestContext) Value(key any) any {
	if in := c.inner.Load(); in != nil && in.derived {
		return in.ctx.Value(key)
	}
	return c.parent.Value(key)
}

// stop ends the context (context.Canceled unless it was done already),
// stopping its timer if one was made.
func (c *requestContext) stop() {
	c.mu.Lock()
	in := c.inner.Load()
	if in == nil {
		if c.Err() != nil {
			// Done already: WithDeadline makes no timer, and its error is
			// the one Err reported.
			ctx, cancel := context.WithDeadline(c.parent, c.deadline)
			in = &innerContext{ctx: ctx, cancel: cancel, derived: true}
		} else {
			in = stoppedInner
		}
		c.inner.Store(in)
	}
	c.mu.Unlock()
	in.cancel()
}
