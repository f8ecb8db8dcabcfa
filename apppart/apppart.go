// Package apppart runs the command flow of one application partition: it
// owns the partition's sequencer and writes each command's event to the
// partition's event log at the offset the sequencer hands out.
//
//	Start (busy -> ErrBusy) -> Next... -> write the event -> Flush
//	                                   \-> write failed  -> Actualize
//
// Open wires a partition from a storage: seqstorage for the sequencer's
// state, a plog.Writer as the event log. A partition opened in fenced mode, or with
// OpenOptions.GroupWrites, writes the events of the commands in flight in
// groups instead (the committer, groupflow.go; takeover.go takes a fenced
// partition over): each command still gets its own event's outcome.
//
// Fencing: apppart holds the takeover and the group flow. In
// plog.ModeFenced, Open takes the partition over (a new epoch from
// vvmadapter, then plog.Sweep) and a committer writes groups of events
// through a plog.FencedWriter; the epoch and the number cells are
// vvmadapter's, the fence rows plog's. apppart reaches stored state only
// through seqstorage, vvmadapter and plog.
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
	"github.com/cqlseq/cqlseq/seqstorage"
)

var (
	// ErrBusy: the partition is actualizing or has too many values waiting
	// to be flushed. Retry later; a server maps it to 503.
	ErrBusy = errors.New("apppart: partition busy")
	// ErrInvalidCommand wraps a command that was refused before it took
	// any number (WSID 0, unknown WSKind or SeqID).
	ErrInvalidCommand = errors.New("apppart: invalid command")
	// ErrWrite wraps a failed event write; the partition actualizes and the
	// numbers of the command are not used.
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

// Partition serialises the commands of one partition. Do is safe for
// concurrent use; commands run one at a time.
type Partition struct {
	seqTypes     map[isequencer.WSKind]map[isequencer.SeqID]isequencer.Number
	shape        eventShape
	writeTimeout time.Duration
	logger       *slog.Logger

	mu      sync.Mutex
	seq     isequencer.ISequencer
	cleanup func()
	closed  bool
	stopped error // the conflict that stopped the partition
	ev      plog.Event

	ss    *seqstorage.Storage
	w     *plog.Writer // the trust modes without GroupWrites only
	group *committer   // fenced mode and OpenOptions.GroupWrites only
}

// Do runs one command. On success the command's event is durable at
// Result.Offset. Errors: ErrInvalidCommand (nothing taken), ErrBusy (retry
// later), ErrWrite (the event was not written, or its write's outcome is
// unknown: its numbers are not used again either way), ErrStopped (with
// plog.ErrConflict: at the write that found the conflict, wrapped in
// ErrWrite too, and for every later command), a wrapped sequencer error
// (ErrUnknownSeqID, ErrNumberOverflow, storage), ErrClosed, or ctx's error.
func (p *Partition) Do(ctx context.Context, cmd Command) (Result, error) {
	if err := p.check(cmd); err != nil {
		return Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	if p.group != nil {
		return p.doGroup(ctx, cmd)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return Result{}, ErrClosed
	}
	if p.stopped != nil {
		return Result{}, p.stopped
	}
	off, ok := p.seq.Start(cmd.WSKind, cmd.WSID)
	if !ok {
		return Result{}, ErrBusy
	}
	nums := make([]isequencer.Number, 0, len(cmd.Seqs))
	for _, id := range cmd.Seqs {
		n, err := p.seq.Next(id)
		if err != nil {
			// The transaction took numbers that no event will carry:
			// cancel it and rebuild from storage.
			p.seq.Actualize()
			return Result{}, fmt.Errorf("apppart: WSID %d SeqID %d: %w", cmd.WSID, id, err)
		}
		nums = append(nums, n)
	}
	p.shape.fill(&p.ev, off, cmd, nums, cmd.Payload)
	wctx, cancel := context.WithTimeout(ctx, p.writeTimeout)
	err := p.w.Write(wctx, &p.ev)
	cancel()
	if err != nil {
		// The event may or may not be stored: actualization re-reads the
		// PLog from the last flushed offset, so its numbers are used again
		// only if it is not.
		p.seq.Actualize()
		if errors.Is(err, plog.ErrConflict) {
			p.stopped = fmt.Errorf("%w: %w", ErrStopped, err)
			p.logger.Error("apppart: event log conflict, partition stopped",
				"plog_offset", off, "wsid", cmd.WSID, "err", err)
			return Result{}, fmt.Errorf("%w at PLog offset %d: %w", ErrWrite, off, p.stopped)
		}
		p.logger.Warn("apppart: event write failed, actualizing",
			"plog_offset", off, "wsid", cmd.WSID, "err", err)
		return Result{}, fmt.Errorf("%w at PLog offset %d: %w", ErrWrite, off, err)
	}
	p.seq.Flush()
	return Result{Offset: off, Numbers: nums}, nil
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

// Close stops the sequencer. Values not yet flushed are recovered from the
// event log by the next Open. Close waits for a command in progress.
// It does not close the storages.
func (p *Partition) Close() error {
	if p.group != nil {
		// Cancelled and waited for outside p.mu: its failure path takes it.
		p.group.close()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	p.cleanup()
	return nil
}
