package voedger

import (
	"encoding/binary"

	"github.com/cqlseq/cqlseq/isequencer"
)

// PLogView is Voedger's SysView_PLog, the first two bytes of every PLog
// partition key. Persisted by Voedger: never change it.
const PLogView uint16 = 20

// Offsets are split as Voedger splits them: the low 12 bits are the
// clustering key, the rest goes into the partition key.
const (
	loBits = 12
	loMask = 1<<loBits - 1

	// EventsPerBlock is the number of consecutive offsets one storage
	// partition (block) of a Voedger PLog holds.
	EventsPerBlock = 1 << loBits
)

// EventPKey returns the partition key of the block that holds offset off
// of PLog partition part.
func EventPKey(part isequencer.PartitionID, off isequencer.PLogOffset) []byte {
	return appendBlockKey(make([]byte, 0, 12), part, uint64(off)>>loBits)
}

func appendBlockKey(b []byte, part isequencer.PartitionID, block uint64) []byte {
	b = binary.BigEndian.AppendUint16(b, PLogView)
	b = binary.BigEndian.AppendUint16(b, uint16(part))
	return binary.BigEndian.AppendUint64(b, block)
}

// EventCCols returns the clustering key of offset off.
func EventCCols(off isequencer.PLogOffset) []byte {
	return binary.BigEndian.AppendUint16(make([]byte, 0, 2), uint16(uint64(off)&loMask))
}
