package seqstorage

import (
	"context"
	"fmt"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/vvmadapter"
)

// TakeOverOptions configure TakeOver.
type TakeOverOptions struct {
	// Storage holds the partition's numbers, next PLog offset and epoch
	// (vvmadapter's rows). Required.
	Storage storage.Storage
	// App and Partition select the application partition.
	App       isequencer.ClusterAppID
	Partition isequencer.PartitionID
	// FencePLog, if not nil, holds the partition's PLog in plog's layout:
	// TakeOver fences it with the new epoch (plog.Sweep from the stored
	// next offset), so that a deposed fenced owner can store no event at
	// or after that offset. nil: the PLog is not fenced (a PLog this module
	// does not write, such as Voedger's).
	FencePLog storage.Storage
	// PastRestore takes the epoch and versions past any the lost period of
	// a restore may have taken (vvmadapter.Adapter.TakeOverPastRestore):
	// the takeover of `cqlseq advance`.
	PastRestore bool
}

// Ownership is what TakeOver took.
type Ownership struct {
	// Owner writes the partition's numbers and offset (Options.Owner).
	Owner *vvmadapter.Owner
	// StoredNext is the next PLog offset stored when the partition was
	// taken (0: none); FencedBlocks the PLog blocks whose fence TakeOver
	// wrote.
	StoredNext   isequencer.PLogOffset
	FencedBlocks int
}

// TakeOver makes the caller the owner of the partition, the step that
// every writer of a partition's numbers or next PLog offset takes before
// it reads what to write: a new epoch (vvmadapter.Adapter.TakeOver), whose
// versions every write of the returned Owner carries, so that its writes
// replace every earlier owner's and none of a later one's whatever the
// clocks say; then, with FencePLog, the PLog's fences (plog.Sweep), so
// that a deposed fenced owner, alive or not, stores no event the caller's
// replay from StoredNext does not see. An earlier owner still running is
// deposed: in fenced mode its next write is refused (plog.ErrFenced);
// in the trust modes its later writes of numbers and offset replace
// nothing, and the next owner's replay reads its events.
//
// It writes the epoch row (and the fences) only; on an error it returns
// no Ownership, and the caller must write nothing: the storage's error,
// wrapped (vvmadapter.ErrEpochContended after lost races, plog.ErrFenced
// when a later owner fenced the PLog first).
func TakeOver(ctx context.Context, o TakeOverOptions) (*Ownership, error) {
	if o.Storage == nil {
		return nil, fmt.Errorf("%w: Storage is nil", ErrInvalidOptions)
	}
	fail := func(err error) (*Ownership, error) {
		return nil, fmt.Errorf("seqstorage: taking over app %d partition %d: %w", o.App, o.Partition, err)
	}
	a := vvmadapter.New(o.Storage, o.App)
	takeOver := a.TakeOver
	if o.PastRestore {
		takeOver = a.TakeOverPastRestore
	}
	owner, err := takeOver(ctx, o.Partition)
	if err != nil {
		return fail(err)
	}
	from, _, err := a.GetPLogOffset(ctx, o.Partition)
	if err != nil {
		return fail(err)
	}
	own := &Ownership{Owner: owner, StoredNext: from}
	if o.FencePLog != nil {
		if own.FencedBlocks, err = plog.Sweep(ctx, o.FencePLog, o.Partition, from, owner.Epoch()); err != nil {
			return fail(fmt.Errorf("at epoch %d: fencing the PLog: %w", owner.Epoch(), err))
		}
	}
	return own, nil
}
