package vvmadapter

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

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
	v, _, err := a.ReadEpoch(ctx, part)
	return v, err
}

// ReadEpoch reads a partition's epoch and whether one is stored (a
// partition never opened in fenced mode has none).
func (a *Adapter) ReadEpoch(ctx context.Context, part isequencer.PartitionID) (uint64, bool, error) {
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
// written but cannot prove is skipped, never handed out twice. It relies
// on the storage contract that a conditional write is reported applied
// only if this call applied it: a competitor's swap to the same value is
// never taken for its own (storage/cql proves its own writes by a write ID,
// not by the value). After
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
		cur, exists, err := a.ReadEpoch(ctx, part)
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
