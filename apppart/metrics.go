package apppart

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
)

// Metrics receives a partition's observations (package metrics exports
// them to Prometheus). Its methods are called from Do's callers and the
// committer, concurrently; they must be cheap and must not block.
type Metrics interface {
	// Opened reports the partition's ownership epoch (every mode takes
	// one), once Open took the partition over.
	Opened(epoch uint64)
	// Command reports a Do that returned: its result (CommandResult) and
	// how long it took.
	Command(result CommandResult, took time.Duration)
	// Durable reports the next PLog offset below which every event is
	// durable, after each group write that stored events.
	Durable(next isequencer.PLogOffset)
	// Stopped reports that the partition stopped taking commands, and
	// why: StopConflict or StopFenced, as soon as the refused group write
	// returns (before any later Do). It is called once.
	Stopped(reason StopReason)
}

// CommandResult is what a Do returned; String is its metric label.
type CommandResult uint8

// The results of Do (ResultOf).
const (
	ResultStored CommandResult = iota
	ResultNotStored
	ResultUnknown
	ResultBusy
	ResultInvalid
	ResultStopped
	ResultNotLeader
	ResultClosed
	ResultCanceled
	ResultError // a sequencer error before an offset
	// NumCommandResults is the number of CommandResults.
	NumCommandResults
)

var resultNames = [NumCommandResults]string{
	"stored", "not_stored", "unknown", "busy", "invalid", "stopped", "not_leader", "closed", "canceled", "error",
}

func (r CommandResult) String() string {
	if r < NumCommandResults {
		return resultNames[r]
	}
	return fmt.Sprintf("CommandResult(%d)", uint8(r))
}

// ResultOf classifies Do's error: by the event's outcome once the command
// took an offset, else by the error before it.
func ResultOf(err error) CommandResult {
	switch OutcomeOf(err) {
	case Stored:
		return ResultStored
	case NotStored:
		return ResultNotStored
	case Unknown:
		return ResultUnknown
	}
	switch {
	case errors.Is(err, ErrBusy):
		return ResultBusy
	case errors.Is(err, ErrInvalidCommand):
		return ResultInvalid
	case errors.Is(err, ErrStopped):
		return ResultStopped
	case errors.Is(err, ErrNotLeader):
		return ResultNotLeader
	case errors.Is(err, ErrClosed):
		return ResultClosed
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return ResultCanceled
	}
	return ResultError
}

// StopReason is why a partition stopped, as a metric label.
type StopReason string

const (
	// StopConflict: an event or a record was already stored under the
	// key of one of its writes (plog.ErrConflict).
	StopConflict StopReason = "conflict"
	// StopFenced: another owner fenced the partition off (plog.ErrFenced).
	StopFenced StopReason = "fenced"
)

// stopReason is the StopReason of a refusal.
func stopReason(err error) StopReason {
	if errors.Is(err, plog.ErrFenced) {
		return StopFenced
	}
	return StopConflict
}

// nopMetrics is the Metrics of a partition opened without them.
type nopMetrics struct{}

func (nopMetrics) Opened(uint64)                        {}
func (nopMetrics) Command(CommandResult, time.Duration) {}
func (nopMetrics) Durable(isequencer.PLogOffset)        {}
func (nopMetrics) Stopped(StopReason)                   {}
