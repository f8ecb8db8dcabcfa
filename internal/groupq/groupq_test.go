package groupq

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestQueueTakesInOrder(t *testing.T) {
	q := New[int]()
	for i := range 5 {
		require.True(t, q.Put(i))
	}
	select {
	case <-q.Signal():
	default:
		t.Fatal("Put did not signal")
	}
	g, closed := q.Take(func(items []int) int { assert.Len(t, items, 5); return 2 })
	assert.Equal(t, []int{0, 1}, g)
	assert.False(t, closed)
	g, _ = q.Take(func([]int) int { return 100 })
	assert.Equal(t, []int{2, 3, 4}, g, "at most what is queued")
	require.True(t, q.Put(5))
	g, _ = q.Take(func([]int) int { return 0 })
	assert.Equal(t, []int{5}, g, "at least one")
	g, closed = q.Take(func([]int) int { t.Fatal("n called on an empty queue"); return 0 })
	assert.Nil(t, g)
	assert.False(t, closed)

	require.True(t, q.Put(6))
	q.Close()
	assert.False(t, q.Put(7), "closed")
	g, closed = q.Take(func([]int) int { return 1 })
	assert.Equal(t, []int{6}, g, "queued before Close stays")
	assert.False(t, closed)
	_, closed = q.Take(func([]int) int { return 1 })
	assert.True(t, closed, "closed and empty")
	require.True(t, New[int]().Put(1))
}

func TestQueueDrain(t *testing.T) {
	q := New[string]()
	q.Put("a")
	q.Put("b")
	assert.Equal(t, 2, q.Len())
	assert.Equal(t, []string{"a", "b"}, q.Drain())
	assert.Equal(t, 0, q.Len())
	assert.Empty(t, q.Drain())
}

// gather runs q.Gather(p, stop) and returns a channel closed when it
// returned.
func gather(q *Queue[int], p *Pacer, stop <-chan struct{}) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		q.Gather(p, stop)
	}()
	return done
}

// returned fails t unless done is closed within 30 s (the waits under test
// are an hour long: returning at all shows it did not wait them out).
func returned(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: Gather did not return", what)
	}
}

// notReturned fails t if done is closed within 50 ms.
func notReturned(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
		t.Fatalf("%s: Gather returned early", what)
	case <-time.After(50 * time.Millisecond):
	}
}

// pacer returns a Pacer that expects expect requests and waits up to an
// hour.
func pacer(expect int) *Pacer {
	return &Pacer{expect: expect, deadline: time.Now().Add(time.Hour)}
}

// TestGatherLoneWriterDoesNotWait: a commit that answered one request with
// none queued expects one back, and Gather returns as soon as it is there.
func TestGatherLoneWriterDoesNotWait(t *testing.T) {
	var p Pacer
	p.Committed(time.Now(), 1, 0)
	assert.Equal(t, 1, p.expect)
	p.deadline = time.Now().Add(time.Hour)
	q := New[int]()
	q.Put(1)
	returned(t, gather(q, &p, nil), "one expected, one queued")

	returned(t, gather(New[int](), pacer(3), nil), "empty queue: the committer waits on Signal instead")
}

// TestGatherWaitsForTheAnsweredWriters: after a commit of 2 with 1 queued,
// Gather waits until 3 are queued.
func TestGatherWaitsForTheAnsweredWriters(t *testing.T) {
	var p Pacer
	p.Committed(time.Now(), 2, 1)
	assert.Equal(t, 3, p.expect)
	p.deadline = time.Now().Add(time.Hour)
	q := New[int]()
	q.Put(1)
	done := gather(q, &p, nil)
	notReturned(t, done, "1 of 3")
	q.Put(2)
	notReturned(t, done, "2 of 3")
	q.Put(3)
	returned(t, done, "3 of 3")
}

// TestGatherReturnsOnAFullGroup: Gather waits for the writers it expects,
// but not once a whole group (Full) is queued.
func TestGatherReturnsOnAFullGroup(t *testing.T) {
	p := pacer(4)
	p.Full = 2
	q := New[int]()
	q.Put(1)
	done := gather(q, p, nil)
	notReturned(t, done, "1 of a group of 2")
	q.Put(2)
	returned(t, done, "a full group")
}

// TestCommittedDeadline: Gather waits at most half the commit's duration,
// and never more than DefaultMaxGather (or Max).
func TestCommittedDeadline(t *testing.T) {
	var p Pacer
	before := time.Now()
	p.Committed(before.Add(-4*time.Millisecond), 1, 0)
	assert.False(t, p.deadline.Before(before.Add(2*time.Millisecond)), "half of a 4 ms commit")
	assert.False(t, p.deadline.After(time.Now().Add(DefaultMaxGather)))
	p.Committed(time.Now().Add(-time.Hour), 1, 0)
	assert.False(t, p.deadline.After(time.Now().Add(DefaultMaxGather)), "a stalled commit: capped")
	p.Max = time.Millisecond
	p.Committed(time.Now().Add(-time.Hour), 1, 0)
	assert.False(t, p.deadline.After(time.Now().Add(time.Millisecond)), "capped by Max")
}

