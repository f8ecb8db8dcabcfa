// Package apppart runs the command flow of one application partition: it
// owns the partition's sequencer and writes each command's event to the
// partition's event log at the offset the sequencer hands out.
//
//	Start (busy -> ErrBusy) -> Next... -> Flush -> queue the event
//	                              |          -> group write -> Durable -> acknowledge
//	                              |                  \-> failed -> the committer halts, failing the queued;
//	                              |                     the next Do stops the partition (refused) or
//	                              |                     Actualizes and resumes the committer
//	                              \-> Next failed -> Cancel (nothing written)
//
// Open wires a partition from a storage: seqstorage for the sequencer's
// state, a plog.Writer (or, fenced, a plog.FencedWriter) as the event log.
// Do hands each command to the partition's one command flow, in every mode
// and on every store (flow.go): the command takes its numbers under
// the partition's lock and queues its event; the committer writes the
// events of the commands in flight in groups (every event queued, up to
// OpenOptions.MaxGroupEvents; a group of one when one command is in
// flight), gives each command its own event's outcome and returns the
// group's outcome, on which the partition acts.
// takeover.go takes a partition over.
//
// Fencing: apppart holds the takeover and the command flow. In
// plog.ModeFenced, Open takes the partition over (a new epoch from
// vvmadapter, then plog.Sweep) and a committer writes groups of events
// through a plog.FencedWriter; the epoch and the number cells are
// vvmadapter's, the fence rows plog's. apppart reaches stored state only
// through seqstorage, vvmadapter and plog.
//
// Workspaces and partitions: a workspace's numbers are its stored numbers
// and those of the events its partition wrote after the last flush (the
// PLog tail a restart replays); no other partition reads that tail. So a
// workspace must be served by one partition for its whole life: moved to
// another partition while its old one has a tail, it would be given
// numbers it already had. apppart does not know the caller's mapping of
// workspaces to partitions; a caller whose mapping depends on a partition
// count records it with vvmadapter's ClaimPartitionCount before opening
// the partitions, which refuses another count (as cqlseq bench does).
package apppart

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
)

var (
	// ErrBusy: the partition is actualizing or has too many values waiting
	// to be flushed. Retry later; a server maps it to 503.
	ErrBusy = errors.New("apppart: partition busy")
	// ErrInvalidCommand wraps a command that was refused before it took
	// any number (WSID 0, unknown WSKind or SeqID).
	ErrInvalidCommand = errors.New("apppart: invalid command")
	// ErrWrite wraps a failed event write (in an EventError); the
	// partition actualizes before it writes again.
	ErrWrite = errors.New("apppart: event write failed")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("apppart: closed")
	// ErrInvalidOptions wraps every problem Open finds in its
	// options.
	ErrInvalidOptions = errors.New("apppart: invalid options")
	// ErrStopped: an event write found an event or a record already stored
	// under its key (plog.ErrConflict, trust levels 0 and 1), or, in fenced
	// mode, another owner fenced the partition off (plog.ErrFenced). The
	// partition takes no more commands; reopen it (after re-acquiring
	// ownership, when fenced).
	ErrStopped = errors.New("apppart: partition stopped")
	// ErrNotLeader: in fenced mode, the local lease deadline has passed;
	// the partition takes no command until it is reopened under a new lease.
	ErrNotLeader = errors.New("apppart: lease expired, not the partition's owner")
)

// Command asks for one number of each SeqID in Seqs (repeats allowed) in
// one workspace, and carries an opaque payload for the event.
type Command struct {
	WSKind  isequencer.WSKind
	WSID    isequencer.WSID
	Seqs    []isequencer.SeqID
	Payload []byte
}

// Result is what a command got: the offset of its event and its numbers, in
// the order of Command.Seqs.
type Result struct {
	Offset  isequencer.PLogOffset
	Numbers []isequencer.Number
}

// Partition runs the commands of one partition. Do is safe for concurrent
// use: commands take their offsets and numbers one at a time, under the
// partition's lock, and the committer writes the events of concurrent
// commands in groups (at most OpenOptions.MaxGroupEvents each).
type Partition struct {
	seqTypes map[isequencer.WSKind]map[isequencer.SeqID]isequencer.Number
	shape    eventShape
	logger   *slog.Logger
	mode     plog.Mode
	epoch    uint64           // the ownership epoch (Epoch reports it in fenced mode)
	deadline func() time.Time // the lease's local deadline; nil: none
	hooks    Hooks
	m        Metrics

	part   isequencer.PartitionID
	reader *plog.Reader // the PLog's reader (Settle)
	// pathStart is an offset the PLog's readers read: where the replay
	// began when the partition opened (Settle reads from it).
	pathStart isequencer.PLogOffset
	// records writes the record rows of an event Settle finds stored.
	records plog.RecordsWriter

	mu      sync.Mutex
	seq     *isequencer.Sequencer
	cleanup func()
	closed  bool
	stopped error // the refusal that stopped the partition

	flow *committer
}

