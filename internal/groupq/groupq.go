// Package groupq owns the queue of a group committer: writers append
// requests, one committer goroutine takes them in groups, in arrival
// order, and paces itself so that closed-loop writers share commits.
// storage/boltdb's committer (one bbolt transaction per group) and
// apppart's (one event-log write per group) use it.
package groupq

import (
	"sync"
	"time"
)

// Queue is a FIFO of requests between writers and one committer. Safe for
// concurrent use.
type Queue[T any] struct {
	signal chan struct{} // capacity 1: the queue reached want or was closed
	mu     struct {
		sync.Mutex
		items  []T
		closed bool
		// want is how many queued requests make Put signal: Gather sets
		// it to the requests it waits for, so that a group's writers
		// coming back wake the committer once, not once each; 0 (as 1)
		// otherwise.
		want int
	}
}

// New returns an empty, open Queue.
func New[T any]() *Queue[T] {
	return &Queue[T]{signal: make(chan struct{}, 1)}
}

// Put appends x and wakes the committer if the queue holds as many
// requests as it waits for; false (x not queued) once the Queue is
// closed.
func (q *Queue[T]) Put(x T) bool {
	q.mu.Lock()
	if q.mu.closed {
		q.mu.Unlock()
		return false
	}
	q.mu.items = append(q.mu.items, x)
	wake := len(q.mu.items) >= q.mu.want
	q.mu.Unlock()
	if wake {
		q.wake()
	}
	return true
}

func (q *Queue[T]) wake() {
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

// Signal is sent on (at most one pending send) when the Queue grows
// (outside Gather) or is closed: the committer waits on it when Take found
// nothing.
func (q *Queue[T]) Signal() <-chan struct{} { return q.signal }

// Take removes the first n(items) requests, n called under the Queue's
// lock with the queued requests (at least one) and returning 1..len.
// It returns nil when the Queue is empty; closed reports that it is also
// closed.
func (q *Queue[T]) Take(n func(items []T) int) (group []T, closed bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	items := q.mu.items
	if len(items) == 0 {
		return nil, q.mu.closed
	}
	k := max(1, min(len(items), n(items)))
	group = items[:k:k]
	if q.mu.items = items[k:]; len(q.mu.items) == 0 {
		q.mu.items = nil
	}
	return group, false
}

// Close makes later Puts fail and wakes the committer. Queued requests
// stay for Take and Drain.
func (q *Queue[T]) Close() {
	q.mu.Lock()
	q.mu.closed = true
	q.mu.Unlock()
	q.wake()
}

// Drain removes and returns every queued request.
func (q *Queue[T]) Drain() []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	items := q.mu.items
	q.mu.items = nil
	return items
}

// Len returns the number of queued requests.
func (q *Queue[T]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.mu.items)
}

// Pacer decides how long the committer waits before it takes a group.
//
// Closed-loop writers (each waits for its request's answer before its
// next request) split into two cohorts when the committer takes a group as
// soon as it is free: the requests answered by a commit come back while
// the next commit runs with the requests that arrived during the last
// one, so the cohorts commit in turn and each request waits for two
// commits. After each commit the Pacer expects the requests it answered to
// come back, and Gather waits for them, but never longer than half the
// last commit's duration (with Learn, the whole commit's duration or 1.5
// times as long as they took to come back the last time they all did), and
// never longer than Max (with Learn, than Max or the last commit's
// duration, whichever is longer: a writer that misses a group waits for
// the whole next commit, so waiting for it as long costs no more). A
// lone writer's last group held its request alone and the queue was empty,
// so it is expected back alone: Gather returns as soon as it arrives, and
// a group never waits for writers that do not exist.
//
// The zero Pacer waits at most half the commit, up to DefaultMaxGather.
type Pacer struct {
	// Learn is for writers that do work of their own between requests
	// (such as a read ahead of their command) and so come back later than
	// half a commit: Gather waits up to a whole commit, or 1.5 times how
	// long they took the last time they all came back (halved each time
	// they do not), whichever is longer.
	Learn bool
	// Max caps Gather's wait (with Learn, when the last commit took
	// less); 0 is DefaultMaxGather.
	Max time.Duration
	// Full, if > 0, is the most requests the committer takes in one
	// group: Gather returns once that many are queued, since waiting
	// for more would only delay a full group.
	Full int

	expect   int           // requests expected in the queue
	deadline time.Time     // the latest end of the wait
	since    time.Time     // the end of the last commit (Learn)
	back     time.Duration // how long the expected requests took to come back, the last time they all did (Learn)
}

// DefaultMaxGather caps Gather's wait by default: a commit slowed down by
// a stall does not hold the next group back for half the stall.
const DefaultMaxGather = 5 * time.Millisecond

// Committed records a commit that began at began, answered answered
// requests and returned just now, with queued requests waiting. queued
// is the queue's length before the answers went out: a writer answered may
// queue its next request at once, and counted in queued too it would be
// expected twice, so that Gather waits out its deadline.
func (p *Pacer) Committed(began time.Time, answered, queued int) {
	now := time.Now()
	p.expect = answered + queued
	commit := now.Sub(began)
	wait := commit / 2
	limit := p.Max
	if limit <= 0 {
		limit = DefaultMaxGather
	}
	if p.Learn {
		// Writers that read before they come back take about a commit
		// (a read costs what a write does): wait that long at least.
		// Waiting half of it, they split into two cohorts that never all
		// come back in time, so that back is never learned.
		p.since = now
		wait = max(commit, p.back+p.back/2)
		// Writers that come back later than Max (a read ahead on a
		// remote store takes a round trip or more) but within a commit
		// would otherwise always miss the group and wait for the next
		// commit: waiting a commit for them costs no more.
		limit = max(limit, commit)
	}
	p.deadline = now.Add(min(wait, limit))
}

// Gather waits until q holds the requests p expects (or p.Full), p's
// deadline has passed, q is closed or empty (the committer then waits on
// Signal), or stop is closed.
func (q *Queue[T]) Gather(p *Pacer, stop <-chan struct{}) {
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
		q.mu.Lock()
		q.mu.want = 0
		q.mu.Unlock()
	}()
	target := p.expect
	if p.Full > 0 {
		target = min(target, p.Full)
	}
	for {
		q.mu.Lock()
		n, closed := len(q.mu.items), q.mu.closed
		q.mu.want = target // Put wakes Gather once the target is queued
		q.mu.Unlock()
		wait := time.Until(p.deadline)
		if p.Learn {
			if n >= p.expect && n > 0 && !p.since.IsZero() {
				p.back = time.Since(p.since)
			} else if wait <= 0 {
				p.back /= 2 // they did not all come back in time: expect less
			}
		}
		if n == 0 || n >= target || closed || wait <= 0 {
			return
		}
		if t == nil {
			t = time.NewTimer(wait)
		}
		select {
		case <-q.signal:
		case <-stop:
			return
		case <-t.C:
			return
		}
	}
}
