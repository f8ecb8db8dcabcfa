package plog

import (
	"context"
	"fmt"
	"iter"
	"slices"
)

// GroupWriter writes a partition's events in groups: *Writer (the trust
// modes) and *FencedWriter (fenced mode).
//
// WriteGroup stores events, which must have consecutive offsets in
// ascending order (e.Partition is ignored), each with its records. The
// group may be of any size; the writer splits it into chunks by the
// store's limits (the writer's MaxChunkEvents, MaxChunkBytes and the
// PLog blocks). It returns nil when every event is
// stored with its records; otherwise a *GroupError whose Errs[i] is event
// i's outcome:
//
//   - nil: stored, with its records.
//   - an error wrapping ErrNotWritten: not stored; this call did not send
//     the event, because an event before it failed first. It wraps that
//     failure too (so a ErrConflict or ErrFenced there reads as one here).
//     Test for ErrNotWritten before any other reading.
//   - an error wrapping ErrConflict or ErrFenced: refused, and the writer
//     is stopped (every later call fails every event with it). An event
//     refused with ErrFenced, or with ErrConflict because an event is
//     stored at its offset, is not stored; a trust0 event whose records
//     were refused (ErrRecordConflict, which wraps ErrConflict, naming
//     them) is stored without them.
//   - an error wrapping ErrOffsetTaken: a Writer's claim (a group of one
//     void gap marker, trust0 or trust1) found an event at its offset;
//     nothing is written and the writer is not stopped.
//   - an error wrapping storage.ErrInvalidArgument: the group is invalid
//     (a nil event, offset 0, offsets not consecutive, an event
//     AppendEncoded refuses); every event has it and nothing is written.
//   - any other error: the outcome is unknown: the event may or may not be
//     stored (storage.ErrUnknownOutcome among them; also FencedWriter's
//     ErrOwnEventStored, under which the events are stored by an earlier
//     call), its records may be partly stored. Re-read the PLog before
//     deciding.
//
// An event stored after one whose outcome is unknown is stored, but a
// reader of the PLog stops at the first missing offset.
type GroupWriter interface {
	WriteGroup(ctx context.Context, events []*Event) error
}

var (
	_ GroupWriter = (*Writer)(nil)
	_ GroupWriter = (*FencedWriter)(nil)
)

// NewGroupWriter returns the GroupWriter of o.Mode: in ModeFenced a
// FencedWriter of epoch (o's other fields carried over), else a Writer
// (epoch unused).
func NewGroupWriter(o WriterOptions, epoch uint64) (GroupWriter, error) {
	if o.Mode == ModeFenced {
		return NewFencedWriter(FencedWriterOptions{
			Storage: o.Storage, Capabilities: o.Capabilities, Partition: o.Partition, Epoch: epoch,
			MaxChunkEvents: o.MaxChunkEvents, MaxChunkBytes: o.MaxChunkBytes, Versions: o.Versions,
		})
	}
	return NewWriter(o)
}

// GroupError is a GroupWriter's error for a group not wholly stored.
type GroupError struct {
	// First and Last are the group's first and last offsets (0 for a nil
	// event).
	First, Last uint64
	// Errs holds each event's outcome, in the group's order (see
	// GroupWriter): nil for an event stored with its records.
	Errs []error
}

// Stored returns how many events, from the group's first, are stored with
// their records: the index of the first non-nil Errs.
func (e *GroupError) Stored() int {
	if i := slices.IndexFunc(e.Errs, func(err error) bool { return err != nil }); i >= 0 {
		return i
	}
	return len(e.Errs)
}

// Unwrap returns the first event's error that is not nil: the failure the
// others follow from (errors.Is(err, ErrFenced) on a group refused by its
// fence, and so on).
func (e *GroupError) Unwrap() error {
	if i := e.Stored(); i < len(e.Errs) {
		return e.Errs[i]
	}
	return nil
}

func (e *GroupError) Error() string {
	return fmt.Sprintf("plog: group at offsets %d..%d: the first %d of %d events stored, then: %v", e.First, e.Last, e.Stored(), len(e.Errs), e.Unwrap())
}

// allFailed is the *GroupError of events that all failed with err.
func allFailed(events []*Event, err error) error {
	errs := make([]error, len(events))
	for i := range errs {
		errs[i] = err
	}
	return groupResult(events, errs)
}

