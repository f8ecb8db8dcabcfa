package plog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cqlseq/cqlseq/storage"
)

// Retries of the record Puts that follow durable events (fenced, trust1):
// the same rows again are idempotent, while giving up leaves the events
// without their records; so a transient failure is retried a few times
// within ctx.
const (
	putAttempts   = 5
	putFirstDelay = 10 * time.Millisecond
)

// putIdempotent writes rows with PutBatch, stamped with one new version of
// v (one logical write, so every retry carries the same), retrying
// failures (retry's attempts and back-off). It returns the last error.
func putIdempotent(ctx context.Context, st storage.Storage, v *storage.Versions, rows []storage.Row) error {
	if err := v.Stamp(ctx, rows); err != nil {
		return err
	}
	return retry(ctx, func(error) bool { return true }, func() error { return st.PutBatch(ctx, rows) })
}

// retry calls f until it succeeds, fails with an error again rejects, has
// been called putAttempts times or ctx ends, pausing between calls (from
// putFirstDelay, doubling). It returns f's last error.
func retry(ctx context.Context, again func(error) bool, f func() error) error {
	delay := putFirstDelay
	for attempt := 1; ; attempt++ {
		err := f()
		if err == nil || !again(err) || attempt == putAttempts || ctx.Err() != nil || !pause(ctx, &delay) {
			return err
		}
	}
}

// transient reports whether a retry of the same write may succeed where
// err failed: the store was unavailable, or the write's outcome is unknown.
func transient(err error) bool {
	return errors.Is(err, storage.ErrUnavailable) || errors.Is(err, storage.ErrUnknownOutcome)
}

// pause waits *delay, or until ctx ends (false), and doubles *delay up to
// a second: the back-off of retry's and PutVersioned's calls.
func pause(ctx context.Context, delay *time.Duration) bool {
	t := time.NewTimer(*delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	}
	*delay = min(2**delay, time.Second)
	return true
}

// RecordsWriter writes the record rows of events that are stored: the
// rows their writes may have left unwritten (an event landed, its records
// were never sent). *Writer and *FencedWriter implement it.
type RecordsWriter interface {
	// WriteRecords writes e's record rows, each naming e.Offset, as the
	// writer's mode writes records: inserted if absent in ModeTrust0 (a
	// row already naming e.Offset is e's own; one naming another offset
	// is an error wrapping ErrRecordConflict), put with a version of the
	// writer's otherwise. It is idempotent: the same rows every time. A
	// transient failure (storage.ErrUnavailable, an unknown outcome) is
	// retried a few times within ctx.
	WriteRecords(ctx context.Context, e *Event) error
	// WriteRecordsOf writes the records of events (in offset order) as
	// WriteRecords writes each event's, in fewer calls where the mode
	// allows it: the versioned modes put up to RecordBatchRows rows per
	// batch, ModeTrust0 inserts each event's on their own, so that a
	// conflict names its event. It calls conflict for each event whose
	// records conflict (ErrRecordConflict) and goes on; it returns the
	// first other error.
	WriteRecordsOf(ctx context.Context, events []*Event, conflict func(*Event, error)) error
}

// RecordBatchRows bounds the record rows of one batch of WriteRecordsOf.
const RecordBatchRows = 256

var (
	_ RecordsWriter = (*Writer)(nil)
	_ RecordsWriter = (*FencedWriter)(nil)
)

// WriteRecords implements RecordsWriter.
func (w *Writer) WriteRecords(ctx context.Context, e *Event) error {
	rows := appendRecordRows(nil, e)
	if len(rows) == 0 {
		return nil
	}
	if w.o.Mode != ModeTrust0 {
		return putIdempotent(ctx, w.o.Storage, w.o.Versions, rows)
	}
	for run := range partitionRuns(rows) {
		if err := retry(ctx, transient, func() error { return w.insertRecords(ctx, e, run) }); err != nil {
			return err
		}
	}
	return nil
}

