package boltdb

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/cqlseq/cqlseq/internal/groupq"
	"github.com/cqlseq/cqlseq/storage"
)

// maxGroupWrites caps the writes one group commit carries.
const maxGroupWrites = 1024

// Group commit. Every write of the Store (Put, PutBatch, the conditional
// writes, Reclaim's deletes) is a request to the Store's committer
// goroutine, which runs every request waiting for it in one bbolt write
// transaction with one commit (one fsync unless Options.NoSync), then
// answers each with its own result. Writers that arrive during a commit
// share the next one; after a commit the committer waits briefly for the
// writers it answered (groupq.Pacer, see runCommitter), but a lone writer
// waits for no one.
//
// Each request keeps the semantics it had alone:
//   - a condition that does not hold (an existing row for
//     InsertIfNotExists, a different value for a compare-and-swap, ...) is
//     a result, not an error: it does not touch the transaction, and the
//     others in the group are written;
//   - a request that fails (an error from its function) has the
//     transaction rolled back; it gets its error, and the others are run
//     again, without it, in a new transaction. A request's function must
//     therefore reset its outputs each time it runs;
//   - a request is answered only after the group's commit returned: a nil
//     result means committed (and fsynced unless NoSync); a failed commit
//     fails every request of the group (conditional ones with
//     storage.ErrUnknownOutcome, as bbolt may have written part of it);
//   - a caller returns as soon as its context is done while its request
//     waits behind a slow commit: a request the committer has not yet
//     taken is abandoned, the caller gets the context's error and nothing
//     is written. A request already taken waits for its own group's commit
//     (its function may still read the caller's arguments and set its
//     results) and gets that commit's outcome; the committer drops a taken
//     request whose context is done before its group's transaction runs.
//
// Requests run in arrival order, so a request sees the writes of those
// before it in its group.
//
// bbolt's own DB.Batch was not used: it waits up to MaxBatchDelay (10 ms)
// for a batch to fill, so a lone writer pays that delay, and a failing
// function fails the batch before it is retried alone. BenchmarkGroupCommit
// compares the two (figures in docs/benchmarks.md).

// request is one write waiting for the committer.
type request struct {
	ctx         context.Context
	conditional bool
	fn          func(w *writer) error
	err         error
	done        chan struct{}
	// state moves once, from reqQueued to reqTaken (by the committer) or
	// to reqAbandoned (by a caller whose context ended first).
	state atomic.Int32
}

// request states.
const (
	reqQueued int32 = iota
	reqTaken
	reqAbandoned
)

// committer is the Store's group-commit goroutine and its queue.
type committer struct {
	queue  *groupq.Queue[*request]
	done   chan struct{} // closed when run returns
	before func(n int)   // called with each group's size; nil but in tests
	// commits and writes count committed transactions and the requests
	// they carried.
	commits, writes atomic.Uint64
}

func newCommitter(before func(n int)) *committer {
	return &committer{queue: groupq.New[*request](), before: before, done: make(chan struct{})}
}

// submit queues r; false once the committer is closed.
func (c *committer) submit(r *request) bool { return c.queue.Put(r) }

// take removes up to maxGroupWrites queued requests and marks them taken,
// leaving out those their callers abandoned: group is nil when the queue
// was empty, empty (not nil) when every request taken was abandoned.
// closed reports that the committer was closed and the queue is empty.
func (c *committer) take() (group []*request, closed bool) {
	group, closed = c.queue.Take(func([]*request) int { return maxGroupWrites })
	live := group[:0]
	for _, r := range group {
		if r.state.CompareAndSwap(reqQueued, reqTaken) {
			live = append(live, r)
		}
	}
	return live, closed
}

// close makes later submits fail and waits until run has answered every
// queued request and returned.
func (c *committer) close() {
	c.queue.Close()
	<-c.done
}

