package storage

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// ErrVersionsExhausted: an owner's versions reached the top of its range
// and the range could not be extended (Versions' extend failed: a later
// owner took the partition over, or the store did not answer).
var ErrVersionsExhausted = errors.New("storage: write versions of this owner exhausted")

// ExtendFunc reserves more versions for the owner whose range ends at top
// and returns the new top (> top). It fails once another owner has taken
// over (vvmadapter.Adapter.ExtendVersions).
type ExtendFunc func(ctx context.Context, top uint64) (newTop uint64, err error)

// Versions issues the Row.Version of one owner's writes from a range of
// versions reserved for it (vvmadapter's epoch row): base..top, extended
// by extend when it runs out. Every version an owner's Versions issues is
// above every version any earlier owner's issues, because each takeover
// reserves its range above every range reserved before it, and an owner
// can extend its range only while no later owner has taken over. Safe for
// concurrent use.
type Versions struct {
	epoch  uint64
	n      atomic.Uint64 // the last version handed out (base-1 at first)
	top    atomic.Uint64 // the top of the range reserved
	mu     sync.Mutex    // serialises extensions
	extend ExtendFunc
}

// NewVersions returns the versions of the owner of epoch (> 0; what it
// reports, not what orders the versions) from base to top (1 <= base <=
// top <= MaxVersion), extended by extend (nil: never; the range's end is
// then ErrVersionsExhausted).
func NewVersions(epoch, base, top uint64, extend ExtendFunc) (*Versions, error) {
	if epoch == 0 || base == 0 || base > top || top > MaxVersion {
		return nil, fmt.Errorf("%w: versions of epoch %d from %d to %d: want epoch >= 1 and 1 <= base <= top <= %d", ErrInvalidArgument, epoch, base, top, uint64(MaxVersion))
	}
	v := &Versions{epoch: epoch, extend: extend}
	v.n.Store(base - 1)
	v.top.Store(top)
	return v, nil
}

// Epoch returns the owner's epoch.
func (v *Versions) Epoch() uint64 { return v.epoch }

// Next returns the next version: larger than every version Next returned
// before, and than every version of an earlier owner. At the top of the
// range it extends the range first (one conditional write, within ctx);
// if that fails it returns an error wrapping ErrVersionsExhausted and the
// extension's error.
func (v *Versions) Next(ctx context.Context) (uint64, error) {
	n := v.n.Add(1)
	if n <= v.top.Load() {
		return n, nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for n > v.top.Load() {
		top := v.top.Load()
		if v.extend == nil || top == MaxVersion {
			return 0, fmt.Errorf("%w: epoch %d reached version %d", ErrVersionsExhausted, v.epoch, top)
		}
		newTop, err := v.extend(ctx, top)
		switch {
		case err != nil:
			return 0, fmt.Errorf("%w: epoch %d at version %d: extending the range: %w", ErrVersionsExhausted, v.epoch, top, err)
		case newTop <= top || newTop > MaxVersion:
			return 0, fmt.Errorf("%w: epoch %d: the range was extended from %d to %d", ErrVersionsExhausted, v.epoch, top, newTop)
		}
		v.top.Store(newTop)
	}
	return n, nil
}

// Stamp sets the Version of every row of rows to one new version (one
// logical write); a nil Versions leaves them unversioned.
func (v *Versions) Stamp(ctx context.Context, rows []Row) error {
	if v == nil {
		return nil
	}
	ver, err := v.Next(ctx)
	if err != nil {
		return err
	}
	for i := range rows {
		rows[i].Version = ver
	}
	return nil
}
