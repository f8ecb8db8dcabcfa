// Package plog is an application partition's event log (PLog) over the
// storage contract: the key layout, a versioned binary event encoding, a
// paged reader, a writer whose write mode follows the sequences trust
// level, and a fenced group writer with its takeover sweep.
//
// Key layouts (all integers big-endian). The event and record keys are
// those of the reference platform (Voedger's SysView_PLog and
// SysView_Records); the values are cqlseq's own: Voedger stores its codec's
// event in a PLog row (read by plog/voedger) and the whole record in a
// Records row, where cqlseq stores only the creating event's offset:
//
//	event:   pKey = u16 PLogView (20) ‖ u16 PartitionID ‖ u64 (offset >> 12)
//	         cCols = u16 (offset & 0xFFF)
//	         value = the FormatV1 encoding of the event
//	record:  pKey = u16 RecordsView (19) ‖ u64 WSID ‖ u64 (recordID >> 12)
//	         cCols = u16 (recordID & 0xFFF)
//	         value = u64 PLog offset of the event that created the record
//	fence:   pKey = the event pKey of the block (fenced mode)
//	         cCols = u16 FenceCC (0xFFFF)
//	         value = u64 epoch of the owner allowed to write the block
//
// One storage partition holds 4,096 consecutive events (or record IDs), so
// a PLog tail is read a partition at a time and no storage partition grows
// without bound. The keys carry no application ID: as in the reference
// platform, each application's PLog and records live in that application's
// own storage (its own keyspace), while the sequencer's state (vvmadapter)
// lives in the shared one and is keyed by application.
//
// Fenced mode: each PLog block (the storage partition of
// EventsPerPartition offsets) holds a fence row whose value is the epoch
// of the one owner allowed to write events into it. A FencedWriter writes
// a group of events with one conditional batch on the block: the fence
// must hold its epoch (or be absent, and is then written with it) and
// every event row must be absent. A takeover raises the partition's epoch
// and runs Sweep, which fences every block a deposed owner could still
// write to, so that the deposed owner's later groups are refused
// (ErrFenced). Safety does not depend on timing. This package holds the
// PLog's part of fencing (the fence rows, FencedWriter, Sweep); the
// ownership epoch and the number cells are vvmadapter's, the
// takeover that runs them in order is apppart's. A partition may change
// modes between opens (a non-fenced writer ignores the fence rows);
// fenced and non-fenced writers of one partition at the same time are not
// supported.
package plog

import (
	"encoding/binary"

	"github.com/cqlseq/cqlseq/isequencer"
)

// View IDs: the first two bytes of every partition key. They are the
// reference platform's system view IDs (SysView_Records = 19,
// SysView_PLog = 20) and are persisted: never change them.
const (
	RecordsView uint16 = 19
	PLogView    uint16 = 20
)

// Partitioning of offsets and record IDs: the low 12 bits are the
// clustering key, the rest go into the partition key.
const (
	loBits = 12
	loMask = 1<<loBits - 1

	// EventsPerPartition is the number of consecutive offsets (or record
	// IDs) one storage partition holds.
	EventsPerPartition = 1 << loBits
)

// FenceCC is the clustering key of a PLog block's fence row; event
// clustering keys are 0x0000..0x0FFF. Persisted: never change it.
const FenceCC uint16 = 0xFFFF

// FenceCCols returns the clustering key of a block's fence row.
func FenceCCols() []byte { return binary.BigEndian.AppendUint16(make([]byte, 0, 2), FenceCC) }

// eventsEnd returns the exclusive upper bound of event clustering keys.
func eventsEnd() []byte { return binary.BigEndian.AppendUint16(make([]byte, 0, 2), EventsPerPartition) }

// EventPKey returns the partition key of the storage partition that holds
// offset off of PLog partition part.
func EventPKey(part isequencer.PartitionID, off isequencer.PLogOffset) []byte {
	return appendEventPKey(make([]byte, 0, 12), part, uint64(off)>>loBits)
}

func appendEventPKey(b []byte, part isequencer.PartitionID, hi uint64) []byte {
	b = binary.BigEndian.AppendUint16(b, PLogView)
	b = binary.BigEndian.AppendUint16(b, uint16(part))
	return binary.BigEndian.AppendUint64(b, hi)
}

// EventCCols returns the clustering key of offset off.
func EventCCols(off isequencer.PLogOffset) []byte {
	return binary.BigEndian.AppendUint16(make([]byte, 0, 2), uint16(uint64(off)&loMask))
}

// RecordPKey returns the partition key of the storage partition that holds
// record id of workspace ws.
func RecordPKey(ws isequencer.WSID, id RecordID) []byte {
	b := make([]byte, 0, 18)
	b = binary.BigEndian.AppendUint16(b, RecordsView)
	b = binary.BigEndian.AppendUint64(b, uint64(ws))
	return binary.BigEndian.AppendUint64(b, uint64(id)>>loBits)
}

// RecordCCols returns the clustering key of record id.
func RecordCCols(id RecordID) []byte {
	return binary.BigEndian.AppendUint16(make([]byte, 0, 2), uint16(uint64(id)&loMask))
}

// RecordValue is the stored value of a record row: the PLog offset of the
// event that created it.
func RecordValue(off isequencer.PLogOffset) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), uint64(off))
}
