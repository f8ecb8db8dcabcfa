package storage

import (
	"errors"
	"fmt"
	"sync/atomic"
)

// Version layout of a partition owner's writes (Versions): the owner's
// epoch in the high bits, a per-owner counter in the low ones, so that every
// write of a later owner orders above every write of an earlier one, and an
// owner's later writes above its earlier ones, whatever the clocks say.
const (
	// VersionCounterBits is the width of the per-owner counter.
	VersionCounterBits = 42
	// MaxVersionEpoch is the largest epoch Versions accepts: 2^20 - 1.
	MaxVersionEpoch = MaxVersion >> VersionCounterBits
)

// ErrVersionsExhausted: an owner issued 2^42 - 1 versions; it must take a
// new epoch (reopen the partition).
var ErrVersionsExhausted = errors.New("storage: write versions of this epoch exhausted: reopen to take a new epoch")

// Versions issues the Row.Version of one owner's writes: epoch<<42 | n, n
// counting from 1. Safe for concurrent use.
type Versions struct {
	epoch uint64
	n     atomic.Uint64
}

// NewVersions returns the versions of the owner of epoch, which must be in
// 1..MaxVersionEpoch (an epoch from a compare-and-swap that no other owner
// can have been given: vvmadapter.Adapter.NextEpoch).
func NewVersions(epoch uint64) (*Versions, error) {
	if epoch == 0 || epoch > MaxVersionEpoch {
		return nil, fmt.Errorf("%w: epoch %d outside the versioned range 1..%d", ErrInvalidArgument, epoch, uint64(MaxVersionEpoch))
	}
	return &Versions{epoch: epoch}, nil
}

// Epoch returns the owner's epoch.
func (v *Versions) Epoch() uint64 { return v.epoch }

// Next returns the next version: larger than every version Next returned
// before, and than every version of an owner of a smaller epoch.
func (v *Versions) Next() (uint64, error) {
	n := v.n.Add(1)
	if n >= 1<<VersionCounterBits {
		v.n.Store(1<<VersionCounterBits - 1)
		return 0, ErrVersionsExhausted
	}
	return v.epoch<<VersionCounterBits | n, nil
}

// Stamp sets the Version of every row of rows to one new version (one
// logical write); a nil Versions leaves them unversioned.
func (v *Versions) Stamp(rows []Row) error {
	if v == nil {
		return nil
	}
	ver, err := v.Next()
	if err != nil {
		return err
	}
	for i := range rows {
		rows[i].Version = ver
	}
	return nil
}
