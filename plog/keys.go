// Package plog is an application partition's event log (PLog) over the
// storage contract: the key layout, a versioned binary event encoding, a
// paged reader and a writer whose write mode follows the sequences trust
// level.
//
// Key layouts (all integers big-endian), those of the reference platform:
//
//	event:   pKey = u16 PLogView (20) ‖ u16 PartitionID ‖ u64 (offset >> 12)
//	         cCols = u16 (offset & 0xFFF)
//	record:  pKey = u16 RecordsView (19) ‖ u64 WSID ‖ u64 (recordID >> 12)
//	         cCols = u16 (recordID & 0xFFF)
//	         value = u64 PLog offset of the event that created the record
//
// One storage partition holds 4,096 consecutive events (or record IDs), so
// a PLog tail is read a partition at a time and no storage partition grows
// without bound. The keys carry no application ID: as in the reference
// platform, each application's PLog and records live in that application's
// own storage (its own keyspace), while the sequencer's state (vvmadapter)
// lives in the shared one and is keyed by application.
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
