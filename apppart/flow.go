package apppart

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cqlseq/cqlseq/internal/groupq"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
)

// committer is a partition's command flow, in every mode: do takes a
// command's numbers under the partition's lock and queues its event; the
// committer's goroutine writes the queued events in groups: a group write
// (groupLog), then Durable on the sequencer, then the commands'
// acknowledgements. It
// owns one goroutine, started by Open and stopped (cancelled first, then
// waited for) by Close.
//
// It reports a failed group through failed, which the partition runs
// under its lock: it stops the partition when the failure says so, fails
// the commands queued after the group (failQueued) and actualizes the
// sequencer, the partition's only Actualize after Open, made while no
// group write is in flight (isequencer.IGroupCommit's contract).
type committer struct {
	log      groupLog
	failed   func(err error, first, last isequencer.PLogOffset, failQueued func(error)) error
	ep       uint64
	durable  isequencer.IGroupCommit
	maxGroup int
	timeout  time.Duration
	deadline func() time.Time // the lease's local deadline; nil: none
	hooks    Hooks

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	queue *groupq.Queue[*pending]

	// groups and grouped count written groups and their events, for
	// tests and the bench.
	stats struct {
		sync.Mutex
		groups, events int
	}
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

func newCommitter(log groupLog, failed func(error, isequencer.PLogOffset, isequencer.PLogOffset, func(error)) error, epoch uint64, durable isequencer.IGroupCommit, maxGroup int, timeout time.Duration, deadline func() time.Time, hooks Hooks) *committer {
	c := &committer{log: log, failed: failed, ep: epoch, durable: durable, maxGroup: maxGroup, timeout: timeout, deadline: deadline, hooks: hooks,
		done: make(chan struct{}), queue: groupq.New[*pending]()}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	go c.run()
	return c
}

// leaseExpired reports whether the local lease deadline has passed.
func (c *committer) leaseExpired() bool {
	if c.deadline == nil {
		return false
	}
	d := c.deadline()
	return d.IsZero() || !time.Now().Before(d)
}

// enqueue hands a flushed transaction's event to the committer. Called
// under the partition's lock, so events arrive in offset order.
func (c *committer) enqueue(x *pending) error {
	if !c.queue.Put(x) {
		return ErrClosed
	}
	return nil
}

// stop stops the goroutine and fails what is still queued with ErrClosed.
func (c *committer) stop() {
	c.queue.Close()
	c.cancel()
	<-c.done
	for _, x := range c.queue.Drain() {
		x.finish(ErrClosed)
	}
}

func (x *pending) finish(err error) {
	x.err = err
	close(x.done)
}

// run is the committer's goroutine. It paces itself as storage/boltdb's
// committer does (groupq.Pacer): after a group it waits for the commands
// it acknowledged to come back, so that closed-loop clients share a group
// instead of alternating. Clients read a cold workspace ahead before they
// queue, so it learns how long they take to come back (Learn), up to
// maxGather or the last commit's duration, whichever is longer.
func (c *committer) run() {
	defer close(c.done)
	pace := groupq.Pacer{Learn: true, Max: maxGather}
	for {
		c.queue.Gather(&pace, c.ctx.Done())
		group := c.take()
		if group == nil {
			select {
			case <-c.ctx.Done():
				return
			case <-c.queue.Signal():
			}
			continue
		}
		began := time.Now()
		c.write(group)
		pace.Committed(began, len(group), c.queue.Len())
	}
}

// take removes the next group from the queue: consecutive events of one
// PLog block, at most maxGroup of them.
func (c *committer) take() []*pending {
	group, _ := c.queue.Take(func(q []*pending) int {
		block := q[0].ev.Offset / plog.EventsPerPartition
		n := 1
		for n < len(q) && n < c.maxGroup && q[n].ev.Offset/plog.EventsPerPartition == block {
			n++
		}
		return n
	})
	return group
}

func (c *committer) write(group []*pending) {
	events := make([]*plog.Event, len(group))
	for i, x := range group {
		events[i] = &x.ev
	}
	first, last := group[0].ev.Offset, group[len(group)-1].ev.Offset
	if c.hooks.BeforeGroupWrite != nil {
		c.hooks.BeforeGroupWrite(first, last)
	}
	errs := make([]error, len(group))
	ctx, cancel := context.WithTimeout(c.ctx, c.timeout)
	c.log.writeGroup(ctx, events, errs)
	cancel()
	// stored: the durable prefix of the group.
	stored := slices.IndexFunc(errs, func(err error) bool { return err != nil })
	if stored < 0 {
		stored = len(group)
		if c.hooks.AfterGroupWrite != nil {
			c.hooks.AfterGroupWrite(first, last)
		}
	}
	if stored > 0 {
		c.durable.Durable(group[stored-1].ev.Offset + 1)
	}
	if stored == len(group) {
		c.count(len(group))
		for _, x := range group {
			x.finish(nil)
		}
		return
	}
	// Every command gets its own event's outcome. An event stored after
	// one whose outcome is unknown may lie beyond a gap that the replay
	// stops at: its outcome is unknown too.
	err := c.failed(errs[stored], group[stored].ev.Offset, last, c.failQueued)
	gap, ok := false, 0
	for i, x := range group {
		off, werr := x.ev.Offset, errs[i]
		switch {
		case werr == nil && !gap:
			ok++
			x.finish(nil)
		case werr == nil:
			x.finish(fmt.Errorf("%w at PLog offset %d (outcome unknown: the event is stored, after one whose write failed): %w", ErrWrite, off, err))
		case refused(werr):
			x.finish(fmt.Errorf("%w at PLog offset %d: %w: %w", ErrWrite, off, ErrStopped, werr))
		default:
			gap = true
			x.finish(fmt.Errorf("%w at PLog offset %d (outcome unknown: the event may be stored): %w", ErrWrite, off, werr))
		}
	}
	c.count(ok)
}

// maxGather caps the committer's wait for its clients after a commit
// shorter than it: about a numbers read ahead on a remote store.
const maxGather = 15 * time.Millisecond

// refused reports a write error that refused the event (and stops the
// partition).
func refused(err error) bool {
	return errors.Is(err, plog.ErrFenced) || errors.Is(err, plog.ErrConflict)
}

func (c *committer) count(events int) {
	if events == 0 {
		return
	}
	c.stats.Lock()
	c.stats.groups++
	c.stats.events += events
	c.stats.Unlock()
}

// failQueued fails every command queued after a failed group: their
// offsets follow the failed ones and their numbers are not used.
func (c *committer) failQueued(err error) {
	for _, x := range c.queue.Drain() {
		x.finish(fmt.Errorf("%w at PLog offset %d: an earlier group failed: %w", ErrWrite, x.ev.Offset, err))
	}
}

// groupFailed is the committer's failure report (committer.failed), run
// from its goroutine: err is the first failed event's (at offset first
// of the group ending at last). It stops the partition on a refusal,
// fails the commands queued behind the group and actualizes: the replay
// decides which events are durable. It returns the error behind the
// failures.
func (p *Partition) groupFailed(err error, first, last isequencer.PLogOffset, failQueued func(error)) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var werr error
	if refused(err) {
		if p.stopped == nil {
			p.stopped = fmt.Errorf("%w: %w", ErrStopped, err)
		}
		p.logger.Error("apppart: group write refused, partition stopped",
			"plog_offsets", fmt.Sprintf("%d-%d", first, last), "err", err)
		werr = fmt.Errorf("%w at PLog offsets %d-%d: %w", ErrWrite, first, last, p.stopped)
	} else {
		p.logger.Warn("apppart: group write failed, actualizing",
			"plog_offsets", fmt.Sprintf("%d-%d", first, last), "err", err)
		werr = fmt.Errorf("%w at PLog offsets %d-%d (outcome unknown: the events may be stored): %w", ErrWrite, first, last, err)
	}
	failQueued(werr)
	// No command is between Start and enqueue (they hold p.mu) and no
	// group is in flight (the committer's goroutine runs this): Actualize
	// is safe.
	if !p.closed {
		p.seq.Actualize()
	}
	return werr
}

