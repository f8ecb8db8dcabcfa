package electionstest

import (
	"sync"
	"time"

	"github.com/cqlseq/cqlseq/elections"
)

// FakeClock is an elections.Clock that moves only when told to. Timers due
// at or before the new time fire during Advance, in time order; AfterFunc
// functions run synchronously in the goroutine that calls Advance (or
// AfterFunc, when d <= 0).
type FakeClock struct {
	mu      sync.Mutex
	changed *sync.Cond // broadcast when a timer is added
	now     time.Time
	pending []*fakeTimer
}

var _ elections.Clock = (*FakeClock)(nil)

type fakeTimer struct {
	c    *FakeClock
	when time.Time
	ch   chan time.Time // nil for AfterFunc timers
	f    func()
}

// NewFakeClock returns a FakeClock reading start.
func NewFakeClock(start time.Time) *FakeClock {
	c := &FakeClock{now: start}
	c.changed = sync.NewCond(&c.mu)
	return c
}

// Now implements elections.Clock.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer implements elections.Clock.
func (c *FakeClock) NewTimer(d time.Duration) elections.Timer {
	t := &fakeTimer{c: c, ch: make(chan time.Time, 1)}
	c.mu.Lock()
	defer c.mu.Unlock()
	t.when = c.now.Add(d)
	if d <= 0 {
		t.ch <- c.now
		return t
	}
	c.pending = append(c.pending, t)
	c.changed.Broadcast()
	return t
}

// AfterFunc implements elections.Clock.
func (c *FakeClock) AfterFunc(d time.Duration, f func()) elections.Timer {
	t := &fakeTimer{c: c, f: f}
	c.mu.Lock()
	t.when = c.now.Add(d)
	if d <= 0 {
		c.mu.Unlock()
		f()
		return t
	}
	c.pending = append(c.pending, t)
	c.changed.Broadcast()
	c.mu.Unlock()
	return t
}

// Advance moves the clock d forward, firing the timers that fall due.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	target := c.now.Add(d)
	for {
		i := c.nextDueLocked(target)
		if i < 0 {
			c.now = target
			c.mu.Unlock()
			return
		}
		t := c.pending[i]
		c.pending = append(c.pending[:i], c.pending[i+1:]...)
		if t.when.After(c.now) {
			c.now = t.when
		}
		if t.ch != nil {
			t.ch <- c.now
			continue
		}
		c.mu.Unlock()
		t.f()
		c.mu.Lock()
	}
}

// nextDueLocked returns the index of the earliest pending timer due by
// target, or -1.
func (c *FakeClock) nextDueLocked(target time.Time) int {
	best := -1
	for i, t := range c.pending {
		if !t.when.After(target) && (best < 0 || t.when.Before(c.pending[best].when)) {
			best = i
		}
	}
	return best
}

// WaitForTimers blocks until at least n channel timers (NewTimer, not
// AfterFunc) are pending: the goroutines that wait on them are parked.
func (c *FakeClock) WaitForTimers(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.channelTimersLocked() < n {
		c.changed.Wait()
	}
}

func (c *FakeClock) channelTimersLocked() int {
	n := 0
	for _, t := range c.pending {
		if t.ch != nil {
			n++
		}
	}
	return n
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	for i, p := range t.c.pending {
		if p == t {
			t.c.pending = append(t.c.pending[:i], t.c.pending[i+1:]...)
			return true
		}
	}
	return false
}
