package vvmadapter

import (
	"context"
	"fmt"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/storage"
)

// PLogWrites says how the last owner of a partition that finished opening
// may have written its PLog: whether a write of it may still land late and
// replace a row (docs/design.md "Late writes"). Persisted: never change
// the values.
type PLogWrites uint8

const (
	// PLogWritesConditional: every PLog row the owner wrote, or may still
	// write, is a conditional insert (trust0, trust1, fenced): a late one
	// lands only where nothing is stored.
	PLogWritesConditional PLogWrites = 0
	// PLogWritesVersioned: the owner wrote PLog rows with versioned puts
	// (trust2's events, `cqlseq advance`'s gap marker): a late one
	// replaces a row of a lower version.
	PLogWritesVersioned PLogWrites = 1
)

// GetPLogWrites reads how the partition's last owner wrote its PLog; ok is
// false when no owner recorded it (a partition written before the row
// existed, or never opened).
func (a *Adapter) GetPLogWrites(ctx context.Context, part isequencer.PartitionID) (w PLogWrites, ok bool, err error) {
	b, ok, err := a.st.Get(ctx, PartKey(a.app, part), PartCCols(PLogWritesCC))
	switch {
	case err != nil:
		return 0, false, fmt.Errorf("vvmadapter: reading the PLog writes of partition %d: %w", part, err)
	case !ok:
		return 0, false, nil
	case len(b) != 1 || b[0] > byte(PLogWritesVersioned):
		return 0, false, fmt.Errorf("vvmadapter: the PLog writes row of partition %d is %x: want one byte, 0 or 1", part, b)
	}
	return PLogWrites(b[0]), true, nil
}

// PutPLogWrites records how this owner writes the partition's PLog. An
// owner records PLogWritesVersioned before its first versioned PLog write,
// and PLogWritesConditional only once no earlier owner's versioned write
// can land where it writes (apppart's takeover).
func (o *Owner) PutPLogWrites(ctx context.Context, w PLogWrites) error {
	rows := []storage.Row{{PKey: PartKey(o.a.app, o.part), CCols: PartCCols(PLogWritesCC), Value: []byte{byte(w)}}}
	if err := o.versions.Stamp(ctx, rows); err != nil {
		return err
	}
	if err := o.a.st.PutBatch(ctx, rows); err != nil {
		return fmt.Errorf("vvmadapter: owner of partition %d (epoch %d): recording its PLog writes: %w", o.part, o.Epoch(), err)
	}
	return nil
}
