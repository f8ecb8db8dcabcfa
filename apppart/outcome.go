package apppart

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
)

// Outcome is what became of a command's event, as a caller branches on it
// after Do.
type Outcome uint8

const (
	// NoEvent: the command ended before it took an offset (ErrInvalidCommand,
	// ErrBusy, a sequencer error, ErrClosed or ErrStopped before queueing, or
	// ctx ended first). There is no event and nothing to settle.
	NoEvent Outcome = iota
	// NotStored: the event is not stored at its offset and never will be:
	// plog did not send it (plog.ErrNotWritten), or the store refused it
	// (plog.ErrConflict, plog.ErrFenced: the partition stops).
	NotStored
	// Stored: the event is durable at its offset: Do returned no error,
	// or, in trust0, an EventError wrapping plog.ErrRecordConflict and
	// ErrStopped: the event is stored, without the records another event
	// already holds, and the partition stops.
	Stored
	// Unknown: the event may be stored at its offset, or not: its write's
	// outcome is unknown (a timeout, a lost connection), it was stored after
	// an event of unknown outcome (the replay may stop before it), or ctx
	// ended while the command waited for its group.
	Unknown
)

func (o Outcome) String() string {
	switch o {
	case NoEvent:
		return "no event"
	case NotStored:
		return "not stored"
	case Stored:
		return "stored"
	case Unknown:
		return "unknown"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// EventError is Do's error once the command took an offset: its event's
// outcome (NotStored or Unknown; Stored for a trust-0 record conflict) and offset, and the cause. Err wraps
// ErrWrite when the write failed (and ErrStopped when the store refused
// the event), or ctx's error when ctx ended while the command waited.
// Do's Result holds the event's offset and numbers beside it: they are
// the caller's only if the event is stored. An event not stored leaves its
// offset and numbers to later commands; after an Unknown one the partition
// actualizes before it writes again, and the event keeps its offset and
// numbers only if the replay reads it.
type EventError struct {
	Outcome Outcome
	Offset  isequencer.PLogOffset
	Err     error
}

func (e *EventError) Error() string { return e.Err.Error() }

func (e *EventError) Unwrap() error { return e.Err }

// OutcomeOf returns the outcome that Do's error err reports: Stored for
// nil, the EventError's outcome, else NoEvent.
func OutcomeOf(err error) Outcome {
	if err == nil {
		return Stored
	}
	if e, ok := errors.AsType[*EventError](err); ok {
		return e.Outcome
	}
	return NoEvent
}

// eventErr is the EventError of the event at off.
func eventErr(outcome Outcome, off isequencer.PLogOffset, format string, args ...any) *EventError {
	return &EventError{Outcome: outcome, Offset: off, Err: fmt.Errorf(format, args...)}
}

// ErrInvalidSettle: Settle was given a Result without an offset.
var ErrInvalidSettle = errors.New("apppart: settle: no offset")

// ErrRestored: Settle found no event at a final offset, or a gap marker
// (Advance): the store was restored from a backup taken before the event
// was written, and whatever was stored there is lost. The outcome stays
// Unknown: reconcile it with the system the command came from.
var ErrRestored = errors.New("apppart: settle: the store was restored: the PLog holds no event of that time")

// Settle returns the final outcome of cmd's event that Do answered with
// res (res as Do returned it, with an Unknown outcome or any other):
// Stored if the event stored at res.Offset is cmd's (its workspace, its
// numbers res.Numbers and its payload), once its record rows are written
// too (an event whose write's outcome was unknown may have landed without
// them: Settle writes them, as the mode writes records, idempotently),
// NotStored if it is another's.
//
// It first waits, bounded by ctx, until the offset is final: every event
// up to it durable for this owner (isequencer.Sequencer.DurableNext past
// it). After an Unknown outcome the partition actualizes (Settle starts
// it, as Do would): either its replay reads the event, or a later
// command's event takes the offset once it is durable. From then on no
// write changes the event at the offset (docs/design.md, "Settling an
// unknown outcome"). On a partition where no later command takes the
// offset (idle, every offset taken durable), Settle claims it with a void
// gap marker (claimIdle) and answers NotStored once the marker is stored,
// or Stored if the event in doubt was stored first.
//
// It returns ErrStopped, ErrNotLeader or ErrClosed if the partition can no
// longer make the offset final (the next owner's partition settles it),
// ErrRestored for an offset a restore emptied, and a read error wrapped.
// It reads the event as every PLog reader does, from an offset they read
// up to res.Offset: an event stored inside a gap marker's gap is read by
// no reader, and is not cmd's stored event. That read starts at the
// nearest offset this partition knows the readers read (its own groups',
// or where its replay began when it opened), or, for an offset below
// those, at the PLog's first offset. Settle tells commands of one workspace apart
// by their payloads: two commands with equal payloads given equal numbers
// at one offset are one event to it.
func (p *Partition) Settle(ctx context.Context, cmd Command, res Result) (Outcome, error) {
	off := res.Offset
	if off == 0 {
		return Unknown, ErrInvalidSettle
	}
	err := poll(ctx, func() (bool, error) {
		if p.seq.DurableNext() > off {
			return true, nil
		}
		if err := p.ready(); err != nil && !errors.Is(err, ErrBusy) {
			if p.seq.DurableNext() > off {
				return true, nil // made final as it stopped
			}
			return false, fmt.Errorf("apppart: settle PLog offset %d: %w", off, err)
		}
		p.claimIdle(off)
		return false, nil
	})
	if err != nil {
		if err == ctx.Err() {
			err = fmt.Errorf("apppart: settle PLog offset %d (not final yet: every event below %d is durable): %w", off, p.seq.DurableNext(), err)
		}
		return Unknown, err
	}
	var want plog.Event
	p.shape.fill(&want, off, cmd, res.Numbers, cmd.Payload)
	wantBytes, err := plog.AppendEncoded(nil, &want)
	if err != nil {
		return Unknown, fmt.Errorf("%w: %w", ErrInvalidCommand, err)
	}
	e, found, err := p.eventAt(ctx, off)
	switch {
	case err != nil:
		return Unknown, fmt.Errorf("apppart: settle PLog offset %d: %w", off, err)
	case !found:
		return Unknown, fmt.Errorf("%w: PLog offset %d: no event there although every event below %d is durable", ErrRestored, off, p.seq.DurableNext())
	case e.Skip > 0 && e.Void:
		return NotStored, nil
	case e.Skip > 0:
		return Unknown, fmt.Errorf("%w: PLog offset %d: in the gap of the marker at %d, offsets %d..%d (written by `cqlseq advance`)", ErrRestored, off, e.Offset, e.Offset, e.NextOffset()-1)
	}
	if !bytes.Equal(e.enc, wantBytes) {
		return NotStored, nil
	}
	// The event may have landed without its records (its write's outcome
	// was unknown, and the replay took it): Stored means with them.
	if err := p.records.WriteRecords(ctx, &want); err != nil {
		return Unknown, fmt.Errorf("apppart: settle PLog offset %d: the event is stored; writing its records: %w", off, err)
	}
	return Stored, nil
}

// claimIdle makes offsets up to off final on an idle partition: when
// every offset taken is durable and the next one, d, is at most off (an
// event of unknown outcome at d..off, after the replay that followed it
// did not read it), it writes a void gap marker at d covering d..off (at
// least d+1) through the committer, in the trust modes whose event writes
// are conditional (trust0, trust1) and in fenced mode. The marker is a
// conditional write under the mode's rules: if the event in doubt is
// stored first, the marker is refused (plog.ErrOffsetTaken,
// plog.ErrOwnEventStored), the partition actualizes and its replay reads
// the event; if the marker is stored first, the event in doubt, whose
// write is conditional on its offset being empty, never will be. trust2
// writes of events are not conditional and are retried until stored (see
// committer.write): an offset of trust2 is never claimed.
func (p *Partition) claimIdle(off isequencer.PLogOffset) {
	if p.mode == plog.ModeTrust2 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.stopped != nil || p.flow.failure() != nil {
		return
	}
	d := p.seq.DurableNext()
	if next, ok := p.seq.NextOffset(); !ok || next != d || d > off || !p.seq.Ready() {
		return
	}
	n := max(uint64(off-d), 1) // the marker at d covers d..off (d..d+1 when d == off)
	at, ok := p.seq.Skip(n)
	if !ok {
		return
	}
	x := &pending{done: make(chan struct{})}
	x.ev = plog.Event{Partition: p.part, Offset: at, Skip: n, Void: true}
	if err := p.flow.enqueue(x); err != nil {
		return
	}
	p.logger.Info("apppart: settle claims offsets of an idle partition", "plog_offsets", fmt.Sprintf("%d-%d", at, x.ev.NextOffset()-1))
}

// coveringEvent is what eventAt found: the event or gap marker that covers an
// offset, and the event's encoding.
type coveringEvent struct {
	plog.Event
	enc []byte
}

// eventAt reads the PLog as its readers read it, from an offset they read
// (pathFrom) up to off, and returns the event at off, or the gap marker
// whose offsets cover off; found is false if the readers stop before off
// (a missing offset). An event stored at an offset that a gap marker
// covers is read by no reader, and eventAt does not return it.
func (p *Partition) eventAt(ctx context.Context, off isequencer.PLogOffset) (coveringEvent, bool, error) {
	var got coveringEvent
	found := false
	err := p.reader.ReadEvents(ctx, p.part, p.pathFrom(off), func(e *plog.Event) error {
		if e.NextOffset() <= off {
			return nil
		}
		enc, err := plog.AppendEncoded(nil, e)
		if err != nil {
			return err
		}
		got = coveringEvent{Event: plog.Event{Partition: e.Partition, Offset: e.Offset, Skip: e.Skip, Void: e.Void}, enc: enc}
		found = true
		return errFound
	})
	if err != nil && err != errFound { //nolint:errorlint // errFound is never wrapped
		return got, false, err
	}
	return got, found, nil
}

// errFound stops eventAt's read.
var errFound = errors.New("apppart: found")

// pathFrom returns an offset at most off that the PLog's readers read (an
// event's or a gap marker's, not one inside a gap), as close to off as
// this partition knows one: the first offset of a group it wrote, or the
// offset its replay began at when it opened; else 1.
func (p *Partition) pathFrom(off isequencer.PLogOffset) isequencer.PLogOffset {
	if from, ok := p.flow.groupStartAtOrBelow(off); ok {
		return from
	}
	if p.pathStart <= off {
		return p.pathStart
	}
	return 1
}
