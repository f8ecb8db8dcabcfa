package plog

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/storage"
)

// FencedWriterOptions configure a FencedWriter.
type FencedWriterOptions struct {
	// Storage holds the PLog and the records. Required.
	Storage storage.Storage
	// Capabilities are Storage's (storage.Probe), found once by the caller
	// that builds every user of Storage. A MultiApplier among them writes
	// each chunk's conditional batch and its records with one call. nil:
	// NewFencedWriter probes Storage itself.
	Capabilities *storage.Capabilities
	// Partition is the PLog partition written.
	Partition isequencer.PartitionID
	// Epoch is the owner's epoch (vvmadapter.Adapter.NextEpoch), > 0.
	// The owner runs Sweep with it before the first WriteGroup.
	Epoch uint64
	// MaxChunkEvents and MaxChunkBytes cap a chunk of a group, written
	// with one conditional batch (see GroupWriter): its events, and their
	// encoded bytes (an event larger than the cap is a chunk alone).
	// Defaults DefaultMaxChunkEvents and DefaultMaxChunkBytes.
	MaxChunkEvents, MaxChunkBytes int
	// Versions are the owner's write versions (storage.Versions of Epoch):
	// the records, put after their events, carry them (see
	// WriterOptions.Versions). nil: unversioned.
	Versions *storage.Versions
}

// EnsureDefaults sets zero fields to their defaults.
func (o *FencedWriterOptions) EnsureDefaults() {
	defaultCaps(&o.MaxChunkEvents, &o.MaxChunkBytes)
}

// Validate reports every problem of o at once. Call it after
// EnsureDefaults.
func (o *FencedWriterOptions) Validate() error {
	errs := validateCaps(o.MaxChunkEvents, o.MaxChunkBytes)
	if o.Storage == nil {
		errs = append(errs, fmt.Errorf("%w: Storage is nil", ErrInvalidOptions))
	}
	if o.Epoch == 0 {
		errs = append(errs, fmt.Errorf("%w: Epoch 0, must be > 0", ErrInvalidOptions))
	}
	return errors.Join(errs...)
}

// FencedWriter writes one partition's events in groups, each under the
// fence of its block, and the records they create. Safe for concurrent
// use; writes are serialised.
type FencedWriter struct {
	o  FencedWriterOptions
	ma storage.MultiApplier // o.Capabilities'; nil if none
	mu struct {
		sync.Mutex
		// fencedBlock is the block (offset >> 12) whose fence this writer
		// knows to hold its epoch; valid when hasFenced.
		fencedBlock uint64
		hasFenced   bool
		stopped     error
		buf         []byte // the group's encoded events
		ends        []int  // ends[i]: end of event i's encoding in buf
		conds       []storage.Condition
		rows        []storage.Row
		recs        []storage.Row
		// inDoubt holds, by offset, every distinct encoding the writer
		// sent at that offset in a batch whose outcome was unknown, until
		// a batch at or past the offset is applied; inDoubtN counts them.
		// A found event is the writer's own if it equals any of them. At
		// most maxInDoubtPerOffset encodings of one offset and maxInDoubt
		// in all are kept; an encoding past either bound is not kept, and
		// if that event is found stored later the writer takes it for
		// another's and stops with ErrConflict: past the bounds it errs on
		// the side of stopping, never of taking a foreign event for its
		// own.
		inDoubt  map[isequencer.PLogOffset][][]byte
		inDoubtN int
	}
}

// Bounds of FencedWriter.mu.inDoubt: the encodings kept for one offset,
// and in all.
const (
	maxInDoubtPerOffset = 8
	maxInDoubt          = 4096
)

// NewFencedWriter validates o (after EnsureDefaults) and returns a
// FencedWriter.
func NewFencedWriter(o FencedWriterOptions) (*FencedWriter, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	w := &FencedWriter{o: o}
	w.ma = storage.CapabilitiesOf(o.Capabilities, o.Storage).MultiApplier
	return w, nil
}

// Epoch returns the writer's epoch.
func (w *FencedWriter) Epoch() uint64 { return w.o.Epoch }

// Partition returns the writer's partition.
func (w *FencedWriter) Partition() isequencer.PartitionID { return w.o.Partition }

// Stopped returns the error that stopped the writer (wrapping ErrFenced,
// ErrConflict or ErrCorrupt), or nil.
func (w *FencedWriter) Stopped() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mu.stopped
}

