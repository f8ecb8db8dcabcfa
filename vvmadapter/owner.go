package vvmadapter

import (
	"context"
	"fmt"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/storage"
)

// Owner writes one partition's numbers and next PLog offset as the owner
// of an epoch of that partition, the only writer of them there is: every
// write carries a version of its epoch, so it replaces what any earlier
// owner wrote and nothing a later owner wrote, whatever the order in which
// the writes arrive. An Owner is made only by Adapter.TakeOver. Safe for
// concurrent use.
//
// An Owner is not told when a later owner takes over: its writes then go
// on succeeding and replace nothing the later owner wrote (a later owner's
// versions are larger). Fencing a deposed owner's events is the PLog's
// (plog.Sweep).
type Owner struct {
	a        *Adapter
	part     isequencer.PartitionID
	versions *storage.Versions
}

// TakeOver makes the caller the owner of partition part: it takes the
// partition's next epoch and a range of write versions above every
// earlier owner's (takeEpoch), and returns the Owner of that epoch. Every
// earlier owner is then deposed: its later writes of numbers and of the
// offset replace nothing the new owner writes, and it can no longer
// extend its range. The errors are takeEpoch's.
func (a *Adapter) TakeOver(ctx context.Context, part isequencer.PartitionID) (*Owner, error) {
	return a.takeOver(ctx, part, 0, 0)
}

// Restore margins: what TakeOverPastRestore leaves unused above the stored
// epoch row. A restore's lost period (from the backup to the restore) took
// epochs and reserved version ranges above the backup's row, and its
// writes may still land after the restore (a hint, a write held past its
// timeout, a Paxos proposal completed late); the next owner must order
// above all of them. A lost period takes fewer than RestoreEpochs epochs
// and reserves fewer than RestoreEpochs ranges (a takeover or an extension
// every 5 s for 3.8 days); the 62-bit version space holds 16,383 such
// skips (advance runs, each failed one included) besides a partition's own
// use.
const (
	RestoreEpochs   uint64 = 1 << 16
	RestoreVersions        = RestoreEpochs * VersionRange
)

// TakeOverPastRestore is TakeOver for the first owner after a restore
// (`cqlseq advance`): its epoch is RestoreEpochs above the stored one and
// its range RestoreVersions above the stored top, so that its writes
// replace every write of the lost period, however late that lands, and a
// lost-period fenced owner's conditional write fails its fence.
func (a *Adapter) TakeOverPastRestore(ctx context.Context, part isequencer.PartitionID) (*Owner, error) {
	return a.takeOver(ctx, part, RestoreEpochs, RestoreVersions)
}

func (a *Adapter) takeOver(ctx context.Context, part isequencer.PartitionID, skipEpochs, skipVersions uint64) (*Owner, error) {
	r, base, err := a.takeEpoch(ctx, part, skipEpochs, skipVersions)
	if err != nil {
		return nil, err
	}
	extend := func(ctx context.Context, top uint64) (uint64, error) {
		return a.extendVersions(ctx, part, r.Epoch, top)
	}
	v, err := storage.NewVersions(r.Epoch, base, r.Top, extend)
	if err != nil {
		return nil, fmt.Errorf("vvmadapter: taking over partition %d: %w", part, err)
	}
	return &Owner{a: a, part: part, versions: v}, nil
}

// App returns the owner's application.
func (o *Owner) App() isequencer.ClusterAppID { return o.a.app }

// Partition returns the partition owned.
func (o *Owner) Partition() isequencer.PartitionID { return o.part }

// Epoch returns the owner's epoch (> 0); 0 for a nil Owner.
func (o *Owner) Epoch() uint64 {
	if o == nil {
		return 0
	}
	return o.versions.Epoch()
}

// Versions returns the owner's write versions, for the other rows the
// owner writes unconditionally (the PLog's trust2 events, records).
func (o *Owner) Versions() *storage.Versions { return o.versions }

// Adapter returns the Adapter the owner reads through.
func (o *Owner) Adapter() *Adapter { return o.a }

// PutNumbers writes values to their seed cells (the reference platform's
// layout; every mode's) with one PutBatch.
func (o *Owner) PutNumbers(ctx context.Context, values []isequencer.SeqValue) error {
	if err := o.a.putNumbers(ctx, o.versions, values); err != nil {
		return fmt.Errorf("vvmadapter: owner of partition %d (epoch %d): writing %d numbers: %w", o.part, o.Epoch(), len(values), err)
	}
	return nil
}

// PutPLogOffset writes the partition's next PLog offset.
func (o *Owner) PutPLogOffset(ctx context.Context, off isequencer.PLogOffset) error {
	if err := o.a.putPLogOffset(ctx, o.versions, o.part, off); err != nil {
		return fmt.Errorf("vvmadapter: owner of partition %d (epoch %d): writing next PLog offset %d: %w", o.part, o.Epoch(), off, err)
	}
	return nil
}
