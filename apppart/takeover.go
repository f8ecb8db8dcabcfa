package apppart

import (
	"context"
	"fmt"

	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/seqstorage"
)

// takeOver makes this process the owner of the partition, in every mode
// (seqstorage.TakeOver): a new epoch, whose versions every unconditional
// write of this owner carries, so that its writes replace any earlier
// owner's whatever the clocks of the two machines say; in fenced mode,
// then the PLog sweep that fences every block the previous owner may
// still write into (see plog.Sweep).
func takeOver(ctx context.Context, o OpenOptions) (*seqstorage.Ownership, error) {
	to := seqstorage.TakeOverOptions{Storage: o.Storage, App: o.App, Partition: o.Partition}
	if o.Mode == plog.ModeFenced {
		to.FencePLog = o.AppStorage
	}
	own, err := seqstorage.TakeOver(ctx, to)
	if err != nil {
		return nil, fmt.Errorf("apppart: %w", err)
	}
	o.Logger.Info("apppart: took over partition", "app", o.App, "partition", o.Partition, "mode", o.Mode,
		"epoch", own.Owner.Epoch(), "stored_next_plog_offset", own.StoredNext, "blocks_fenced", own.FencedBlocks)
	return own, nil
}
