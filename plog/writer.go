package plog

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/storage"
)

// WriterOptions configure a Writer.
type WriterOptions struct {
	// Storage holds the PLog and the records. Required.
	Storage storage.Storage
	// Capabilities are Storage's (storage.Probe), found once by the caller
	// that builds every user of Storage. A MultiApplier among them writes
	// each chunk of a group's events and records with one call. nil:
	// NewWriter probes Storage itself.
	Capabilities *storage.Capabilities
	// Partition is the PLog partition written.
	Partition isequencer.PartitionID
	// MaxChunkEvents and MaxChunkBytes cap a chunk of a group (see
	// GroupWriter): its events, and their encoded bytes (an event larger
	// than the cap is a chunk alone). Defaults DefaultMaxChunkEvents and
	// DefaultMaxChunkBytes.
	MaxChunkEvents, MaxChunkBytes int
	// Mode selects insert-if-not-exists or put for events and records.
	// The zero value is ModeTrust0. ModeFenced is FencedWriter's.
	Mode Mode
	// Versions are the owner's write versions (storage.Versions of the
	// epoch its Open took): every unconditional write of events and
	// records (ModeTrust2's events, ModeTrust1's and ModeTrust2's records)
	// carries one, so that a deposed owner's late write never replaces a
	// later owner's, whatever the clocks say, and a Paxos round completing
	// an abandoned conditional write never replaces a versioned row. nil:
	// unversioned writes (a store with no other owner).
	Versions *storage.Versions
}

// EnsureDefaults sets zero fields to their defaults.
func (o *WriterOptions) EnsureDefaults() {
	defaultCaps(&o.MaxChunkEvents, &o.MaxChunkBytes)
}

// Validate reports every problem of o at once. Call it after
// EnsureDefaults.
func (o *WriterOptions) Validate() error {
	errs := validateCaps(o.MaxChunkEvents, o.MaxChunkBytes)
	if o.Storage == nil {
		errs = append(errs, fmt.Errorf("%w: Storage is nil", ErrInvalidOptions))
	}
	if err := o.Mode.Validate(); err != nil {
		errs = append(errs, err)
	} else if o.Mode == ModeFenced {
		errs = append(errs, fmt.Errorf("%w: mode %v writes groups under a fence: use NewFencedWriter", ErrInvalidOptions, o.Mode))
	}
	return errors.Join(errs...)
}

// Writer writes one partition's events and the records they create, in its
// Mode. Safe for concurrent use; writes are serialised.
type Writer struct {
	o  WriterOptions
	ma storage.MultiApplier // o.Capabilities'; nil if none
	mu struct {
		sync.Mutex
		stopped error
	}
}

// NewWriter validates o (after EnsureDefaults) and returns a Writer.
func NewWriter(o WriterOptions) (*Writer, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	w := &Writer{o: o}
	w.ma = storage.CapabilitiesOf(o.Capabilities, o.Storage).MultiApplier
	return w, nil
}

func (w *Writer) chunker() chunker { return chunker{w.o.MaxChunkEvents, w.o.MaxChunkBytes} }

// Mode returns the writer's mode.
func (w *Writer) Mode() Mode { return w.o.Mode }

// Partition returns the writer's partition.
func (w *Writer) Partition() isequencer.PartitionID { return w.o.Partition }

// Stopped returns the conflict that stopped the writer (wrapping
// ErrConflict), or nil.
func (w *Writer) Stopped() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mu.stopped
}

// Write stores e at e.Offset of the writer's partition (e.Partition is
// ignored), then a record row for each of e.Records: WriteGroup of the one
// event, whose error it returns (see GroupWriter), as the Mode says:
//
//   - ModeTrust0: the event, then each record partition's rows, are
//     inserted only if absent. An existing row is an error wrapping
//     ErrConflict naming it; nothing is overwritten, and the writer is
//     stopped: this and every later Write return that error.
//   - ModeTrust1: the event as in ModeTrust0, the records with one put.
//   - ModeTrust2: the event and the records with one put, overwriting.
//
// Errors: ErrConflict (see above); an invalid event (offset 0, WSID 0,
// number 0, record ID 0) wraps storage.ErrInvalidArgument; storage errors
// are wrapped as they are (storage.ErrUnknownOutcome means the event may or
// may not be stored: re-read the PLog before deciding). When Write returns
// an error other than ErrConflict, the event may or may not be stored; the
// records may be partly stored.
func (w *Writer) Write(ctx context.Context, e *Event) error {
	err := w.WriteGroup(ctx, []*Event{e})
	if ge := (*GroupError)(nil); errors.As(err, &ge) {
		return ge.Errs[0]
	}
	return err
}

// appendRecordRows appends e's record rows to rows, sorted by partition
// key (records of one event usually share one).
func appendRecordRows(rows []storage.Row, e *Event) []storage.Row {
	if len(e.Records) == 0 {
		return rows
	}
	value := RecordValue(e.Offset)
	first := len(rows)
	for _, id := range e.Records {
		rows = append(rows, storage.Row{PKey: RecordPKey(e.WSID, id), CCols: RecordCCols(id), Value: value})
	}
	slices.SortStableFunc(rows[first:], func(a, b storage.Row) int { return bytes.Compare(a.PKey, b.PKey) })
	return rows
}

// conflictAt is the error of an event refused because one is stored at
// its offset.
func (w *Writer) conflictAt(off isequencer.PLogOffset) error {
	return fmt.Errorf("%w: partition %d offset %d: an event is already stored at this offset (mode %v); not overwritten", ErrConflict, w.o.Partition, off, w.o.Mode)
}

// partitionRuns yields the runs of rows that share a partition key, in
// order (rows sorted by it, as appendRecordRows leaves an event's), each
// with its capacity clipped.
func partitionRuns(rows []storage.Row) iter.Seq[[]storage.Row] {
	return func(yield func([]storage.Row) bool) {
		for len(rows) > 0 {
			n := 1
			for n < len(rows) && bytes.Equal(rows[n].PKey, rows[0].PKey) {
				n++
			}
			if !yield(rows[:n:n]) {
				return
			}
			rows = rows[n:]
		}
	}
}

// absent returns the conditions that rows do not exist.
func absent(rows []storage.Row) []storage.Condition {
	conds := make([]storage.Condition, len(rows))
	for i, r := range rows {
		conds[i] = storage.Condition{CCols: r.CCols}
	}
	return conds
}

// recordConflict names the records of group that exist, as far as a
// re-read can tell.
func (w *Writer) recordConflict(ctx context.Context, e *Event, group []storage.Row) error {
	items := make([]storage.GetItem, len(group))
	for i, r := range group {
		items[i].CCols = r.CCols
	}
	var taken []RecordID
	if err := w.o.Storage.GetBatch(ctx, group[0].PKey, items); err == nil {
		hi := binary.BigEndian.Uint64(group[0].PKey[len(group[0].PKey)-8:])
		for _, it := range items {
			if it.Ok {
				taken = append(taken, RecordID(hi<<loBits|uint64(binary.BigEndian.Uint16(it.CCols))))
			}
		}
	}
	return fmt.Errorf("%w: partition %d offset %d: WSID %d: records already stored %v (of %d in the batch; mode %v); not overwritten; the event at this offset is stored",
		ErrRecordConflict, w.o.Partition, e.Offset, e.WSID, taken, len(group), w.o.Mode)
}
