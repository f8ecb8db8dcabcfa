package orchestration

import (
	"fmt"
	"math"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/storage"
)

// SlotPartitions returns, in ascending order, the partitions owned by slot
// (1..numVVM) when numPartitions partitions (IDs 0..numPartitions-1) are
// spread over numVVM slots: partition p belongs to slot p%numVVM + 1.
func SlotPartitions(slot, numVVM uint32, numPartitions int) ([]isequencer.PartitionID, error) {
	if err := checkSlot(slot, numVVM); err != nil {
		return nil, err
	}
	if numPartitions < 0 || numPartitions > math.MaxUint16+1 {
		return nil, fmt.Errorf("orchestration: %w: %d partitions, want 0..%d", storage.ErrInvalidArgument, numPartitions, math.MaxUint16+1)
	}
	var out []isequencer.PartitionID
	for p := int(slot - 1); p < numPartitions; p += int(numVVM) {
		out = append(out, isequencer.PartitionID(p))
	}
	return out, nil
}

// PartitionSlot returns the slot that owns partition p among numVVM slots.
func PartitionSlot(p isequencer.PartitionID, numVVM uint32) (uint32, error) {
	if numVVM == 0 {
		return 0, fmt.Errorf("orchestration: %w: NumVVM is 0", storage.ErrInvalidArgument)
	}
	return uint32(p)%numVVM + 1, nil
}

func checkSlot(slot, numVVM uint32) error {
	if numVVM == 0 {
		return fmt.Errorf("orchestration: %w: NumVVM is 0", storage.ErrInvalidArgument)
	}
	if slot < 1 || slot > numVVM {
		return fmt.Errorf("orchestration: %w: slot %d outside [1, %d]", storage.ErrInvalidArgument, slot, numVVM)
	}
	return nil
}
