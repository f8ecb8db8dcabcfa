package apppart

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/cqlseq/cqlseq/internal/groupq"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
)

// DefaultMaxGroupEvents is OpenOptions.MaxGroupEvents's default: the
// events of one group write are at most one PLog block's
// (plog.EventsPerPartition), which also bounds the memory of a group
// (its events and their commands) to a block's events. plog splits a group
// into chunks by the store's limits.
const DefaultMaxGroupEvents = plog.EventsPerPartition

// DefaultFlushAfterEvents is OpenOptions.Sequencer.FlushAfterEvents's
// default: a workspace's numbers are stored once per window of up to 4,096
// durable events (sooner at a quarter of MaxNumUnflushedValues), one row
// per workspace however many of the window's commands it had, and a
// restart replays at most about that many events (well under 0.1 s from
// one node: docs/benchmarks.md, recovery). The PLog is the truth; the
// stored numbers only bound the replay.
const DefaultFlushAfterEvents = 4096

// committer is a partition's command flow after the numbers: the partition
// queues each command's event (enqueue, under its lock, so in offset
// order), and the committer's goroutine writes the queued events in
// groups: a group write (groupLog), then Durable on the sequencer for the
// group's stored prefix, then each command's answer. It owns one
// goroutine, started by newCommitter and stopped (cancelled first, then
// waited for) by stop.
//
// The committer knows nothing of the partition: it never waits for the
// partition's lock. A group that is not wholly stored halts it (failure
// returns the group's outcome): events queued behind the group follow
// offsets that failed, so the committer fails every command queued while
// it is halted, and writes nothing until its owner calls resume. A halted
// committer has no group write in flight; that is when the partition
// actualizes its sequencer, holding its lock, so that no command is
// between Start and enqueue either, then resumes it (or, on a refusal,
// stays halted: the partition stops).
type committer struct {
	cfg flowConfig

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	queue *groupq.Queue[*pending]

	mu struct {
		sync.Mutex
		// halted is the outcome of the group that halted the committer;
		// nil while it writes.
		halted *groupOutcome
	}

	// groups and events count written groups and their stored events,
	// for tests and the bench; starts holds the first offsets of the
	// last len(starts) groups written (Settle reads the PLog from one).
	stats struct {
		sync.Mutex
		groups, events int
		starts         [groupStarts]isequencer.PLogOffset
		nstarts        uint64
	}
}

// groupStarts is how many groups' first offsets the committer keeps.
const groupStarts = 1024

// flowConfig is what a committer needs.
type flowConfig struct {
	// log writes a group.
	log groupLog
	// durable is told the next offset after each group's stored prefix.
	durable isequencer.IGroupCommit
	// maxGroup caps the events of one group (>= 1).
	maxGroup int
	// timeout bounds one group write.
	timeout time.Duration
	// hooks: BeforeGroupWrite and AfterGroupWrite.
	hooks Hooks
	// logger receives failed group writes.
	logger *slog.Logger
	// metrics is told each durable offset and the stop. nil: none.
	metrics Metrics
	// rewriteUnknown: an event write of unknown outcome is sent again, the
	// same bytes, until it is stored or the committer stops (trust2; see
	// rewrite).
	rewriteUnknown bool
}

// Hooks are called at the points of the fenced command flow where a pause
// is most dangerous. They exist for tests (which pause an owner there while
// another takes over); nil funcs are skipped. Production code leaves them
// nil.
type Hooks struct {
	// AfterLeaseCheck runs in Do right after the lease check passed,
	// under the partition's lock.
	AfterLeaseCheck func()
	// BeforeGroupWrite runs in the committer before a group write.
	BeforeGroupWrite func(first, last isequencer.PLogOffset)
	// AfterGroupWrite runs in the committer after a group write succeeded,
	// before Durable and the acknowledgements.
	AfterGroupWrite func(first, last isequencer.PLogOffset)
}

// pending is one command waiting for its group.
type pending struct {
	ev   plog.Event
	err  error
	done chan struct{}
}

func (x *pending) finish(err error) {
	x.err = err
	close(x.done)
}

// groupOutcome is what the write of one group did, event by event.
type groupOutcome struct {
	// first and last are the group's offsets.
	first, last isequencer.PLogOffset
	// errs[i] is event i's outcome, as groupLog reports it: nil stored,
	// refused (plog.ErrConflict, plog.ErrFenced), not written
	// (plog.ErrNotWritten), else unknown.
	errs []error
}

