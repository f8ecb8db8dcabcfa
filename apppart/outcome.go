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
	// Stored: the event is durable at its offset (Do returned no error).
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
// outcome (NotStored or Unknown) and offset, and the cause. Err wraps
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
// numbers res.Numbers and its payload), NotStored if it is another's.
//
// It first waits, bounded by ctx, until the offset is final: every event
// up to it durable for this owner (isequencer.Sequencer.DurableNext past
// it). After an Unknown outcome the partition actualizes (Settle starts
// it, as Do would): either its replay reads the event, or a later
// command's event takes the offset once it is durable. From then on no
// write changes the event at the offset (docs/design.md, "Settling an
// unknown outcome"). An idle partition writes no later event: Settle then
// waits until a command does or ctx ends.
//
// It returns ErrStopped, ErrNotLeader or ErrClosed if the partition can no
// longer make the offset final (the next owner's partition settles it),
// ErrRestored for an offset a restore emptied, and a read error wrapped. Settle tells commands of one workspace apart
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
	var e plog.Event
	found, err := p.reader.ReadEvent(ctx, p.part, off, &e)
	if err != nil {
		return Unknown, fmt.Errorf("apppart: settle PLog offset %d: %w", off, err)
	}
	if !found {
		return Unknown, fmt.Errorf("%w: PLog offset %d: no event there although every event below %d is durable", ErrRestored, off, p.seq.DurableNext())
	}
	if e.Skip > 0 {
		return Unknown, fmt.Errorf("%w: PLog offset %d: a gap marker of %d offsets is there (written by `cqlseq advance`)", ErrRestored, off, e.Skip)
	}
	got, err := plog.AppendEncoded(nil, &e)
	if err != nil {
		return Unknown, fmt.Errorf("apppart: settle PLog offset %d: %w", off, err)
	}
	if bytes.Equal(got, wantBytes) {
		return Stored, nil
	}
	return NotStored, nil
}