// groupResult returns nil if errs are all nil, else the *GroupError of
// events.
func groupResult(events []*Event, errs []error) error {
	if !slices.ContainsFunc(errs, func(err error) bool { return err != nil }) {
		return nil
	}
	ge := &GroupError{Errs: errs}
	if e := events[0]; e != nil {
		ge.First = uint64(e.Offset)
	}
	if e := events[len(events)-1]; e != nil {
		ge.Last = uint64(e.Offset)
	}
	return ge
}

// notWritten is the error of event e of partition part, not sent because
// the event at offset failedAt failed with cause.
func notWritten(part, e, failedAt uint64, cause error) error {
	return fmt.Errorf("%w: partition %d offset %d: after offset %d failed: %w", ErrNotWritten, part, e, failedAt, cause)
}

// BatchBytes is what event e, encoded in encLen bytes (AppendEncoded), and its records add
// to a batch as Cassandra measures one against batch_size_fail_threshold
// (the data size of its rows: clustering, liveness timestamp, and each
// cell's value and timestamp; partition keys are not counted): the event
// row and one row per record (an 8-byte ID and an 8-byte offset). The
// records count even where they go in a batch of their own, so a chunk's
// batches are never larger than the sum over its events, plus, in fenced
// mode, the fence row and its condition (a few dozen bytes). Every chunk
// near the cap is above Cassandra's batch_size_warn_threshold (5 KiB):
// the node logs a warning for it, by design.
func BatchBytes(e *Event, encLen int) int {
	const row = 8 + 8 + 8 // clustering, liveness timestamp, cell timestamp
	return encLen + row + len(e.Records)*(row+8)
}

// Defaults of WriterOptions' and FencedWriterOptions' caps of a chunk.
const (
	// DefaultMaxChunkEvents caps the events of one chunk high enough that
	// DefaultMaxChunkBytes binds first for every event that adds at least
	// 32 bytes to a batch (every event does: BatchBytes): the byte cap is
	// the store's limit, the events cap only bounds the rows of one batch.
	DefaultMaxChunkEvents = 1024
	// DefaultMaxChunkBytes keeps one batch (BatchBytes) well below
	// Cassandra's default batch_size_fail_threshold of 50 KiB.
	DefaultMaxChunkBytes = 32 << 10
)

// chunker splits groups by a writer's MaxChunkEvents and MaxChunkBytes.
type chunker struct{ maxEvents, maxBytes int }

// defaultCaps sets a writer's zero chunk caps to their defaults.
func defaultCaps(maxEvents, maxBytes *int) {
	if *maxEvents == 0 {
		*maxEvents = DefaultMaxChunkEvents
	}
	if *maxBytes == 0 {
		*maxBytes = DefaultMaxChunkBytes
	}
}

// validateCaps reports every problem of a writer's MaxChunkEvents and
// MaxChunkBytes.
func validateCaps(maxEvents, maxBytes int) []error {
	var errs []error
	if maxEvents < 1 {
		errs = append(errs, fmt.Errorf("%w: MaxChunkEvents %d, must be >= 1", ErrInvalidOptions, maxEvents))
	}
	if maxBytes < 1 {
		errs = append(errs, fmt.Errorf("%w: MaxChunkBytes %d, must be >= 1", ErrInvalidOptions, maxBytes))
	}
	return errs
}

// chunks yields the [from, to) ranges of a group of events whose event i
// adds size(i) bytes to a batch (BatchBytes), in order: each at least one
// event, all in one PLog block, at most maxEvents events and, unless one
// event alone, at most maxBytes. Both writers split every group with it.
func (o chunker) chunks(events []*Event, size func(i int) int) iter.Seq2[int, int] {
	return func(yield func(int, int) bool) {
		for i := 0; i < len(events); {
			block := uint64(events[i].Offset) >> loBits
			bytes := size(i)
			j := i + 1
			for ; j < len(events) && j-i < o.maxEvents && uint64(events[j].Offset)>>loBits == block; j++ {
				if bytes += size(j); bytes > o.maxBytes {
					break
				}
			}
			if !yield(i, j) {
				return
			}
			i = j
		}
	}
}