// WriteRecordsOf implements RecordsWriter.
func (w *Writer) WriteRecordsOf(ctx context.Context, events []*Event, conflict func(*Event, error)) error {
	if w.o.Mode != ModeTrust0 {
		return putRecordBatches(ctx, w.o.Storage, w.o.Versions, events)
	}
	for _, e := range events {
		switch err := w.WriteRecords(ctx, e); {
		case errors.Is(err, ErrRecordConflict):
			conflict(e, err)
		case err != nil:
			return err
		}
	}
	return nil
}

// insertRecords inserts run, e's record rows of one partition, if absent:
// rows already naming e.Offset (e's own earlier attempt) stand; a row
// naming another offset is a conflict.
func (w *Writer) insertRecords(ctx context.Context, e *Event, run []storage.Row) error {
	ok, err := w.o.Storage.ApplyBatchIf(ctx, run[0].PKey, absent(run), run)
	if err != nil {
		return fmt.Errorf("plog: partition %d offset %d: inserting %d records of WSID %d: %w", w.o.Partition, e.Offset, len(run), e.WSID, err)
	}
	if ok {
		return nil
	}
	items := make([]storage.GetItem, len(run))
	for i, r := range run {
		items[i].CCols = r.CCols
	}
	if err := w.o.Storage.GetBatch(ctx, run[0].PKey, items); err != nil {
		return fmt.Errorf("plog: partition %d offset %d: reading records of WSID %d: %w", w.o.Partition, e.Offset, e.WSID, err)
	}
	own := RecordValue(e.Offset)
	var missing []storage.Row
	for i, it := range items {
		switch {
		case !it.Ok:
			missing = append(missing, run[i])
		case !bytes.Equal(it.Value, own):
			return w.recordConflict(ctx, e, run)
		}
	}
	for _, r := range missing { // rows of e's own earlier attempt stand beside them
		if ok, err := w.o.Storage.InsertIfNotExists(ctx, r.PKey, r.CCols, r.Value, 0); err != nil {
			return fmt.Errorf("plog: partition %d offset %d: inserting a record of WSID %d: %w", w.o.Partition, e.Offset, e.WSID, err)
		} else if !ok {
			return w.recordConflict(ctx, e, run)
		}
	}
	return nil
}

// WriteRecords implements RecordsWriter: the records put with a version.
func (w *FencedWriter) WriteRecords(ctx context.Context, e *Event) error {
	rows := appendRecordRows(nil, e)
	if len(rows) == 0 {
		return nil
	}
	return putIdempotent(ctx, w.o.Storage, w.o.Versions, rows)
}

// WriteRecordsOf implements RecordsWriter: the records put with a version,
// in batches.
func (w *FencedWriter) WriteRecordsOf(ctx context.Context, events []*Event, _ func(*Event, error)) error {
	return putRecordBatches(ctx, w.o.Storage, w.o.Versions, events)
}

// putRecordBatches puts the record rows of events with putIdempotent, up
// to RecordBatchRows rows per batch (or one event's, if it has more), one
// version per batch. A batch ends
// before a record row of the one before it: a record ID that two events
// name is put by each in its own batch, in offset order, so the later
// event's row carries the higher version and stands, as if each event's
// rows were put on their own.
func putRecordBatches(ctx context.Context, st storage.Storage, v *storage.Versions, events []*Event) error {
	type key struct{ pKey, cCols string }
	var rows []storage.Row
	in := map[key]bool{}
	flush := func() error {
		if len(rows) == 0 {
			return nil
		}
		err := putIdempotent(ctx, st, v, rows)
		rows, in = nil, map[key]bool{}
		return err
	}
	for _, e := range events {
		next := appendRecordRows(nil, e)
		again := len(rows)+len(next) > RecordBatchRows
		for _, r := range next {
			again = again || in[key{string(r.PKey), string(r.CCols)}]
		}
		if again {
			if err := flush(); err != nil {
				return err
			}
		}
		for _, r := range next {
			in[key{string(r.PKey), string(r.CCols)}] = true
		}
		rows = append(rows, next...)
	}
	return flush()
}
