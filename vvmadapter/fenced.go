package vvmadapter

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/storage"
)

// MaxNextEpochTries bounds NextEpoch's attempts (lost races and unknown
// outcomes).
const MaxNextEpochTries = 100

// ErrEpochContended: NextEpoch lost MaxNextEpochTries races in a row.
var ErrEpochContended = errors.New("vvmadapter: partition epoch contended")

// WSEpochCCols returns the clustering key of sequence id's number cell of
// epoch in its workspace: u16 SeqID ‖ u64 epoch.
func WSEpochCCols(id isequencer.SeqID, epoch uint64) []byte {
	b := make([]byte, 0, 10)
	b = binary.BigEndian.AppendUint16(b, uint16(id))
	return binary.BigEndian.AppendUint64(b, epoch)
}

// GetEpoch reads a partition's epoch; 0 when none is stored.
func (a *Adapter) GetEpoch(ctx context.Context, part isequencer.PartitionID) (uint64, error) {
	v, _, err := a.getEpoch(ctx, part)
	return v, err
}

func (a *Adapter) getEpoch(ctx context.Context, part isequencer.PartitionID) (uint64, bool, error) {
	b, ok, err := a.st.Get(ctx, PartKey(a.app, part), PartCCols(EpochCC))
	if err != nil {
		return 0, false, fmt.Errorf("vvmadapter: reading the epoch of partition %d: %w", part, err)
	}
	if !ok {
		return 0, false, nil
	}
	v, err := DecodeU64(b, fmt.Sprintf("epoch of partition %d", part))
	return v, err == nil, err
}

// NextEpoch acquires a new epoch of partition part: it raises the stored
// epoch by one with a compare-and-swap (or inserts 1 when none is stored)
// and returns the value it wrote. The result is larger than every epoch
// any earlier NextEpoch of the partition returned.
//
// A lost race is retried from a re-read value. A write whose outcome is
// unknown (storage.ErrUnknownOutcome) is treated as lost: NextEpoch
// re-reads and tries again from what it reads, so an epoch it may have
// written but cannot prove is skipped, never handed out twice. After
// MaxNextEpochTries attempts it returns an error wrapping
// ErrEpochContended. Other storage errors are returned wrapped; a stored
// epoch of math.MaxUint64 is an error.
func (a *Adapter) NextEpoch(ctx context.Context, part isequencer.PartitionID) (uint64, error) {
	pk, cc := PartKey(a.app, part), PartCCols(EpochCC)
	var lastErr error
	for range MaxNextEpochTries {
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("vvmadapter: next epoch of partition %d: %w", part, err)
		}
		cur, exists, err := a.getEpoch(ctx, part)
		if err != nil {
			return 0, err
		}
		if cur == math.MaxUint64 {
			return 0, fmt.Errorf("vvmadapter: next epoch of partition %d: the epoch is at its maximum %d", part, cur)
		}
		next := cur + 1
		var ok bool
		if exists {
			ok, err = a.st.CompareAndSwap(ctx, pk, cc, EncodeU64(cur), EncodeU64(next), 0)
		} else {
			ok, err = a.st.InsertIfNotExists(ctx, pk, cc, EncodeU64(next), 0)
		}
		switch {
		case err == nil && ok:
			return next, nil
		case err == nil:
			lastErr = fmt.Errorf("lost the race to %d", next)
		case errors.Is(err, storage.ErrUnknownOutcome) && ctx.Err() == nil:
			lastErr = err
		default:
			return 0, fmt.Errorf("vvmadapter: next epoch of partition %d: writing %d: %w", part, next, err)
		}
	}
	return 0, fmt.Errorf("%w: partition %d: %d attempts (last: %v)", ErrEpochContended, part, MaxNextEpochTries, lastErr)
}

// PutNumbersEpoch writes values to their number cells of epoch with one
// PutBatch; epoch 0 writes the seed cells (PutNumbers).
func (a *Adapter) PutNumbersEpoch(ctx context.Context, epoch uint64, values []isequencer.SeqValue) error {
	if epoch == 0 {
		return a.PutNumbers(ctx, values)
	}
	if len(values) == 0 {
		return nil
	}
	rows := make([]storage.Row, len(values))
	for i, v := range values {
		rows[i] = storage.Row{PKey: WSKey(a.app, v.Key.WSID), CCols: WSEpochCCols(v.Key.SeqID, epoch), Value: EncodeU64(uint64(v.Value))}
	}
	if err := a.st.PutBatch(ctx, rows); err != nil {
		return fmt.Errorf("vvmadapter: writing %d numbers of epoch %d: %w", len(values), epoch, err)
	}
	return nil
}

// GetNumbersMax reads the numbers of ids in workspace ws into
// dst[:len(ids)]: per SeqID the maximum over its seed cell and every epoch
// cell; 0 when it has none. One Read of the workspace's partition. Cells
// of SeqIDs not in ids are skipped; a clustering key that is neither 2
// nor 10 bytes, or a value that is not 8 bytes, is an error naming the
// WSID. A dst shorter than ids is an error wrapping
// storage.ErrInvalidArgument.
func (a *Adapter) GetNumbersMax(ctx context.Context, ws isequencer.WSID, ids []isequencer.SeqID, dst []isequencer.Number) error {
	if len(dst) < len(ids) {
		return fmt.Errorf("vvmadapter: %w: %d SeqIDs, room for %d numbers", storage.ErrInvalidArgument, len(ids), len(dst))
	}
	if len(ids) == 0 {
		return nil
	}
	dst = dst[:len(ids)]
	clear(dst)
	var cellErr error
	err := a.st.Read(ctx, WSKey(a.app, ws), nil, nil, func(cCols, value []byte) error {
		if len(cCols) != 2 && len(cCols) != 10 {
			cellErr = fmt.Errorf("vvmadapter: WSID %d: number cell with clustering key %x: want 2 or 10 bytes", ws, cCols)
			return cellErr
		}
		id := isequencer.SeqID(binary.BigEndian.Uint16(cCols))
		if !slices.Contains(ids, id) {
			return nil
		}
		v, err := DecodeU64(value, cellName(ws, id, cCols))
		if err != nil {
			cellErr = err
			return err
		}
		for i, want := range ids {
			if want == id {
				dst[i] = max(dst[i], isequencer.Number(v))
			}
		}
		return nil
	})
	switch {
	case cellErr != nil:
		clear(dst)
		return cellErr
	case err != nil:
		clear(dst)
		return fmt.Errorf("vvmadapter: reading numbers of WSID %d: %w", ws, err)
	}
	return nil
}

// cellName names a number cell in errors.
func cellName(ws isequencer.WSID, id isequencer.SeqID, cCols []byte) string {
	if len(cCols) == 10 {
		return fmt.Sprintf("WSID %d SeqID %d epoch %d", ws, id, binary.BigEndian.Uint64(cCols[2:]))
	}
	return fmt.Sprintf("WSID %d SeqID %d", ws, id)
}