// stored is the length of the group's stored prefix: errs[:stored] are
// nil, and events from the first failed one on are not durable.
func (o *groupOutcome) stored() int {
	if i := slices.IndexFunc(o.errs, func(err error) bool { return err != nil }); i >= 0 {
		return i
	}
	return len(o.errs)
}

// ok reports that every event of the group is stored.
func (o *groupOutcome) ok() bool { return o.stored() == len(o.errs) }

// cause is the first failed event's error (nil if ok).
func (o *groupOutcome) cause() error {
	if o.ok() {
		return nil
	}
	return o.errs[o.stored()]
}

// failedAt is the first failed event's offset.
func (o *groupOutcome) failedAt() isequencer.PLogOffset {
	return o.first + isequencer.PLogOffset(o.stored())
}

// refusal is the first refused event's error, nil if none was refused.
// A refusal anywhere in the group stops the partition, even after an
// event of unknown outcome.
func (o *groupOutcome) refusal() error {
	if i := slices.IndexFunc(o.errs, refused); i >= 0 {
		return o.errs[i]
	}
	return nil
}

// refused reports that an event of the group was refused: the partition
// stops.
func (o *groupOutcome) refused() bool { return o.refusal() != nil }

// err is the error behind the failures of a failed group's commands and
// of the commands queued behind it.
func (o *groupOutcome) err() error {
	first, last, cause := o.failedAt(), o.last, o.cause()
	if r := o.refusal(); r != nil {
		return fmt.Errorf("%w at PLog offsets %d-%d: %w", ErrWrite, first, last, stoppedBy(r))
	}
	return fmt.Errorf("%w at PLog offsets %d-%d (outcome unknown: the events may be stored): %w", ErrWrite, first, last, cause)
}

// stoppedBy is the error of a partition stopped by the refusal err.
func stoppedBy(err error) error { return fmt.Errorf("%w: %w", ErrStopped, err) }

// refused reports a write error that refused the event (and stops the
// partition).
func refused(err error) bool {
	return errors.Is(err, plog.ErrFenced) || errors.Is(err, plog.ErrConflict)
}

// newCommitter starts a committer; every field of cfg is set (Open's
// OpenOptions.EnsureDefaults gives metrics their nop default).
func newCommitter(cfg flowConfig) *committer {
	c := &committer{cfg: cfg, done: make(chan struct{}), queue: groupq.New[*pending]()}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	go c.run()
	return c
}

// enqueue hands a flushed transaction's event to the committer. The caller
// serialises its calls in offset order.
func (c *committer) enqueue(x *pending) error {
	if !c.queue.Put(x) {
		return ErrClosed
	}
	return nil
}

// failure returns the outcome of the group that halted the committer, or
// nil while it writes.
func (c *committer) failure() *groupOutcome {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.halted
}

// resume makes a halted committer write again, after it failed every
// command queued so far (their offsets follow the failed group's). The
// caller enqueues nothing concurrently.
func (c *committer) resume() {
	c.failHalted()
	c.mu.Lock()
	c.mu.halted = nil
	c.mu.Unlock()
}

// stop stops the goroutine and fails what is still queued with ErrClosed.
func (c *committer) stop() {
	c.queue.Close()
	c.cancel()
	<-c.done
	for _, x := range c.queue.Drain() {
		x.finish(eventErr(NotStored, x.ev.Offset, "%w: the event at PLog offset %d was not written: %w", ErrClosed, x.ev.Offset, plog.ErrNotWritten))
	}
}

// run is the committer's goroutine. It paces itself as storage/boltdb's
// committer does (groupq.Pacer): after a group it waits for the commands
// it acknowledged to come back, so that closed-loop clients share a group
// instead of alternating, but never once a whole group is queued. Clients
// read a cold workspace ahead before they queue, so it learns how long
// they take to come back (Learn), up to maxGather or the last commit's
// duration, whichever is longer.
func (c *committer) run() {
	defer close(c.done)
	pace := groupq.Pacer{Learn: true, Max: maxGather, Full: c.cfg.maxGroup}
	for {
		if c.failHalted() {
			if !c.sleep() {
				return
			}
			continue
		}
		c.queue.Gather(&pace, c.ctx.Done())
		group := c.take()
		if group == nil {
			if !c.sleep() {
				return
			}
			continue
		}
		began := time.Now()
		o := c.write(group)
		if c.cfg.rewriteUnknown {
			o = c.rewrite(group, o)
		}
		// Counted before the answers: a command answered may queue
		// again at once, and would be expected twice.
		queued := c.queue.Len()
		if !o.ok() {
			c.halt(o)
		}
		c.answer(group, o)
		pace.Committed(began, len(group), queued)
	}
}