// Do runs one command. On success the command's event is durable at
// Result.Offset. Once the command took an offset, every error is an
// *EventError (OutcomeOf reads it) saying whether the event is NotStored
// or of Unknown outcome, and Result holds the event's offset and numbers
// (the caller's only if the event is stored: see EventError): a write
// that failed wraps ErrWrite (with plog.ErrNotWritten when plog did not
// send the event; with ErrStopped and plog.ErrConflict or plog.ErrFenced
// when the store refused it, and then every later command fails with
// ErrStopped), ctx's end while the command waited for its group wraps
// ctx's error (Unknown), and Close while it was queued wraps ErrClosed
// (NotStored). Before an offset is taken (NoEvent, Result empty): ctx's
// error, ErrInvalidCommand (nothing taken), ErrBusy (retry later),
// ErrStopped, ErrNotLeader, ErrClosed, or a wrapped sequencer error
// (isequencer.ErrReadNumbers: the workspace's numbers could not be read,
// wrapping the storage error; ErrNumberOverflow), which ends the command
// before its event is written, without actualizing, so that a failed
// numbers read can be retried at once.
func (p *Partition) Do(ctx context.Context, cmd Command) (Result, error) {
	began := time.Now()
	res, err := p.do(ctx, cmd)
	p.m.Command(ResultOf(err), time.Since(began))
	return res, err
}

func (p *Partition) do(ctx context.Context, cmd Command) (Result, error) {
	if err := p.check(cmd); err != nil {
		return Result{}, err
	}
	// A command begun after the lease deadline is refused before it waits
	// for anything (its context, a numbers read): ErrNotLeader is its
	// answer, whatever happens to the context meanwhile. queueLocked
	// checks again, under p.mu, for the commands that pass here.
	if p.leaseExpired() {
		return Result{}, ErrNotLeader
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	if err := p.readAhead(ctx, cmd); err != nil {
		return Result{}, err
	}
	p.mu.Lock()
	x, nums, err := p.queueLocked(cmd)
	p.mu.Unlock()
	if err != nil {
		return Result{}, err
	}
	res := Result{Offset: x.ev.Offset, Numbers: nums}
	select {
	case <-x.done:
	case <-ctx.Done():
		select {
		case <-x.done: // answered meanwhile: its outcome is known
		default:
			return res, eventErr(Unknown, x.ev.Offset, "apppart: waiting for the event at PLog offset %d (it may still be stored): %w", x.ev.Offset, ctx.Err())
		}
	}
	return res, x.err
}

// queueLocked takes cmd's offset and numbers and queues its event for the
// committer.
func (p *Partition) queueLocked(cmd Command) (*pending, []isequencer.Number, error) {
	if p.closed {
		return nil, nil, ErrClosed
	}
	p.settleLocked()
	if p.stopped != nil {
		return nil, nil, p.stopped
	}
	if p.leaseExpired() {
		return nil, nil, ErrNotLeader
	}
	if p.hooks.AfterLeaseCheck != nil {
		p.hooks.AfterLeaseCheck()
	}
	off, ok := p.seq.Start(cmd.WSKind, cmd.WSID)
	if !ok {
		return nil, nil, ErrBusy
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
			return nil, nil, fmt.Errorf("apppart: WSID %d SeqID %d: %w", cmd.WSID, id, err)
		}
		nums = append(nums, n)
	}
	p.shape.fill(&x.ev, off, cmd, nums, cmd.Payload)
	p.seq.Flush()
	if err := p.flow.enqueue(x); err != nil {
		return nil, nil, err
	}
	return x, nums, nil
}

// settleLocked acts on a failed group write, which halted the committer
// (committer.failure): a refusal stops the partition; after any other
// failure the partition actualizes its sequencer (the replay decides
// which events are durable) and resumes the committer. The committer,
// halted, has no group write in flight, and p.mu is held, so no command
// is between Start and enqueue: Actualize is safe
// (isequencer.IGroupCommit's contract).
func (p *Partition) settleLocked() {
	o := p.flow.failure()
	if o == nil || p.stopped != nil {
		return
	}
	if o.refused() {
		p.stopped = stoppedBy(o.refusal())
		return
	}
	p.seq.Actualize()
	p.flow.resume()
}