// WriteGroup implements GroupWriter. It writes each chunk of events with
// one conditional batch on its block, in order: the fence must hold the
// writer's epoch (or, in a block whose fence the writer has not seen yet,
// be absent, and is then written with the epoch), and every event row
// must be absent. Once a chunk's batch is applied, its records are
// written with one unconditional PutBatch; on a storage.MultiApplier
// (storage/boltdb, storage/mem), in the same transaction as the batch,
// with one ApplyBatchesIf. The first chunk that fails gives its error to
// each of its events; the later chunks are not written (ErrNotWritten).
//
// A chunk's errors:
//   - ErrFenced: the chunk's block is fenced with another epoch; nothing
//     of it is written. The writer is stopped: this and every later call
//     fail every event with that error.
//   - ErrOwnEventStored: the chunk's batch was refused, its block is
//     fenced with the writer's epoch, and every event stored at the
//     chunk's offsets is byte for byte one the writer sent at that offset
//     in a batch whose outcome was unknown (the writer keeps every such
//     encoding, within bounds, until a batch at or past the offset is
//     applied). Nothing is written; the writer is not stopped: the caller
//     re-reads the PLog and goes on after those events.
//   - ErrConflict: an event is already stored at one of the chunk's
//     offsets (in a block fenced with the writer's epoch, or in one with no
//     fence) and not every event there is one of the writer's in-doubt ones
//     (an encoding past the bounds counts as another's: the writer stops
//     rather than take a foreign event for its own). Nothing is
//     overwritten; the writer is stopped as for ErrFenced.
//   - ErrCorrupt: a fence value that is not 8 bytes; nothing of the chunk
//     is written; the writer is stopped.
//   - any other error (storage errors, wrapped; storage.ErrUnknownOutcome
//     among them) leaves the chunk's outcome unknown: its events may or
//     may not be stored (re-read the PLog before deciding). An error while
//     writing the records of an applied chunk says so; its events are
//     stored, its records may be partly stored. These errors do not stop
//     the writer.
func (w *FencedWriter) WriteGroup(ctx context.Context, events []*Event) error {
	if len(events) == 0 {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.stopped != nil {
		return allFailed(events, w.mu.stopped)
	}
	if err := w.encodeLocked(events); err != nil {
		return allFailed(events, err)
	}
	errs := make([]error, len(events))
	c := chunker{w.o.MaxChunkEvents, w.o.MaxChunkBytes}
	for from, to := range c.chunks(events, func(i int) int { return BatchBytes(events[i], len(w.enc(i))) }) {
		if err := w.writeChunkLocked(ctx, events[from:to], from); err != nil {
			for i := from; i < to; i++ {
				errs[i] = err
			}
			for i := to; i < len(events); i++ {
				errs[i] = notWritten(uint64(w.o.Partition), uint64(events[i].Offset), uint64(events[from].Offset), err)
			}
			break
		}
	}
	return groupResult(events, errs)
}

// encodeLocked checks events and encodes them into mu.buf.
func (w *FencedWriter) encodeLocked(events []*Event) error {
	part := w.o.Partition
	buf, ends := w.mu.buf[:0], w.mu.ends[:0]
	defer func() { w.mu.buf, w.mu.ends = buf, ends }()
	var first isequencer.PLogOffset
	for i, e := range events {
		if e == nil {
			return fmt.Errorf("plog: partition %d: %w: event %d of the group is nil", part, storage.ErrInvalidArgument, i)
		}
		if i == 0 {
			first = e.Offset
			if first == 0 {
				return fmt.Errorf("plog: partition %d: %w: event offset 0", part, storage.ErrInvalidArgument)
			}
		} else if uint64(e.Offset) != uint64(first)+uint64(i) {
			return fmt.Errorf("plog: partition %d: %w: event %d of the group has offset %d, want %d (offsets must be consecutive and ascending)",
				part, storage.ErrInvalidArgument, i, e.Offset, uint64(first)+uint64(i))
		}
		var err error
		if buf, err = AppendEncoded(buf, e); err != nil {
			return fmt.Errorf("plog: partition %d offset %d: %w: %w", part, e.Offset, storage.ErrInvalidArgument, err)
		}
		ends = append(ends, len(buf))
	}
	return nil
}

// enc returns event i's encoding.
func (w *FencedWriter) enc(i int) []byte {
	start := 0
	if i > 0 {
		start = w.mu.ends[i-1]
	}
	return w.mu.buf[start:w.mu.ends[i]:w.mu.ends[i]]
}

// writeChunkLocked writes chunk (events[at:at+len(chunk)] of the group),
// all in one block, then its records.
func (w *FencedWriter) writeChunkLocked(ctx context.Context, chunk []*Event, at int) error {
	part, epoch := w.o.Partition, w.o.Epoch
	first, last := chunk[0].Offset, chunk[len(chunk)-1].Offset
	block := uint64(first) >> loBits
	pKey := EventPKey(part, first)
	fenceCC, epochV := FenceCCols(), encodeEpoch(epoch)
	establish := !w.mu.hasFenced || w.mu.fencedBlock != block
	for {
		conds, rows := w.mu.conds[:0], w.mu.rows[:0]
		if establish {
			conds = append(conds, storage.Condition{CCols: fenceCC})
			rows = append(rows, storage.Row{PKey: pKey, CCols: fenceCC, Value: epochV})
		} else {
			conds = append(conds, storage.Condition{CCols: fenceCC, Expected: epochV})
		}
		for i, e := range chunk {
			cc := EventCCols(e.Offset)
			conds = append(conds, storage.Condition{CCols: cc})
			rows = append(rows, storage.Row{PKey: pKey, CCols: cc, Value: w.enc(at + i)})
		}
		w.mu.conds, w.mu.rows = conds, rows
		ok, withRecords, err := w.applyChunkLocked(ctx, chunk, pKey, conds, rows)
		if err != nil {
			w.keepInDoubtLocked(chunk, at)
			return fmt.Errorf("plog: partition %d offsets %d..%d (epoch %d): writing %d events: %w", part, first, last, epoch, len(chunk), err)
		}
		if ok {
			w.dropInDoubtLocked(last)
			w.mu.fencedBlock, w.mu.hasFenced = block, true
			if withRecords {
				return nil
			}
			break
		}
		fence, exists, err := ReadFence(ctx, w.o.Storage, part, first)
		switch {
		case errors.Is(err, ErrCorrupt):
			return w.stopLocked(err)
		case err != nil:
			return fmt.Errorf("plog: partition %d offsets %d..%d (epoch %d): the batch was not applied; %w", part, first, last, epoch, err)
		case exists && fence != epoch:
			return w.stopLocked(fmt.Errorf("%w: partition %d offsets %d..%d: block %d is fenced with epoch %d, this writer's is %d; nothing written",
				ErrFenced, part, first, last, block, fence, epoch))
		case exists && establish:
			// The fence already holds our epoch (Sweep set it, or an
			// earlier batch whose outcome was unknown applied): write
			// under it.
			w.mu.fencedBlock, w.mu.hasFenced = block, true
			establish = false
			continue
		}
		// Refused under our own fence or with none: read the offsets once,
		// to tell our own in-doubt events from anyone else's.
		stored, readErr := w.readEvents(ctx, chunk, pKey)
		if exists && readErr == nil && w.ownEventsLocked(chunk, stored) {
			// Under our own fence, the events found are the ones we
			// wrote in a batch whose outcome was unknown.
			w.mu.fencedBlock, w.mu.hasFenced = block, true
			return fmt.Errorf("%w: partition %d offsets %d..%d (epoch %d): the events found there are this writer's, from an earlier batch whose outcome was unknown; nothing written",
				ErrOwnEventStored, part, first, last, epoch)
		}
		return w.stopLocked(w.eventConflict(chunk, stored, readErr, exists))
	}
	recs := w.mu.recs[:0]
	for _, e := range chunk {
		recs = appendRecordRows(recs, e)
	}
	w.mu.recs = recs
	if err := putIdempotent(ctx, w.o.Storage, w.o.Versions, recs); err != nil {
		return fmt.Errorf("plog: partition %d offsets %d..%d: the events are stored; writing their %d records (retried): %w", part, first, last, len(recs), err)
	}
	return nil
}

// applyChunkLocked applies the chunk's conditional batch (conds, rows on
// pKey). On a storage.MultiApplier it writes the chunk's records in the
// same transaction, if the batch is applied (withRecords); else with
// ApplyBatchIf alone, the records left to the caller.
func (w *FencedWriter) applyChunkLocked(ctx context.Context, chunk []*Event, pKey []byte, conds []storage.Condition, rows []storage.Row) (ok, withRecords bool, err error) {
	ma := w.ma
	if ma == nil {
		ok, err = w.o.Storage.ApplyBatchIf(ctx, pKey, conds, rows)
		return ok, false, err
	}
	batches := []storage.CondBatch{{PKey: pKey, Conds: conds, Rows: rows}}
	var recs []storage.Row
	for _, e := range chunk {
		recs = appendRecordRows(recs, e)
	}
	slices.SortStableFunc(recs, func(a, b storage.Row) int { return bytes.Compare(a.PKey, b.PKey) })
	if err := w.o.Versions.Stamp(ctx, recs); err != nil {
		return false, true, err
	}
	for run := range partitionRuns(recs) {
		batches = append(batches, storage.CondBatch{PKey: run[0].PKey, Rows: run, Requires: []int{0}})
	}
	applied := make([]bool, len(batches))
	err = ma.ApplyBatchesIf(ctx, batches, applied)
	return applied[0], true, err
}

// keepInDoubtLocked adds the encoded events of chunk (events[at:]), whose
// batch's outcome is unknown, to those kept for their offsets: an encoding
// already kept is not added again, and none is added past the bounds
// (maxInDoubtPerOffset, maxInDoubt).
func (w *FencedWriter) keepInDoubtLocked(chunk []*Event, at int) {
	if w.mu.inDoubt == nil {
		w.mu.inDoubt = make(map[isequencer.PLogOffset][][]byte)
	}
	for i, e := range chunk {
		enc, kept := w.enc(at+i), w.mu.inDoubt[e.Offset]
		if len(kept) >= maxInDoubtPerOffset || w.mu.inDoubtN >= maxInDoubt ||
			slices.ContainsFunc(kept, func(k []byte) bool { return bytes.Equal(k, enc) }) {
			continue
		}
		w.mu.inDoubt[e.Offset] = append(kept, bytes.Clone(enc))
		w.mu.inDoubtN++
	}
}

// dropInDoubtLocked forgets the in-doubt encodings at offsets at or below
// last: a batch up to last was applied, so those offsets are settled.
func (w *FencedWriter) dropInDoubtLocked(last isequencer.PLogOffset) {
	for off, kept := range w.mu.inDoubt {
		if off <= last {
			w.mu.inDoubtN -= len(kept)
			delete(w.mu.inDoubt, off)
		}
	}
}

// readEvents reads the events stored at chunk's offsets.
func (w *FencedWriter) readEvents(ctx context.Context, chunk []*Event, pKey []byte) ([]storage.GetItem, error) {
	items := make([]storage.GetItem, len(chunk))
	for i, e := range chunk {
		items[i].CCols = EventCCols(e.Offset)
	}
	return items, w.o.Storage.GetBatch(ctx, pKey, items)
}

// ownEventsLocked reports whether every event stored (read by readEvents
// at chunk's offsets; at least one) is, byte for byte, one of the in-doubt
// encodings kept for its offset: one this writer sent there in a batch
// whose outcome was unknown.
func (w *FencedWriter) ownEventsLocked(chunk []*Event, stored []storage.GetItem) bool {
	found := false
	for i, it := range stored {
		if !it.Ok {
			continue
		}
		mine := func(k []byte) bool { return bytes.Equal(k, it.Value) }
		if !slices.ContainsFunc(w.mu.inDoubt[chunk[i].Offset], mine) {
			return false
		}
		found = true
	}
	return found
}

// eventConflict names the offsets of chunk that hold an event (stored, as
// read by readEvents, unless that read failed with readErr).
func (w *FencedWriter) eventConflict(chunk []*Event, stored []storage.GetItem, readErr error, fenced bool) error {
	var taken string
	if readErr == nil {
		var offs []isequencer.PLogOffset
		for i, it := range stored {
			if it.Ok {
				offs = append(offs, chunk[i].Offset)
			}
		}
		taken = fmt.Sprintf("offsets %v", offs)
	} else {
		taken = fmt.Sprintf("offsets not known (re-reading them: %v)", readErr)
	}
	fence := fmt.Sprintf("fenced with this writer's epoch %d", w.o.Epoch)
	if !fenced {
		fence = "with no fence"
	}
	return fmt.Errorf("%w: partition %d offsets %d..%d: events already stored at %s, in a block %s; nothing written, nothing overwritten",
		ErrConflict, w.o.Partition, chunk[0].Offset, chunk[len(chunk)-1].Offset, taken, fence)
}

func (w *FencedWriter) stopLocked(err error) error {
	w.mu.stopped = err
	return err
}

func encodeEpoch(epoch uint64) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), epoch)
}

// ReadFence reads the fence of the block holding offset off of partition
// part: the epoch stored, and whether a fence exists. A value that is not
// 8 bytes is an error wrapping ErrCorrupt.
func ReadFence(ctx context.Context, st storage.Storage, part isequencer.PartitionID, off isequencer.PLogOffset) (epoch uint64, ok bool, err error) {
	v, ok, err := st.Get(ctx, EventPKey(part, off), FenceCCols())
	if err != nil {
		return 0, false, fmt.Errorf("plog: partition %d: reading the fence of block %d: %w", part, uint64(off)>>loBits, err)
	}
	if !ok {
		return 0, false, nil
	}
	if len(v) != 8 {
		return 0, false, fmt.Errorf("%w: partition %d: the fence of block %d is %d bytes, want 8", ErrCorrupt, part, uint64(off)>>loBits, len(v))
	}
	return binary.BigEndian.Uint64(v), true, nil
}
