package apppart

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/vvmadapter"
)

// takeOver makes this process the owner of the partition, in every mode:
// a new epoch (a compare-and-swap no other owner can be given the result
// of), whose versions every unconditional write of this owner carries, so
// that its writes replace any earlier owner's whatever the clocks of the
// two machines say; in fenced mode, then the PLog sweep that fences every
// block the previous owner may still write into (see plog.Sweep). It
// returns the epoch and its versions.
func takeOver(ctx context.Context, o OpenOptions) (uint64, *storage.Versions, error) {
	a := vvmadapter.New(o.Storage, o.App)
	epoch, err := a.NextEpoch(ctx, o.Partition)
	if err != nil {
		return 0, nil, fmt.Errorf("apppart: taking over app %d partition %d: new epoch: %w", o.App, o.Partition, err)
	}
	versions, err := storage.NewVersions(epoch)
	if err != nil {
		return 0, nil, fmt.Errorf("apppart: taking over app %d partition %d: %w", o.App, o.Partition, err)
	}
	from, _, err := a.GetPLogOffset(ctx, o.Partition)
	if err != nil {
		return 0, nil, fmt.Errorf("apppart: taking over app %d partition %d: %w", o.App, o.Partition, err)
	}
	blocks := 0
	if o.Mode == plog.ModeFenced {
		if blocks, err = plog.Sweep(ctx, o.AppStorage, o.Partition, from, epoch); err != nil {
			return 0, nil, fmt.Errorf("apppart: taking over app %d partition %d at epoch %d: fencing the PLog: %w", o.App, o.Partition, epoch, err)
		}
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger.Info("apppart: took over partition", "app", o.App, "partition", o.Partition, "mode", o.Mode,
		"epoch", epoch, "stored_next_plog_offset", from, "blocks_fenced", blocks)
	return epoch, versions, nil
}
