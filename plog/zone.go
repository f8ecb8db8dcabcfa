package plog

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/storage"
)

// ZoneOptions configure SealZone.
type ZoneOptions struct {
	// Storage holds the PLog. Required.
	Storage storage.Storage
	// Partition is the PLog partition.
	Partition isequencer.PartitionID
	// At is where the new owner's replay of the PLog ended (the first
	// offset it found empty); From where it began (the stored next offset).
	At, From isequencer.PLogOffset
	// Versioned: an earlier owner may have written PLog rows with
	// versioned puts that may still land (vvmadapter.PLogWritesVersioned).
	// Versions are the new owner's; required with Versioned.
	Versioned bool
	Versions  *storage.Versions
}

// ErrZoneTaken: SealZone's conditional marker found an event stored at
// its offset (an earlier owner's write landed after the replay): nothing
// was written; replay again and seal at the new end.
var ErrZoneTaken = fmt.Errorf("%w: the zone's offset holds an event", ErrOffsetTaken)

// ZoneMarker returns the void gap marker SealZone writes at offset at: it
// covers at and every later offset of at's PLog block (and the whole next
// block when at is its block's last offset), so that the new owner's first
// event is the first offset of a block no earlier owner wrote to.
func ZoneMarker(part isequencer.PartitionID, at isequencer.PLogOffset) *Event {
	skip := uint64(EventsPerPartition-1) - uint64(at)&loMask
	if skip == 0 {
		skip = EventsPerPartition
	}
	return &Event{Partition: part, Offset: at, Skip: skip, Void: true}
}

// SealZone makes the PLog block where a new owner's replay ended (o.At)
// safe from every earlier owner's late write, before the new owner writes
// its first event (docs/design.md "Late writes"). Every write an earlier
// owner sent lies in a block at or before o.At's, and at or after the
// first offset it did not know stored, which is at most o.At: a group is
// written only after every offset before it is durable, and never crosses
// a block. SealZone writes ZoneMarker(o.At): readers skip the rest of the
// block, and the new owner writes from the next one.
//
// With o.Versioned, the marker is a versioned put, which a late versioned
// write of an earlier owner (a lower version) cannot replace; and the
// rows the replay read in o.At's block and the block before it (from
// o.From on) are written again, the same bytes, with the new owner's
// version, so that no late write replaces what the replay read either.
// Without it, the marker is inserted only if the offset is empty (a late
// conditional write then never lands there); if an event is there,
// SealZone returns ErrZoneTaken. A versioned put that fails is sent again,
// the same bytes, until it is stored or ctx ends. It returns the offset
// after the marker: the new owner's first.
func SealZone(ctx context.Context, o ZoneOptions) (isequencer.PLogOffset, error) {
	if o.Storage == nil || o.At == 0 || (o.Versioned && o.Versions == nil) {
		return 0, fmt.Errorf("%w: SealZone: Storage %v, At %d, Versioned %v with Versions %v", ErrInvalidOptions, o.Storage != nil, o.At, o.Versioned, o.Versions != nil)
	}
	m := ZoneMarker(o.Partition, o.At)
	enc, err := AppendEncoded(nil, m)
	if err != nil {
		return 0, err
	}
	pKey, cc := EventPKey(o.Partition, m.Offset), EventCCols(m.Offset)
	if !o.Versioned {
		ok, err := o.Storage.InsertIfNotExists(ctx, pKey, cc, enc, 0)
		switch {
		case err != nil:
			return 0, fmt.Errorf("plog: partition %d: sealing the zone at offset %d: %w", o.Partition, m.Offset, err)
		case !ok:
			return 0, fmt.Errorf("%w: partition %d offset %d", ErrZoneTaken, o.Partition, m.Offset)
		}
		return m.NextOffset(), nil
	}
	rows, err := readRange(ctx, o.Storage, o.Partition, max(o.From, blockStart(o.At)-min(blockStart(o.At), EventsPerPartition), 1), o.At)
	if err != nil {
		return 0, fmt.Errorf("plog: partition %d: sealing the zone at offset %d: reading the rows to write again: %w", o.Partition, m.Offset, err)
	}
	rows = append(rows, storage.Row{PKey: pKey, CCols: cc, Value: enc})
	if err := PutVersioned(ctx, o.Storage, o.Versions, rows); err != nil {
		return 0, fmt.Errorf("plog: partition %d: sealing the zone at offset %d (%d rows written again): %w", o.Partition, m.Offset, len(rows)-1, err)
	}
	return m.NextOffset(), nil
}

