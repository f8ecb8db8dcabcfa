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

// VersionRange is how many write versions a takeover reserves for its
// owner, and each extension adds (storage.Versions): 2^32. The 62-bit
// version space holds 2^30 ranges: a partition taken over once a second
// without pause lasts 34 years; one writing a million versions a second
// extends its range every 72 minutes and lasts 146,000 years.
const VersionRange uint64 = 1 << 32

// legacyEpochShift: before version ranges, the owner of epoch e wrote
// versions e<<42 | n (n < 2^42), so an 8-byte epoch row e stands for the
// versions reserved up to (e+1)<<42 - 1.
const legacyEpochShift = 42

// EpochRow is the value of a partition's epoch row: the last epoch taken
// and the top of the versions reserved up to it. Stored as u64 Epoch ‖
// u64 Top; an 8-byte row (written before version ranges) holds the epoch
// alone.
type EpochRow struct {
	Epoch, Top uint64
}

// EncodeEpochRow returns r's stored value.
func EncodeEpochRow(r EpochRow) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(make([]byte, 0, 16), r.Epoch), r.Top)
}

// DecodeEpochRow decodes an epoch row; what names it in the error.
func DecodeEpochRow(b []byte, what string) (EpochRow, error) {
	switch len(b) {
	case 8:
		e := binary.BigEndian.Uint64(b)
		if e >= 1<<(62-legacyEpochShift) {
			return EpochRow{}, fmt.Errorf("vvmadapter: %s: epoch %d of the 8-byte layout is above its maximum %d", what, e, uint64(1<<(62-legacyEpochShift)-1))
		}
		return EpochRow{Epoch: e, Top: (e+1)<<legacyEpochShift - 1}, nil
	case 16:
		return EpochRow{Epoch: binary.BigEndian.Uint64(b), Top: binary.BigEndian.Uint64(b[8:])}, nil
	}
	return EpochRow{}, fmt.Errorf("vvmadapter: %s: value is %d bytes, want 16 (or 8)", what, len(b))
}

// GetEpoch reads a partition's epoch; 0 when none is stored.
func (a *Adapter) GetEpoch(ctx context.Context, part isequencer.PartitionID) (uint64, error) {
	v, _, err := a.ReadEpoch(ctx, part)
	return v, err
}

// ReadEpoch reads a partition's epoch and whether one is stored.
func (a *Adapter) ReadEpoch(ctx context.Context, part isequencer.PartitionID) (uint64, bool, error) {
	r, raw, err := a.readEpochRow(ctx, part)
	return r.Epoch, raw != nil, err
}

// readEpochRow reads a partition's epoch row and its stored bytes (nil:
// none stored).
func (a *Adapter) readEpochRow(ctx context.Context, part isequencer.PartitionID) (EpochRow, []byte, error) {
	b, ok, err := a.st.Get(ctx, PartKey(a.app, part), PartCCols(EpochCC))
	if err != nil {
		return EpochRow{}, nil, fmt.Errorf("vvmadapter: reading the epoch of partition %d: %w", part, err)
	}
	if !ok {
		return EpochRow{}, nil, nil
	}
	r, err := DecodeEpochRow(b, fmt.Sprintf("epoch of partition %d", part))
	if err != nil {
		return EpochRow{}, nil, err
	}
	return r, b, nil
}

// ErrVersionSpace: the partition's 62-bit version space holds no further
// range (after 2^30 takeovers and extensions).
var ErrVersionSpace = errors.New("vvmadapter: the partition's write versions are exhausted")

// NextEpoch acquires a new epoch of partition part and returns it; see
// takeEpoch.
func (a *Adapter) NextEpoch(ctx context.Context, part isequencer.PartitionID) (uint64, error) {
	r, _, err := a.takeEpoch(ctx, part, 0, 0)
	return r.Epoch, err
}