// epoch returns the partition's ownership epoch in fenced mode (0 in the
// trust modes).
func (c *committer) epoch() uint64 { return c.ep }

// groupStats returns the number of groups written and their events.
func (c *committer) groupStats() (groups, events int) {
	c.stats.Lock()
	defer c.stats.Unlock()
	return c.stats.groups, c.stats.events
}

// do runs a command of a partition that writes in groups: the command
// takes its numbers under the partition's lock, queues its event and waits
// for its group.
func (c *committer) do(ctx context.Context, p *Partition, cmd Command) (Result, error) {
	p.readAhead(cmd)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return Result{}, ErrClosed
	}
	if p.stopped != nil {
		err := p.stopped
		p.mu.Unlock()
		return Result{}, err
	}
	if c.leaseExpired() {
		p.mu.Unlock()
		return Result{}, ErrNotLeader
	}
	if c.hooks.AfterLeaseCheck != nil {
		c.hooks.AfterLeaseCheck()
	}
	off, ok := p.seq.Start(cmd.WSKind, cmd.WSID)
	if !ok {
		p.mu.Unlock()
		return Result{}, ErrBusy
	}
	x := &pending{done: make(chan struct{})}
	nums := make([]isequencer.Number, 0, len(cmd.Seqs))
	for _, id := range cmd.Seqs {
		n, err := p.seq.Next(id)
		if err != nil {
			// No event: Cancel leaves no offset empty (the next command
			// gets this one) and needs no actualization; the numbers
			// taken so far are issued again.
			p.seq.Cancel()
			p.mu.Unlock()
			return Result{}, fmt.Errorf("apppart: WSID %d SeqID %d: %w", cmd.WSID, id, err)
		}
		nums = append(nums, n)
	}
	p.shape.fill(&x.ev, off, cmd, nums, cmd.Payload)
	p.seq.Flush()
	err := c.enqueue(x)
	p.mu.Unlock()
	if err != nil {
		return Result{}, err
	}
	select {
	case <-x.done:
	case <-ctx.Done():
		return Result{}, fmt.Errorf("apppart: waiting for the event at PLog offset %d (it may still be stored): %w", off, ctx.Err())
	}
	if x.err != nil {
		return Result{}, x.err
	}
	return Result{Offset: off, Numbers: nums}, nil
}