// blockStart is the first offset of off's PLog block.
func blockStart(off isequencer.PLogOffset) isequencer.PLogOffset { return off &^ loMask }

// readRange returns the event rows (gap markers included) stored at
// offsets from..to-1 of partition part, as stored.
func readRange(ctx context.Context, st storage.Storage, part isequencer.PartitionID, from, to isequencer.PLogOffset) ([]storage.Row, error) {
	var rows []storage.Row
	for b := blockStart(from); b < to; b += EventsPerPartition {
		lo, hi := max(from, b), min(to, b+EventsPerPartition)
		pKey := EventPKey(part, b)
		err := st.Read(ctx, pKey, EventCCols(lo), eventsEndOf(hi, b), func(cCols, value []byte) error {
			if len(cCols) != 2 {
				return fmt.Errorf("%w: partition %d: clustering key %x is not 2 bytes", ErrCorrupt, part, cCols)
			}
			rows = append(rows, storage.Row{PKey: pKey, CCols: bytes.Clone(cCols), Value: bytes.Clone(value)})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// eventsEndOf is the exclusive clustering bound of offsets below hi in the
// block starting at b.
func eventsEndOf(hi, b isequencer.PLogOffset) []byte {
	return binary.BigEndian.AppendUint16(nil, uint16(hi-b))
}

// PutVersioned writes rows with one PutBatch stamped with one new version
// of v, and, if it fails, sends the same rows again, each time with a new
// version, backing off from putFirstDelay to a second, until one is
// stored or ctx ends (then it returns the last error). Rows of the PLog
// written this way (trust2's events, gap markers) carry the same bytes in
// every attempt: whichever attempt lands last, the row holds them.
func PutVersioned(ctx context.Context, st storage.Storage, v *storage.Versions, rows []storage.Row) error {
	delay := putFirstDelay
	for {
		err := v.Stamp(ctx, rows)
		if errors.Is(err, storage.ErrVersionsExhausted) {
			return err // deposed: no version of this owner is left
		}
		if err == nil {
			if err = st.PutBatch(ctx, rows); err == nil {
				return nil
			}
		}
		if !pause(ctx, &delay) {
			return err
		}
	}
}

// NewMarkerWriter returns a GroupWriter that writes gap markers with
// PutVersioned under versions, in every mode: the writer of `cqlseq
// advance`'s marker, which no earlier owner's late write may replace. As
// SealZone after a versioned writer, it writes again, the same bytes, in
// the same PutVersioned, the rows stored in the first marker's block and
// the block before it, below the marker: what the replay before it read
// there may be a late write that landed after an earlier run's marker was
// sent, and that marker, held, must not replace it when it lands. It
// refuses (storage.ErrInvalidArgument) an event that is not a gap marker.
func NewMarkerWriter(st storage.Storage, part isequencer.PartitionID, versions *storage.Versions) GroupWriter {
	return markerWriter{st: st, part: part, v: versions}
}

type markerWriter struct {
	st   storage.Storage
	part isequencer.PartitionID
	v    *storage.Versions
}

func (w markerWriter) WriteGroup(ctx context.Context, events []*Event) error {
	rows := make([]storage.Row, 0, len(events))
	for _, e := range events {
		if e == nil || e.Skip == 0 {
			return allFailed(events, fmt.Errorf("plog: partition %d: %w: the marker writer writes gap markers only", w.part, storage.ErrInvalidArgument))
		}
		enc, err := AppendEncoded(nil, e)
		if err != nil {
			return allFailed(events, fmt.Errorf("plog: partition %d offset %d: %w: %w", w.part, e.Offset, storage.ErrInvalidArgument, err))
		}
		rows = append(rows, storage.Row{PKey: EventPKey(w.part, e.Offset), CCols: EventCCols(e.Offset), Value: enc})
	}
	if len(events) > 0 {
		at := events[0].Offset
		read, err := readRange(ctx, w.st, w.part, max(blockStart(at)-min(blockStart(at), EventsPerPartition), 1), at)
		if err != nil {
			return allFailed(events, fmt.Errorf("plog: partition %d: reading the rows below the gap marker at %d to write again: %w", w.part, at, err))
		}
		rows = append(read, rows...)
	}
	if err := PutVersioned(ctx, w.st, w.v, rows); err != nil {
		return allFailed(events, fmt.Errorf("plog: partition %d: writing %d gap markers: %w", w.part, len(events), err))
	}
	return nil
}