// runCommitter is the committer goroutine, owned by the Store: Close
// stops it (after the sweeper, the other writer) and waits for it. It
// paces itself with a groupq.Pacer: after a commit it waits (at most half
// the commit's duration) for the writers it answered to come back, so
// that closed-loop writers share one commit instead of alternating.
func (s *Store) runCommitter() {
	c := s.commit
	defer close(c.done)
	var pace groupq.Pacer
	for {
		c.queue.Gather(&pace, nil)
		group, closed := c.take()
		if closed {
			return
		}
		if group == nil {
			<-c.queue.Signal()
			continue
		}
		if len(group) == 0 {
			continue // every request taken was abandoned by its caller
		}
		if c.before != nil {
			c.before(len(group))
		}
		began := time.Now()
		s.commitGroup(group)
		pace.Committed(began, len(group), c.queue.Len())
	}
}

// GroupCommits returns how many write transactions the Store committed and
// how many writes they carried: writes/commits is the mean group size.
func (s *Store) GroupCommits() (commits, writes uint64) {
	return s.commit.commits.Load(), s.commit.writes.Load()
}

// update runs fn in a write transaction shared with the writes of other
// goroutines (see Group commit above) and returns fn's error or the
// commit's. A failed commit of a conditional write wraps
// storage.ErrUnknownOutcome: bbolt may have written part of it to the file
// before failing. When ctx ends while the write waits in the queue, update
// returns at once with ctx's error and nothing is written. When the
// committer has already taken it, its commit is under way and fn may still
// read the caller's arguments and set its results: update waits for that
// one commit (not for the queue) and reports its outcome.
func (s *Store) update(ctx context.Context, conditional bool, fn func(w *writer) error) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	r := &request{ctx: ctx, conditional: conditional, fn: fn, done: make(chan struct{})}
	if !s.commit.submit(r) {
		return s.ready(context.Background())
	}
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
	}
	if r.state.CompareAndSwap(reqQueued, reqAbandoned) {
		return fmt.Errorf("boltdb: %w", ctx.Err())
	}
	<-r.done
	return r.err
}

// commitGroup runs group in one transaction and answers every request.
func (s *Store) commitGroup(group []*request) {
	for len(group) > 0 {
		live := group[:0:0]
		for _, r := range group {
			if err := r.ctx.Err(); err != nil {
				r.finish(fmt.Errorf("boltdb: %w", err))
				continue
			}
			live = append(live, r)
		}
		if group = live; len(group) == 0 {
			return
		}
		tx, err := s.db.Begin(true)
		if err != nil {
			for _, r := range group {
				r.finish(s.txErr(err))
			}
			return
		}
		failed, err, panicked := s.runGroup(tx, group)
		if panicked != nil {
			for _, r := range group {
				r.finish(panicked)
			}
			return
		}
		if failed >= 0 {
			r := group[failed]
			r.finish(s.txErr(r.err))
			group = append(group[:failed:failed], group[failed+1:]...)
			continue
		}
		if err == nil {
			s.commit.commits.Add(1)
			s.commit.writes.Add(uint64(len(group)))
		}
		for _, r := range group {
			switch {
			case err == nil:
				r.finish(nil)
			case r.conditional && !errors.Is(err, berrors.ErrDatabaseNotOpen):
				r.finish(fmt.Errorf("boltdb: %s: commit failed: %w: %w", s.path, storage.ErrUnknownOutcome, err))
			default:
				r.finish(s.txErr(err))
			}
		}
		return
	}
}

// runGroup runs group's functions in tx and commits it. failed is the index
// of the first request whose function failed (its error in its err field;
// tx rolled back), else -1 and err is the commit's. A panic of bbolt (a
// damaged tree, in a function or in the commit's rebalance or spill) rolls
// tx back, which releases the write lock, and comes back as panicked,
// wrapping ErrCorruptFile.
func (s *Store) runGroup(tx *bolt.Tx, group []*request) (failed int, err, panicked error) {
	defer func() {
		if r := recover(); r != nil {
			_ = tx.Rollback()
			failed, err, panicked = -1, nil, corruptPanic(s.path, r)
		}
	}()
	w := &writer{rows: tx.Bucket(bucketRows), expiry: tx.Bucket(bucketExpiry), now: s.now().UnixNano()}
	for i, r := range group {
		if r.err = r.fn(w); r.err != nil {
			_ = tx.Rollback()
			return i, nil, nil
		}
	}
	return -1, tx.Commit(), nil
}

func (r *request) finish(err error) {
	r.err = err
	close(r.done)
}
