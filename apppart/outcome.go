package apppart

import (
	"errors"
	"fmt"

	"github.com/cqlseq/cqlseq/isequencer"
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
