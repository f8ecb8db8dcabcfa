package plog

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"golang.org/x/sync/errgroup"

	"github.com/cqlseq/cqlseq/storage"
)

// maxRecordBatchesInFlight bounds insertGroupRecords: at most this many
// conditional record batches (ApplyBatchIf, one per event and record
// partition) of one group are in flight at once, each on a partition of
// its own. A group of a few hundred events with one record partition each
// is still written in one round; a group touching more record partitions
// waits for a slot instead of opening a request per partition.
const maxRecordBatchesInFlight = 256

// WriteGroup implements GroupWriter: each event with the semantics Write
// gives it in the writer's Mode, in fewer storage calls. Chunks are
// written as follows.
//
//   - ModeTrust2: per chunk, in order, one PutBatch of its events, then
//     one of their records, up to the first chunk that fails (the later
//     chunks are not written: ErrNotWritten); each event's outcome is its
//     chunk's.
//   - ModeTrust0 and ModeTrust1: one conditional batch per chunk, in order,
//     that inserts the chunk's events if none of them exists (if one does,
//     the chunk's events are inserted one at a time, in order, up to the
//     first that exists: ErrConflict, the later events not written); then
//     ModeTrust1 one PutBatch of the stored events' records (retried, as
//     Write does), ModeTrust0 one conditional batch per event and record
//     partition, issued concurrently (at most maxRecordBatchesInFlight) so
//     that a store with group commit (storage/boltdb) commits them
//     together; a record conflict fails its own event only. On a
//     storage.MultiApplier (storage/boltdb, storage/mem), one
//     ApplyBatchesIf per chunk of its events and their records instead:
//     one transaction, and on boltdb one request of its group commit.
//
// A group of one void gap marker (Event.Void) in ModeTrust0 or
// ModeTrust1 is a claim of its offset: the marker is inserted if the
// offset is empty; if an event is stored there, nothing is written and the
// error wraps ErrOffsetTaken, which does not stop the writer.
//
// A conflict stops the writer after the group.
func (w *Writer) WriteGroup(ctx context.Context, events []*Event) error {
	if len(events) == 0 {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.stopped != nil {
		return allFailed(events, w.mu.stopped)
	}
	encs, err := w.encodeGroup(events)
	if err != nil {
		return allFailed(events, err)
	}
	if len(events) == 1 && events[0].Void && w.o.Mode != ModeTrust2 {
		return w.claimLocked(ctx, events[0], encs[0])
	}
	errs := make([]error, len(events))
	switch {
	case w.o.Mode == ModeTrust2:
		w.putGroupLocked(ctx, events, encs, errs)
	case w.ma != nil:
		w.applyGroupLocked(ctx, w.ma, events, encs, errs)
	default:
		w.writeGroupLocked(ctx, events, encs, errs)
	}
	for _, err := range errs {
		if errors.Is(err, ErrConflict) {
			w.mu.stopped = err
			break
		}
	}
	return groupResult(events, errs)
}

// claimLocked writes the void gap marker e (encoded enc) if its offset is
// empty: the claim of a trust-0 or trust-1 group of one marker (see
// WriteGroup). An event found there is ErrOffsetTaken, which does not stop
// the writer.
func (w *Writer) claimLocked(ctx context.Context, e *Event, enc []byte) error {
	ok, err := w.o.Storage.InsertIfNotExists(ctx, EventPKey(w.o.Partition, e.Offset), EventCCols(e.Offset), enc, 0)
	switch {
	case err != nil:
		err = fmt.Errorf("plog: partition %d offset %d: claiming offsets %d..%d with a void marker: %w", w.o.Partition, e.Offset, e.Offset, e.NextOffset()-1, err)
	case !ok:
		err = fmt.Errorf("%w: partition %d offset %d", ErrOffsetTaken, w.o.Partition, e.Offset)
	}
	if err != nil {
		return allFailed([]*Event{e}, err)
	}
	return nil
}

// putGroupLocked writes a trust-2 group: per chunk, in order, one
// PutBatch of its events, then, once they are stored, one of their
// records (retried, as putIdempotent does), and sets each event's error
// from its chunk's. It stops at the first chunk that fails: the later
// chunks are not written (ErrNotWritten), so the stored events of a group
// are always a prefix of it and a failure leaves no stored event after a
// gap (an actualization reads the PLog up to its first gap, and an event
// stored past one would keep numbers the sequencer hands out again).
// Records follow their events so that a record row, however late it
// lands, names an event that is stored: no later owner issues its ID
// again (docs/design.md "Late writes").
func (w *Writer) putGroupLocked(ctx context.Context, events []*Event, encs [][]byte, errs []error) {
	part := w.o.Partition
	for from, to := range w.chunker().chunks(events, func(i int) int { return BatchBytes(events[i], len(encs[i])) }) {
		var rows, recs []storage.Row
		for i, e := range events[from:to] {
			rows = append(rows, storage.Row{PKey: EventPKey(part, e.Offset), CCols: EventCCols(e.Offset), Value: encs[from+i]})
			recs = appendRecordRows(recs, e)
		}
		err := w.o.Versions.Stamp(ctx, rows)
		if err == nil {
			err = w.o.Storage.PutBatch(ctx, rows)
		}
		if err != nil {
			err = fmt.Errorf("plog: partition %d offsets %d..%d: writing %d events: %w", part, events[from].Offset, events[to-1].Offset, to-from, err)
		} else if len(recs) > 0 {
			if err = putIdempotent(ctx, w.o.Storage, w.o.Versions, recs); err != nil {
				err = fmt.Errorf("plog: partition %d offsets %d..%d: the events are stored; writing their %d records (retried): %w", part, events[from].Offset, events[to-1].Offset, len(recs), err)
			}
		}
		if err != nil {
			for i := from; i < to; i++ {
				errs[i] = err
			}
			w.failAfter(events, errs, from, to)
			return
		}
	}
}

// writeGroupLocked writes a trust-0 or trust-1 group with the calls of
// the storage contract (see WriteGroup).
func (w *Writer) writeGroupLocked(ctx context.Context, events []*Event, encs [][]byte, errs []error) {
	part := w.o.Partition
	n := w.insertEventsLocked(ctx, events, encs, errs)
	if w.o.Mode == ModeTrust1 {
		var rows []storage.Row
		for _, e := range events[:n] {
			rows = appendRecordRows(rows, e)
		}
		if len(rows) > 0 {
			if err := putIdempotent(ctx, w.o.Storage, w.o.Versions, rows); err != nil {
				for i, e := range events[:n] {
					if len(e.Records) > 0 {
						errs[i] = fmt.Errorf("plog: partition %d offset %d: the event is stored; writing the group's %d records (retried): %w", part, e.Offset, len(rows), err)
					}
				}
			}
		}
	} else {
		w.insertGroupRecords(ctx, events[:n], encs[:n], errs)
	}
}

// applyGroupLocked writes a trust-0 or trust-1 group with one
// ApplyBatchesIf per chunk, in order, while every event so far is stored
// (see applyChunkLocked); a record conflict fails its own event only.
func (w *Writer) applyGroupLocked(ctx context.Context, ma storage.MultiApplier, events []*Event, encs [][]byte, errs []error) {
	for from, to := range w.chunker().chunks(events, func(i int) int { return BatchBytes(events[i], len(encs[i])) }) {
		if failed := w.applyChunkLocked(ctx, ma, events[from:to], encs[from:to], errs[from:to]); failed >= 0 {
			w.failAfter(events, errs, from+failed, to)
			return
		}
	}
}

// applyChunkLocked writes a chunk of a trust-0 or trust-1 group with one
// ApplyBatchesIf: a batch per event that inserts it if absent and requires
// the event before it (so that none is written after a conflict), then,
// per event and record partition, a batch of its records that requires its
// event (trust 0: inserted if absent; trust 1: put). It returns the index
// of the first event not stored, or -1 if every event is (records refused
// or not).
func (w *Writer) applyChunkLocked(ctx context.Context, ma storage.MultiApplier, events []*Event, encs [][]byte, errs []error) int {
	part := w.o.Partition
	batches := make([]storage.CondBatch, len(events), 2*len(events))
	recOf := make([]int, 0, len(events)) // event of batch len(events)+i
	for i, e := range events {
		pKey, cc := EventPKey(part, e.Offset), EventCCols(e.Offset)
		batches[i] = storage.CondBatch{PKey: pKey, Conds: []storage.Condition{{CCols: cc}}, Rows: []storage.Row{{PKey: pKey, CCols: cc, Value: encs[i]}}}
		if i > 0 {
			batches[i].Requires = []int{i - 1}
		}
	}
	var version uint64 // ModeTrust1's records, put: one logical write
	if w.o.Mode == ModeTrust1 && w.o.Versions != nil {
		var err error
		if version, err = w.o.Versions.Next(ctx); err != nil {
			for i := range events {
				errs[i] = fmt.Errorf("plog: partition %d offset %d: %w", part, events[i].Offset, err)
			}
			return 0
		}
	}
	for i, e := range events {
		for run := range partitionRuns(appendRecordRows(nil, e)) {
			b := storage.CondBatch{PKey: run[0].PKey, Rows: run, Requires: []int{i}}
			if w.o.Mode == ModeTrust0 {
				b.Conds = absent(run)
			} else {
				for k := range run {
					run[k].Version = version
				}
			}
			batches = append(batches, b)
			recOf = append(recOf, i)
		}
	}
	applied := make([]bool, len(batches))
	if err := ma.ApplyBatchesIf(ctx, batches, applied); err != nil {
		for i, e := range events {
			errs[i] = fmt.Errorf("plog: partition %d offset %d: writing events %d..%d and their records: %w", part, e.Offset, events[0].Offset, events[len(events)-1].Offset, err)
		}
		return 0
	}
	failed := slices.Index(applied[:len(events)], false)
	if failed >= 0 {
		w.failFromConflict(events, errs, failed)
	}
	for k, i := range recOf {
		b := len(events) + k
		if errs[i] == nil && !applied[b] {
			errs[i] = w.recordConflict(ctx, events[i], batches[b].Rows)
		}
	}
	return failed
}

// encodeGroup checks events and returns their encodings.
func (w *Writer) encodeGroup(events []*Event) ([][]byte, error) {
	part := w.o.Partition
	encs := make([][]byte, len(events))
	var buf []byte
	for i, e := range events {
		switch {
		case e == nil:
			return nil, fmt.Errorf("plog: partition %d: %w: event %d of the group is nil", part, storage.ErrInvalidArgument, i)
		case i == 0 && e.Offset == 0:
			return nil, fmt.Errorf("plog: partition %d: %w: event offset 0", part, storage.ErrInvalidArgument)
		case i > 0 && uint64(e.Offset) != uint64(events[0].Offset)+uint64(i):
			return nil, fmt.Errorf("plog: partition %d: %w: event %d of the group has offset %d, want %d (offsets must be consecutive and ascending)",
				part, storage.ErrInvalidArgument, i, e.Offset, uint64(events[0].Offset)+uint64(i))
		}
		start := len(buf)
		var err error
		if buf, err = AppendEncoded(buf, e); err != nil {
			return nil, fmt.Errorf("plog: partition %d offset %d: %w: %w", part, e.Offset, storage.ErrInvalidArgument, err)
		}
		encs[i] = buf[start:len(buf):len(buf)]
	}
	return encs, nil
}

// insertEventsLocked inserts events if absent, chunk by chunk, and
// returns how many (a prefix) are stored; it sets the errs of the others.
func (w *Writer) insertEventsLocked(ctx context.Context, events []*Event, encs [][]byte, errs []error) int {
	part := w.o.Partition
	for i, j := range w.chunker().chunks(events, func(i int) int { return BatchBytes(events[i], len(encs[i])) }) {
		pKey := EventPKey(part, events[i].Offset)
		conds := make([]storage.Condition, 0, j-i)
		rows := make([]storage.Row, 0, j-i)
		for k := i; k < j; k++ {
			cc := EventCCols(events[k].Offset)
			conds = append(conds, storage.Condition{CCols: cc})
			rows = append(rows, storage.Row{PKey: pKey, CCols: cc, Value: encs[k]})
		}
		ok, err := w.o.Storage.ApplyBatchIf(ctx, pKey, conds, rows)
		if err != nil {
			err = fmt.Errorf("plog: partition %d offsets %d..%d: inserting %d events: %w", part, events[i].Offset, events[j-1].Offset, j-i, err)
			for k := i; k < j; k++ {
				errs[k] = err
			}
			w.failAfter(events, errs, i, j)
			return i
		}
		if !ok {
			for k := i; k < j; k++ {
				e := events[k]
				ok, err := w.o.Storage.InsertIfNotExists(ctx, pKey, rows[k-i].CCols, encs[k], 0)
				if err != nil {
					errs[k] = fmt.Errorf("plog: partition %d offset %d: inserting the event: %w", part, e.Offset, err)
					w.failAfter(events, errs, k, k+1)
					return k
				}
				if !ok {
					w.failFromConflict(events, errs, k)
					return k
				}
			}
		}
	}
	return len(events)
}

// failFromConflict sets errs for a group whose event k found an event stored
// at its offset: k's error wraps ErrConflict, and the events after it are
// not written.
func (w *Writer) failFromConflict(events []*Event, errs []error, k int) {
	errs[k] = w.conflictAt(events[k].Offset)
	w.failAfter(events, errs, k, k+1)
}

// failAfter sets the errs of events[from:], not written because event
// failed (errs[failed]) first.
func (w *Writer) failAfter(events []*Event, errs []error, failed, from int) {
	for m := from; m < len(events); m++ {
		errs[m] = notWritten(uint64(w.o.Partition), uint64(events[m].Offset), uint64(events[failed].Offset), errs[failed])
	}
}

// insertGroupRecords inserts the records of events (whose events are
// stored, encoded as encs) if absent and sets each event's error from its
// own records' outcome. The records of one chunk of events (see chunker:
// its records count in its bytes) on one record partition go in one
// conditional batch; if that batch is not applied (a record exists), it
// wrote nothing, and its events' records are inserted again one event at
// a time, in order, so that a conflict fails its own event only. Batches
// on different partitions go concurrently (at most
// maxRecordBatchesInFlight partitions at once); those on one partition go
// one after another, in the group's order: concurrent conditional batches
// on one partition contend for its Paxos round and time out (a group of
// 1,500 events of one workspace, all in flight, timed out on a single
// Cassandra node), and one batch per event made a group of one hot
// workspace cost a round trip per event.
func (w *Writer) insertGroupRecords(ctx context.Context, events []*Event, encs [][]byte, errs []error) {
	type run struct {
		event int
		rows  []storage.Row
	}
	type batch struct {
		runs []run // the runs of its events on its partition, in order
		rows []storage.Row
		// outcome of each run: applied, or not (a record exists), or err
		ok  []bool
		err []error
	}
	byPartition := map[string][]*batch{}
	var partitions []string // in order of first appearance
	for from, to := range w.chunker().chunks(events, func(i int) int { return BatchBytes(events[i], len(encs[i])) }) {
		inChunk := map[string]*batch{}
		for i := from; i < to; i++ {
			for r := range partitionRuns(appendRecordRows(nil, events[i])) {
				k := string(r[0].PKey)
				b := inChunk[k]
				if b == nil {
					b = &batch{}
					inChunk[k] = b
					if _, seen := byPartition[k]; !seen {
						partitions = append(partitions, k)
					}
					byPartition[k] = append(byPartition[k], b)
				}
				b.runs = append(b.runs, run{i, r})
				b.rows = append(b.rows, r...)
			}
		}
	}
	apply := func(rows []storage.Row) (bool, error) {
		return w.o.Storage.ApplyBatchIf(ctx, rows[0].PKey, absent(rows), rows)
	}
	var eg errgroup.Group // not WithContext: one batch's error cancels no other
	eg.SetLimit(maxRecordBatchesInFlight)
	for _, k := range partitions {
		eg.Go(func() error {
			for _, b := range byPartition[k] {
				b.ok, b.err = make([]bool, len(b.runs)), make([]error, len(b.runs))
				ok, err := apply(b.rows)
				switch {
				case err != nil:
					for j := range b.runs {
						b.err[j] = err
					}
				case ok:
					for j := range b.runs {
						b.ok[j] = true
					}
				case len(b.runs) == 1:
				default: // nothing written: find the event whose record exists
					for j, r := range b.runs {
						b.ok[j], b.err[j] = apply(r.rows)
					}
				}
			}
			return nil // each batch's error is its own: it sets its events'
		})
	}
	_ = eg.Wait()
	for _, k := range partitions {
		for _, b := range byPartition[k] {
			for j, r := range b.runs {
				e := events[r.event]
				switch {
				case errs[r.event] != nil:
				case b.err[j] != nil:
					errs[r.event] = fmt.Errorf("plog: partition %d offset %d: inserting %d records of WSID %d (a batch of %d): %w", w.o.Partition, e.Offset, len(r.rows), e.WSID, len(b.rows), b.err[j])
				case !b.ok[j]:
					errs[r.event] = w.recordConflict(ctx, e, r.rows)
				}
			}
		}
	}
}
