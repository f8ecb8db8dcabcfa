package apppart

import (
	"context"
	"errors"

	"github.com/cqlseq/cqlseq/plog"
)

// groupLog writes a group of events (consecutive offsets, ascending) and
// sets errs[i] to event i's outcome: nil when stored with its records; an
// error wrapping plog.ErrConflict or plog.ErrFenced when it was refused
// (the partition stops); any other error when its outcome is unknown.
type groupLog interface {
	writeGroup(ctx context.Context, events []*plog.Event, errs []error)
}

// fencedLog is the groupLog of fenced mode.
type fencedLog struct{ w *plog.FencedWriter }

func (l fencedLog) writeGroup(ctx context.Context, events []*plog.Event, errs []error) {
	err := l.w.WriteGroup(ctx, events)
	stored := len(events)
	if err != nil {
		stored = 0
		if ge := (*plog.GroupError)(nil); errors.As(err, &ge) {
			stored, err = ge.Stored, ge.Err
		}
	}
	for i := range errs {
		errs[i] = nil
		if i >= stored {
			errs[i] = err
		}
	}
}

// trustLog is the groupLog of the trust modes.
type trustLog struct{ w *plog.Writer }

func (l trustLog) writeGroup(ctx context.Context, events []*plog.Event, errs []error) {
	l.w.WriteGroup(ctx, events, errs)
}
