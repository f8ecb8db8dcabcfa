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

// writerLog is the groupLog of every mode: a plog.Writer (the trust
// modes) or a plog.FencedWriter.
type writerLog struct{ w plog.GroupWriter }

func (l writerLog) writeGroup(ctx context.Context, events []*plog.Event, errs []error) {
	writeGroup(ctx, l.w, events, errs)
}

// writeGroup writes events with w and sets errs from its outcome (see
// plog.GroupWriter), as groupLog says. An event plog did not write after
// a refused one (plog.ErrNotWritten) carries the refusal; after one of
// unknown outcome, it reads as unknown, as every event after a gap does
// to the committer.
func writeGroup(ctx context.Context, w plog.GroupWriter, events []*plog.Event, errs []error) {
	clear(errs)
	err := w.WriteGroup(ctx, events)
	if err == nil {
		return
	}
	if ge := (*plog.GroupError)(nil); errors.As(err, &ge) && len(ge.Errs) == len(errs) {
		copy(errs, ge.Errs)
		return
	}
	for i := range errs {
		errs[i] = err
	}
}
