package vvmadapter

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/storage"
)

// Floor is a partition's least last number of one sequence: in every
// workspace of the partition, the number of SeqID reads as at least
// Number (GetNumbersMax applies no floor: seqstorage does), so no number
// up to Number is handed out again. `cqlseq advance` raises the floors
// after a restore, past the numbers handed out before it.
type Floor struct {
	SeqID  isequencer.SeqID
	Number isequencer.Number
}

// floorBytes is the size of one encoded Floor: u16 SeqID ‖ u64 Number.
const floorBytes = 10

// EncodeFloors returns the value of a floors row: floors by ascending
// SeqID, one per SeqID (the largest, if floors repeats one).
func EncodeFloors(floors []Floor) []byte {
	f := slices.Clone(floors)
	slices.SortFunc(f, func(x, y Floor) int {
		return cmp.Or(cmp.Compare(x.SeqID, y.SeqID), cmp.Compare(y.Number, x.Number))
	})
	f = slices.CompactFunc(f, func(x, y Floor) bool { return x.SeqID == y.SeqID })
	b := make([]byte, 0, len(f)*floorBytes)
	for _, x := range f {
		b = binary.BigEndian.AppendUint16(b, uint16(x.SeqID))
		b = binary.BigEndian.AppendUint64(b, uint64(x.Number))
	}
	return b
}

// DecodeFloors decodes a floors row; what names the row in the error.
func DecodeFloors(b []byte, what string) ([]Floor, error) {
	if len(b)%floorBytes != 0 {
		return nil, fmt.Errorf("vvmadapter: %s: value is %d bytes, not a multiple of %d", what, len(b), floorBytes)
	}
	f := make([]Floor, 0, len(b)/floorBytes)
	for i := 0; i < len(b); i += floorBytes {
		x := Floor{SeqID: isequencer.SeqID(binary.BigEndian.Uint16(b[i:])), Number: isequencer.Number(binary.BigEndian.Uint64(b[i+2:]))}
		if k := len(f); k > 0 && f[k-1].SeqID >= x.SeqID {
			return nil, fmt.Errorf("vvmadapter: %s: SeqID %d after %d (want ascending)", what, x.SeqID, f[k-1].SeqID)
		}
		f = append(f, x)
	}
	return f, nil
}

// GetFloors reads a partition's number floors (none stored: nil).
func (a *Adapter) GetFloors(ctx context.Context, part isequencer.PartitionID) ([]Floor, error) {
	b, ok, err := a.st.Get(ctx, PartKey(a.app, part), PartCCols(FloorsCC))
	if err != nil {
		return nil, fmt.Errorf("vvmadapter: reading the number floors of partition %d: %w", part, err)
	}
	if !ok {
		return nil, nil
	}
	return DecodeFloors(b, fmt.Sprintf("number floors of partition %d", part))
}

// PutFloors writes the partition's number floors, replacing those stored:
// give every floor to keep. The caller raises them only (Advance reads
// the stored ones first).
func (o *Owner) PutFloors(ctx context.Context, floors []Floor) error {
	rows := []storage.Row{{PKey: PartKey(o.a.app, o.part), CCols: PartCCols(FloorsCC), Value: EncodeFloors(floors)}}
	if err := o.versions.Stamp(ctx, rows); err != nil {
		return err
	}
	if err := o.a.st.PutBatch(ctx, rows); err != nil {
		return fmt.Errorf("vvmadapter: owner of partition %d (epoch %d): writing %d number floors: %w", o.part, o.Epoch(), len(floors), err)
	}
	return nil
}
