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
// partition's next epoch (NextEpoch) and returns the Owner of that epoch.
// Every earlier owner is then deposed: its later writes of numbers and of
// the offset replace nothing the new owner writes. The errors are
// NextEpoch's, and an epoch past storage.MaxVersionEpoch (the partition
// was taken over that often).
func (a *Adapter) TakeOver(ctx context.Context, part isequencer.PartitionID) (*Owner, error) {
	epoch, err := a.NextEpoch(ctx, part)
	if err != nil {
		return nil, err
	}
	v, err := storage.NewVersions(epoch)
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

// PutNumbers writes values to their seed cells (the layout the trust modes
// and the reference platform use) with one PutBatch.
func (o *Owner) PutNumbers(ctx context.Context, values []isequencer.SeqValue) error {
	if err := o.a.putNumbers(ctx, 0, o.versions, values); err != nil {
		return fmt.Errorf("vvmadapter: owner of partition %d (epoch %d): writing %d numbers: %w", o.part, o.Epoch(), len(values), err)
	}
	return nil
}

// PutEpochNumbers writes values to the number cells of the owner's epoch
// (the fenced mode's: a deposed owner's late write can never lower the
// number a later owner reads, GetNumbersMax) with one PutBatch.
func (o *Owner) PutEpochNumbers(ctx context.Context, values []isequencer.SeqValue) error {
	if err := o.a.putNumbers(ctx, o.Epoch(), o.versions, values); err != nil {
		return fmt.Errorf("vvmadapter: owner of partition %d: writing %d numbers of epoch %d: %w", o.part, len(values), o.Epoch(), err)
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