// sleep waits until the queue grows; false once the committer is stopped.
func (c *committer) sleep() bool {
	select {
	case <-c.ctx.Done():
		return false
	case <-c.queue.Signal():
		return true
	}
}

// halt stops the committer at the failed group o and fails the commands
// queued behind it.
func (c *committer) halt(o *groupOutcome) {
	if r := o.refusal(); r != nil {
		c.cfg.logger.Error("apppart: group write refused, partition stopped",
			"plog_offsets", fmt.Sprintf("%d-%d", o.failedAt(), o.last), "err", r)
		c.cfg.metrics.Stopped(stopReason(r))
	} else {
		c.cfg.logger.Warn("apppart: group write failed, actualizing",
			"plog_offsets", fmt.Sprintf("%d-%d", o.failedAt(), o.last), "err", o.cause())
	}
	c.mu.Lock()
	c.mu.halted = o
	c.mu.Unlock()
	c.failHalted()
}

// failHalted fails every queued command if the committer is halted, and
// reports whether it is.
func (c *committer) failHalted() bool {
	c.mu.Lock()
	o := c.mu.halted
	var queued []*pending
	if o != nil {
		queued = c.queue.Drain()
	}
	c.mu.Unlock()
	if o == nil {
		return false
	}
	failBehind(queued, o.err())
	return true
}

// failBehind fails the commands queued behind a failed group: their
// offsets follow the failed ones and their events were never sent
// (NotStored, plog.ErrNotWritten).
func failBehind(queued []*pending, err error) {
	for _, x := range queued {
		x.finish(eventErr(NotStored, x.ev.Offset, "%w at PLog offset %d: %w: an earlier group failed: %w", ErrWrite, x.ev.Offset, plog.ErrNotWritten, err))
	}
}

// take removes the next group from the queue: consecutive events of one
// PLog block, at most maxGroup of them; a void gap marker (Settle's claim)
// alone.
func (c *committer) take() []*pending {
	group, _ := c.queue.Take(func(q []*pending) int {
		if q[0].ev.Void {
			return 1 // a claim is written alone
		}
		block := q[0].ev.Offset / plog.EventsPerPartition
		n := 1
		for n < len(q) && n < c.cfg.maxGroup && q[n].ev.Offset/plog.EventsPerPartition == block && !q[n].ev.Void {
			n++
		}
		return n
	})
	return group
}

// write writes group, reports its stored prefix durable and returns its
// outcome.
func (c *committer) write(group []*pending) *groupOutcome {
	events := make([]*plog.Event, len(group))
	for i, x := range group {
		events[i] = &x.ev
	}
	o := &groupOutcome{first: group[0].ev.Offset, last: group[len(group)-1].ev.Offset, errs: make([]error, len(group))}
	c.stats.Lock()
	c.stats.starts[c.stats.nstarts%groupStarts] = o.first
	c.stats.nstarts++
	c.stats.Unlock()
	if c.cfg.hooks.BeforeGroupWrite != nil {
		c.cfg.hooks.BeforeGroupWrite(o.first, o.last)
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.timeout)
	c.cfg.log.writeGroup(ctx, events, o.errs)
	cancel()
	stored := o.stored()
	if stored == len(group) && c.cfg.hooks.AfterGroupWrite != nil {
		c.cfg.hooks.AfterGroupWrite(o.first, o.last)
	}
	if stored > 0 {
		next := group[stored-1].ev.NextOffset() // past a claim's gap
		c.cfg.durable.Durable(next)
		c.cfg.metrics.Durable(next)
	}
	return o
}

