package apppart

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/vvmadapter"
)

// takeOver makes this process the fenced writer of the partition: a new
// epoch, then the PLog sweep that fences every block the previous owner
// may still write into (see plog.Sweep). It returns the epoch.
func takeOver(ctx context.Context, o OpenOptions) (uint64, error) {
	a := vvmadapter.New(o.Storage, o.App)
	epoch, err := a.NextEpoch(ctx, o.Partition)
	if err != nil {
		return 0, fmt.Errorf("apppart: taking over app %d partition %d: new epoch: %w", o.App, o.Partition, err)
	}
	from, _, err := a.GetPLogOffset(ctx, o.Partition)
	if err != nil {
		return 0, fmt.Errorf("apppart: taking over app %d partition %d: %w", o.App, o.Partition, err)
	}
	blocks, err := plog.Sweep(ctx, o.AppStorage, o.Partition, from, epoch)
	if err != nil {
		return 0, fmt.Errorf("apppart: taking over app %d partition %d at epoch %d: fencing the PLog: %w", o.App, o.Partition, epoch, err)
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger.Info("apppart: took over partition", "app", o.App, "partition", o.Partition,
		"epoch", epoch, "stored_next_plog_offset", from, "blocks_fenced", blocks)
	return epoch, nil
}
