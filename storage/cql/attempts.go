package cql

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocql/gocql"
)

// How a statement's attempts are made.
//
// Every call has an overall deadline, Options.Timeout (or the caller's
// earlier one), and each attempt its own timeout inside it: AttemptTimeout
// for reads and plain writes, LWTAttemptTimeout for conditional statements.
// A stalled attempt therefore leaves time for another host.
//
// Reads and plain writes are idempotent: a plain write carries one client
// timestamp per logical write (taken once from a per-process monotonic
// clock, shared by every retry and hedge), so a late duplicate of it is the
// same cell at the same timestamp, and a write of the same cells made after
// the call returned carries a higher timestamp and wins over it. They are
// retried on the next host after a timeout or an unavailable host, and
// hedged: one speculative attempt after the hedge delay.
//
// Conditional statements (LWT) are neither hedged nor retried (neverRetry):
// an unknown outcome is settled by a SERIAL re-read, which is an idempotent
// read and goes to a healthy host first.

// idempotentRetries bounds the retries of one idempotent statement.
const idempotentRetries = 2

// monotonicMicros issues the client timestamps of a Store's unversioned
// plain writes: microseconds since the epoch of its clock, strictly
// increasing within the Store even when the clock steps back.
type monotonicMicros struct {
	now  func() time.Time
	last atomic.Int64
}

// next returns max(now, the last timestamp issued + 1).
func (c *monotonicMicros) next() int64 {
	now := c.now().UnixMicro()
	for {
		last := c.last.Load()
		ts := max(now, last+1)
		if c.last.CompareAndSwap(last, ts) {
			return ts
		}
	}
}

// idempotentRetry is the retry policy of reads and plain writes: on a
// timeout, an unavailable coordinator, an overloaded or bootstrapping node
// or a broken connection, try the next host, at most idempotentRetries
// times and while the call's deadline lasts. Errors that another host would
// answer the same (syntax, authorization, invalid query) are returned.
type idempotentRetry struct{}

func (idempotentRetry) Attempt(q gocql.RetryableQuery) bool {
	return q.Attempts() <= idempotentRetries && q.Context().Err() == nil
}

func (idempotentRetry) GetRetryType(err error) gocql.RetryType {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return gocql.Rethrow
	}
	if unavailable(err) {
		return gocql.RetryNextHost
	}
	return gocql.Rethrow
}

// attemptKind tells a hand-out of a statement's plan apart.
type attemptKind int

const (
	attemptFirst attemptKind = iota
	attemptHedge             // an earlier attempt is still outstanding
	attemptRetry             // every earlier attempt has ended
)

// callTrack counts one call's attempts, to tell hedges from retries. It
// travels in the query's context, from the plan (hand-outs) to the observer
// (ends).
type callTrack struct {
	mu     sync.Mutex
	handed int
	done   int
}

type trackKey struct{}

func withTrack(ctx context.Context) context.Context {
	return context.WithValue(ctx, trackKey{}, &callTrack{})
}

func trackFrom(ctx context.Context) *callTrack {
	if ctx == nil {
		return nil
	}
	tr, _ := ctx.Value(trackKey{}).(*callTrack)
	return tr
}

func (t *callTrack) handOut() attemptKind {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.handed++
	switch {
	case t.handed == 1:
		return attemptFirst
	case t.done < t.handed-1:
		return attemptHedge
	}
	return attemptRetry
}

func (t *callTrack) ended() {
	t.mu.Lock()
	t.done++
	t.mu.Unlock()
}