// rewrite sends the events of group that o does not report stored again,
// the same bytes, backing off from rewriteFirstDelay to rewriteMaxDelay,
// until every one is stored, a write is refused, or the committer stops;
// it returns the group's outcome so far. trust2 writes events with
// versioned puts, which may land late and replace a row of a lower
// version: an owner that wrote other bytes at an offset whose write is in
// doubt could see its own late write replace them after a reader read
// them (docs/design.md "Late writes"). So a trust2 owner never writes
// other bytes there; its commands wait (or their ctx ends: Unknown), and
// the partition needs no actualization.
func (c *committer) rewrite(group []*pending, o *groupOutcome) *groupOutcome {
	delay := rewriteFirstDelay
	for attempt := 1; !o.ok() && !o.refused(); attempt++ {
		if attempt == 1 {
			c.cfg.logger.Warn("apppart: group write failed, writing it again",
				"plog_offsets", fmt.Sprintf("%d-%d", o.failedAt(), o.last), "err", o.cause())
		}
		t := time.NewTimer(delay)
		select {
		case <-c.ctx.Done():
			t.Stop()
			return o
		case <-t.C:
		}
		delay = min(2*delay, rewriteMaxDelay)
		n := o.stored()
		r := c.write(group[n:])
		copy(o.errs[n:], r.errs)
	}
	return o
}

// rewrite's back-off between attempts.
const (
	rewriteFirstDelay = 5 * time.Millisecond
	rewriteMaxDelay   = time.Second
)

// answer gives every command of group its own event's outcome. An event
// stored after one whose outcome is unknown may lie beyond a gap that the
// replay stops at: its outcome is unknown too. A trust-0 event whose
// records were refused (plog.ErrRecordConflict) is stored: it is answered
// Stored, with the refusal that stops the partition as its error. An
// event stored after a refused one (a record conflict fails its own event
// only) is answered stored: nothing after it is written (the partition
// stops) and the next owner's replay reads it. An event plog did not send
// (plog.ErrNotWritten) is answered not written.
func (c *committer) answer(group []*pending, o *groupOutcome) {
	if o.ok() {
		c.count(len(group))
		for _, x := range group {
			x.finish(nil)
		}
		return
	}
	err := o.err()
	gap, ok := false, 0
	for i, x := range group {
		off, werr := x.ev.Offset, o.errs[i]
		switch {
		case werr == nil && !gap:
			ok++
			x.finish(nil)
		case werr == nil:
			x.finish(eventErr(Unknown, off, "%w at PLog offset %d (outcome unknown: the event is stored, after one whose write failed): %w", ErrWrite, off, err))
		case errors.Is(werr, plog.ErrRecordConflict) && !gap:
			// The event is stored and will be read; its records were
			// refused.
			x.finish(eventErr(Stored, off, "%w at PLog offset %d (the event is stored, its records refused): %w: %w", ErrWrite, off, ErrStopped, werr))
		case errors.Is(werr, plog.ErrRecordConflict):
			x.finish(eventErr(Unknown, off, "%w at PLog offset %d (the event is stored, its records refused, after one whose write failed): %w: %w", ErrWrite, off, ErrStopped, werr))
		case refused(werr):
			x.finish(eventErr(NotStored, off, "%w at PLog offset %d: %w: %w", ErrWrite, off, ErrStopped, werr))
		case errors.Is(werr, plog.ErrNotWritten):
			gap = true
			x.finish(eventErr(NotStored, off, "%w at PLog offset %d (not written): %w", ErrWrite, off, werr))
		default:
			gap = true
			x.finish(eventErr(Unknown, off, "%w at PLog offset %d (outcome unknown: the event may be stored): %w", ErrWrite, off, werr))
		}
	}
	c.count(ok)
}

// maxGather caps the committer's wait for its clients after a commit
// shorter than it: about a numbers read ahead on a remote store.
const maxGather = 15 * time.Millisecond

func (c *committer) count(events int) {
	if events == 0 {
		return
	}
	c.stats.Lock()
	c.stats.groups++
	c.stats.events += events
	c.stats.Unlock()
}

// groupStartAtOrBelow returns the largest first offset at most off of the
// groups the committer wrote lately: an offset the PLog's readers read
// (every offset before a group's first is durable when it is written, and
// gap markers lie at or after it).
func (c *committer) groupStartAtOrBelow(off isequencer.PLogOffset) (isequencer.PLogOffset, bool) {
	c.stats.Lock()
	defer c.stats.Unlock()
	var best isequencer.PLogOffset
	for i := range min(c.stats.nstarts, groupStarts) {
		if s := c.stats.starts[i]; s <= off && s > best {
			best = s
		}
	}
	return best, best > 0
}

// groupStats returns the number of groups written and their events.
func (c *committer) groupStats() (groups, events int) {
	c.stats.Lock()
	defer c.stats.Unlock()
	return c.stats.groups, c.stats.events
}