// takeEpoch acquires a new epoch of partition part with a
// compare-and-swap of its epoch row (or an insert when none is stored):
// the epoch one above the stored one, and the versions base..r.Top
// reserved above every version reserved before (base is the stored top
// plus one). The epoch is larger than every epoch any earlier call
// returned, and the range above every earlier owner's.
//
// A lost race is retried from a re-read value. A write whose outcome is
// unknown (storage.ErrUnknownOutcome) is treated as lost: it re-reads and
// tries again from what it reads, so an epoch it may have written but
// cannot prove is skipped, never handed out twice. It relies on the
// storage contract that a conditional write is reported applied only if
// this call applied it: a competitor's swap to the same value is never
// taken for its own (storage/cql proves its own writes by a write ID, not
// by the value). After MaxNextEpochTries attempts it returns an error
// wrapping ErrEpochContended. Other storage errors are returned wrapped;
// a stored epoch of math.MaxUint64 is an error, and a version space
// without room for another range is ErrVersionSpace.
//
// skipEpochs and skipVersions (TakeOverPastRestore) leave that many epochs
// and versions unused between the stored ones and those taken.
func (a *Adapter) takeEpoch(ctx context.Context, part isequencer.PartitionID, skipEpochs, skipVersions uint64) (r EpochRow, base uint64, err error) {
	pk, cc := PartKey(a.app, part), PartCCols(EpochCC)
	var lastErr error
	for range MaxNextEpochTries {
		if err := ctx.Err(); err != nil {
			return EpochRow{}, 0, fmt.Errorf("vvmadapter: next epoch of partition %d: %w", part, err)
		}
		cur, raw, err := a.readEpochRow(ctx, part)
		if err != nil {
			return EpochRow{}, 0, err
		}
		switch {
		case cur.Epoch >= math.MaxUint64-skipEpochs:
			return EpochRow{}, 0, fmt.Errorf("vvmadapter: next epoch of partition %d: the epoch %d has no room for %d more", part, cur.Epoch, skipEpochs+1)
		case cur.Top > storage.MaxVersion-a.versionRange-skipVersions:
			return EpochRow{}, 0, fmt.Errorf("%w: partition %d: reserved up to %d", ErrVersionSpace, part, cur.Top)
		}
		next := EpochRow{Epoch: cur.Epoch + skipEpochs + 1, Top: cur.Top + skipVersions + a.versionRange}
		var ok bool
		if raw != nil {
			ok, err = a.st.CompareAndSwap(ctx, pk, cc, raw, EncodeEpochRow(next), 0)
		} else {
			ok, err = a.st.InsertIfNotExists(ctx, pk, cc, EncodeEpochRow(next), 0)
		}
		switch {
		case err == nil && ok:
			return next, cur.Top + skipVersions + 1, nil
		case err == nil:
			lastErr = fmt.Errorf("lost the race to %d", next.Epoch)
		case errors.Is(err, storage.ErrUnknownOutcome) && ctx.Err() == nil:
			lastErr = err
		default:
			return EpochRow{}, 0, fmt.Errorf("vvmadapter: next epoch of partition %d: writing %d: %w", part, next.Epoch, err)
		}
	}
	return EpochRow{}, 0, fmt.Errorf("%w: partition %d: %d attempts (last: %v)", ErrEpochContended, part, MaxNextEpochTries, lastErr)
}

// ErrDeposed: an owner's range cannot be extended: a later owner took the
// partition over.
var ErrDeposed = errors.New("vvmadapter: a later owner took the partition over")

// extendVersions reserves VersionRange more versions for the owner of
// epoch whose range ends at top, with a compare-and-swap of the epoch
// row, and returns the new top. It fails with ErrDeposed once the row
// holds a later epoch, so a deposed owner's versions stay below every
// later owner's. A row already past top for epoch (an earlier attempt of
// this owner's whose outcome was unknown) is taken as it is. Unknown
// outcomes and lost races (to nobody: only epoch's owner extends) are
// retried up to MaxNextEpochTries times.
func (a *Adapter) extendVersions(ctx context.Context, part isequencer.PartitionID, epoch, top uint64) (uint64, error) {
	pk, cc := PartKey(a.app, part), PartCCols(EpochCC)
	var lastErr error
	for range MaxNextEpochTries {
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("vvmadapter: extending the versions of partition %d epoch %d: %w", part, epoch, err)
		}
		cur, raw, err := a.readEpochRow(ctx, part)
		switch {
		case err != nil:
			return 0, err
		case raw == nil || cur.Epoch != epoch:
			return 0, fmt.Errorf("%w: partition %d: epoch %d, not %d", ErrDeposed, part, cur.Epoch, epoch)
		case cur.Top > top:
			return cur.Top, nil
		case cur.Top > storage.MaxVersion-a.versionRange:
			return 0, fmt.Errorf("%w: partition %d: reserved up to %d", ErrVersionSpace, part, cur.Top)
		}
		next := EpochRow{Epoch: epoch, Top: cur.Top + a.versionRange}
		ok, err := a.st.CompareAndSwap(ctx, pk, cc, raw, EncodeEpochRow(next), 0)
		switch {
		case err == nil && ok:
			return next.Top, nil
		case err == nil:
			lastErr = errors.New("the row changed")
		case errors.Is(err, storage.ErrUnknownOutcome) && ctx.Err() == nil:
			lastErr = err
		default:
			return 0, fmt.Errorf("vvmadapter: extending the versions of partition %d epoch %d: %w", part, epoch, err)
		}
	}
	return 0, fmt.Errorf("%w: partition %d: extending the versions: %d attempts (last: %v)", ErrEpochContended, part, MaxNextEpochTries, lastErr)
}