// comeBackLate commits 2 requests with p, then has them come back, the
// second after, and Gather wait for both: it returns their queue.
func comeBackLate(t *testing.T, p *Pacer, after time.Duration) *Queue[int] {
	t.Helper()
	p.Committed(time.Now(), 2, 0)
	p.deadline = time.Now().Add(time.Hour)
	q := New[int]()
	q.Put(1)
	done := gather(q, p, nil)
	time.Sleep(after)
	notReturned(t, done, "1 of 2 back")
	q.Put(2)
	returned(t, done, "both back")
	return q
}

// TestCommittedWithoutLearnIgnoresLateWriters: the zero Pacer waits half
// the commit however late its writers came back before (storage/boltdb's
// writers, partitions' committers and flushers, come back at once: a
// wait learned from one that paused would hold every later group back).
func TestCommittedWithoutLearnIgnoresLateWriters(t *testing.T) {
	var p Pacer
	comeBackLate(t, &p, 8*time.Millisecond)
	assert.Zero(t, p.back)
	now := time.Now()
	p.Committed(now, 2, 0) // a commit of ~0 s
	assert.Equal(t, now.Round(time.Millisecond), p.deadline.Round(time.Millisecond))
}

// TestCommittedLearnsWhenWritersComeBack: writers that came back 8 ms
// after a commit are waited for 1.5 times as long after the next one
// (capped by Max, or by the commit when it took longer), however short the
// commit; a deadline that passes
// before they all come back halves the estimate.
func TestCommittedLearnsWhenWritersComeBack(t *testing.T) {
	p := Pacer{Learn: true, Max: 15 * time.Millisecond}
	q := comeBackLate(t, &p, 8*time.Millisecond)
	assert.GreaterOrEqual(t, p.back, 8*time.Millisecond)
	back := p.back

	now := time.Now()
	p.Committed(now, 2, 0) // a commit of ~0 s
	assert.Equal(t, now.Add(min(back+back/2, p.Max)).Round(time.Millisecond), p.deadline.Round(time.Millisecond))
	before := time.Now()
	p.Committed(before.Add(-14*time.Millisecond), 2, 0)
	assert.False(t, p.deadline.Before(before.Add(14*time.Millisecond)), "a whole 14 ms commit, longer than 1.5 x back")

	before = time.Now()
	p.Committed(before.Add(-40*time.Millisecond), 2, 0)
	assert.False(t, p.deadline.Before(before.Add(40*time.Millisecond)), "a whole 40 ms commit, above Max: writers that come back within a commit are waited for")

	p.deadline = time.Now().Add(-time.Millisecond)
	q.Take(func([]int) int { return 2 })
	q.Put(3)
	returned(t, gather(q, &p, nil), "deadline passed with 1 of 2 back")
	assert.Equal(t, back/2, p.back)
}

func TestGatherEnds(t *testing.T) {
	t.Run("deadline", func(t *testing.T) {
		var p Pacer
		began := time.Now()
		p.Committed(began, 5, 0) // a commit of ~0 s: no wait at all
		q := New[int]()
		q.Put(1)
		returned(t, gather(q, &p, nil), "deadline passed")

		p = Pacer{expect: 5, deadline: time.Now().Add(100 * time.Millisecond)}
		start := time.Now()
		returned(t, gather(q, &p, nil), "deadline")
		assert.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond)
	})
	t.Run("stop", func(t *testing.T) {
		q := New[int]()
		q.Put(1)
		stop := make(chan struct{})
		done := gather(q, pacer(5), stop)
		notReturned(t, done, "before stop")
		close(stop)
		returned(t, done, "stop")
	})
	t.Run("close", func(t *testing.T) {
		q := New[int]()
		q.Put(1)
		done := gather(q, pacer(5), nil)
		notReturned(t, done, "before Close")
		q.Close()
		returned(t, done, "Close")
	})
}

// TestGatherWakesOnceAtItsTarget: Gather waits for its target (Put wakes
// it only then); once Gather returns, on its target or its deadline, a
// Put on an empty queue signals again, so that the committer sleeping on
// Signal is woken.
func TestGatherWakesOnceAtItsTarget(t *testing.T) {
	p := pacer(3)
	p.deadline = time.Now().Add(time.Hour)
	q := New[int]()
	q.Put(1)
	<-q.Signal() // the first Put, before Gather
	done := gather(q, p, nil)
	require.Eventually(t, func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.mu.want == 3
	}, 10*time.Second, time.Millisecond, "Gather waits for 3")
	q.Put(2)
	notReturned(t, done, "2 of 3")
	q.Put(3)
	returned(t, done, "3 of 3")

	q.Drain()
	q.Put(4)
	select {
	case <-q.Signal():
	default:
		t.Fatal("after Gather, a Put on an empty queue did not signal")
	}

	// A Gather that ends on its deadline resets the target too.
	p = pacer(5)
	p.deadline = time.Now().Add(20 * time.Millisecond)
	returned(t, gather(q, p, nil), "deadline")
	q.Drain()
	q.Put(5)
	select {
	case <-q.Signal():
	default:
		t.Fatal("after Gather's deadline, a Put on an empty queue did not signal")
	}
}