// WaitReady returns nil once the partition takes commands: it is not
// actualizing (after Open, after a failed write) and its unflushed values
// are under their limit. It returns ctx's error if ctx ends first, and
// ErrClosed, ErrStopped or ErrNotLeader, at once, if the partition will
// never take a command again. It checks at growing intervals, from
// readyPollMin to readyPollMax. A Do right after it may still meet ErrBusy
// if a write fails in between.
func (p *Partition) WaitReady(ctx context.Context) error {
	return poll(ctx, func() (bool, error) {
		if err := p.ready(); !errors.Is(err, ErrBusy) {
			return true, err
		}
		return false, nil
	})
}

// poll calls check until it reports done or an error, at intervals
// growing from readyPollMin to readyPollMax, and returns check's error,
// or ctx's error if ctx ends first.
func poll(ctx context.Context, check func() (done bool, err error)) error {
	wait := readyPollMin
	var t *time.Timer
	for {
		if done, err := check(); done || err != nil {
			return err
		}
		if t == nil {
			t = time.NewTimer(wait)
			defer t.Stop()
		} else {
			t.Reset(wait)
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
		wait = min(2*wait, readyPollMax)
	}
}

// poll's intervals between checks.
const (
	readyPollMin = 100 * time.Microsecond
	readyPollMax = 20 * time.Millisecond
)

// ready is nil if a command would be taken now, ErrBusy if not yet, else
// why never: it acts on a failed group write as Do does.
func (p *Partition) ready() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	p.settleLocked()
	if p.stopped != nil {
		return p.stopped
	}
	if p.leaseExpired() {
		return ErrNotLeader
	}
	if !p.seq.Ready() {
		return ErrBusy
	}
	return nil
}

// leaseExpired reports whether the local lease deadline has passed.
func (p *Partition) leaseExpired() bool {
	if p.deadline == nil {
		return false
	}
	d := p.deadline()
	return d.IsZero() || !time.Now().Before(d)
}

// readAhead reads cmd's workspace numbers, if not cached, before the
// command takes p.mu (isequencer.IReadAhead): a cold workspace then costs
// its own command a read, not every command waiting for the lock. It
// returns ctx's error if ctx ends before the read does: the command has
// taken nothing, and the read goes on in its goroutine, bounded by the
// storage timeout and waited for by the sequencer's cleanup (a later
// command of the workspace finds its result).
func (p *Partition) readAhead(ctx context.Context, cmd Command) error {
	if len(cmd.Seqs) == 0 || p.seq.Cached(cmd.WSID) {
		return nil
	}
	if ctx.Done() == nil {
		p.seq.ReadAhead(cmd.WSKind, cmd.WSID)
		return nil
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		p.seq.ReadAhead(cmd.WSKind, cmd.WSID)
	}()
	select {
	case <-read:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *Partition) check(cmd Command) error {
	if cmd.WSID == 0 {
		return fmt.Errorf("%w: WSID 0", ErrInvalidCommand)
	}
	seqs, ok := p.seqTypes[cmd.WSKind]
	if !ok {
		return fmt.Errorf("%w: unknown WSKind %d", ErrInvalidCommand, cmd.WSKind)
	}
	for _, id := range cmd.Seqs {
		if _, ok := seqs[id]; !ok {
			return fmt.Errorf("%w: SeqID %d is not defined for WSKind %d: %w", ErrInvalidCommand, id, cmd.WSKind, isequencer.ErrUnknownSeqID)
		}
	}
	return nil
}

// closeGrace is how long Close waits for the partition's lock (a command
// taking its numbers) before it cancels the sequencer storage's calls in
// flight.
const closeGrace = 500 * time.Millisecond

// Close stops the committer, failing the commands queued with ErrClosed,
// then the sequencer. Values not yet flushed are recovered from the event
// log by the next Open. Close waits for a command taking its numbers; if
// that takes longer than closeGrace (a command waiting on a numbers read
// that does not return), it cancels the sequencer storage's calls in
// flight, which fails the command, rather than waiting out the storage
// timeout. It does not close the storages.
func (p *Partition) Close() error {
	// Do holds p.mu across a numbers read (a cache miss in Next).
	// Cancelling is safe at any time: a cancelled read fails its command,
	// and a cancelled write leaves values unflushed, which the next Open
	// replays from the event log, as for any value cleanup drops. Without
	// a stuck call the lock comes first and cleanup lets the last flush
	// finish.
	cancelStuck := time.AfterFunc(closeGrace, p.seq.CancelStorageCalls)
	p.flow.stop()
	p.mu.Lock()
	cancelStuck.Stop()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	p.cleanup()
	return nil
}
