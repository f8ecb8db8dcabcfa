package plog

import (
	"bytes"
	"context"
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
// failures (at most putAttempts calls, backing off from putFirstDelay)
// while ctx allows. It returns the last error.
func putIdempotent(ctx context.Context, st storage.Storage, v *storage.Versions, rows []storage.Row) error {
	if err := v.Stamp(ctx, rows); err != nil {
		return err
	}
	delay := putFirstDelay
	var err error
	for attempt := 1; ; attempt++ {
		if err = st.PutBatch(ctx, rows); err == nil || attempt == putAttempts || ctx.Err() != nil {
			return err
		}
		if !pause(ctx, &delay) {
			return err
		}
	}
}

// pause waits *delay, or until ctx ends (false), and doubles *delay up to
// a second: the back-off of putIdempotent's and PutVersioned's retries.
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

// RecordsWriter writes the record rows of an event that is stored: the
// rows its write may have left unwritten (the event landed, its records
// were never sent). *Writer and *FencedWriter implement it.
type RecordsWriter interface {
	// WriteRecords writes e's record rows, each naming e.Offset, as the
	// writer's mode writes records: inserted if absent in ModeTrust0 (a
	// row already naming e.Offset is e's own; one naming another offset
	// is an error wrapping ErrRecordConflict), put with a version of the
	// writer's otherwise. It is idempotent: the same rows every time.
	WriteRecords(ctx context.Context, e *Event) error
}

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
	own := RecordValue(e.Offset)
	for run := range partitionRuns(rows) {
		ok, err := w.o.Storage.ApplyBatchIf(ctx, run[0].PKey, absent(run), run)
		if err != nil {
			return fmt.Errorf("plog: partition %d offset %d: inserting %d records of WSID %d: %w", w.o.Partition, e.Offset, len(run), e.WSID, err)
		}
		if ok {
			continue
		}
		items := make([]storage.GetItem, len(run))
		for i, r := range run {
			items[i].CCols = r.CCols
		}
		if err := w.o.Storage.GetBatch(ctx, run[0].PKey, items); err != nil {
			return fmt.Errorf("plog: partition %d offset %d: reading records of WSID %d: %w", w.o.Partition, e.Offset, e.WSID, err)
		}
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
