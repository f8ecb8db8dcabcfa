package plog

import (
	"context"
	"errors"
	"fmt"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/storage"
)

// MaxSweepTries bounds the attempts Sweep makes on one block (lost races
// and unknown outcomes) before it gives up.
const MaxSweepTries = 100

// errStopRead stops a storage.Read after its first row.
var errStopRead = errors.New("plog: stop read")

// Sweep fences partition part's PLog for a new owner of epoch (> 0), the
// takeover step run after the epoch is raised and before the owner reads
// or writes the PLog. from is the partition's stored next offset (0 is
// taken as 1); a deposed owner's unacknowledged writes are all at offsets
// from it on.
//
// For each block from from's block upwards Sweep reads the fence and
// whether the block holds any event:
//   - fence > epoch: a later owner exists; an error wrapping ErrFenced.
//   - fence == epoch: already this owner's; the sweep ends here if the
//     block holds no event, else goes on to the next block.
//   - fence < epoch: swapped to epoch (compare-and-swap from the value
//     read), then the next block.
//   - no fence: inserted with epoch if absent; the sweep ends here if the
//     block held no event (the first empty block), else goes on.
//
// A lost race or an unknown outcome (storage.ErrUnknownOutcome) re-reads
// the block and decides again, at most MaxSweepTries times per block.
// When Sweep returns nil, every block from from's block to the first empty
// one holds epoch, and a writer of an older epoch can store no event at any
// offset >= from: it would have to fill the empty block first. It returns
// how many fences it wrote (a write whose unknown outcome was applied is
// not counted). Storage errors are returned wrapped, with the
// count so far.
func Sweep(ctx context.Context, st storage.Storage, part isequencer.PartitionID, from isequencer.PLogOffset, epoch uint64) (blocks int, err error) {
	switch {
	case st == nil:
		return 0, fmt.Errorf("plog: sweep: %w: Storage is nil", storage.ErrInvalidArgument)
	case epoch == 0:
		return 0, fmt.Errorf("plog: sweep: %w: epoch 0", storage.ErrInvalidArgument)
	}
	fenceCC, epochV := FenceCCols(), encodeEpoch(epoch)
	lo, hi := make([]byte, 2), eventsEnd()
	block := max(uint64(from), 1) >> loBits
	tries := 0
	for {
		if err := ctx.Err(); err != nil {
			return blocks, fmt.Errorf("plog: sweep of partition %d at block %d: %w", part, block, err)
		}
		if tries++; tries > MaxSweepTries {
			return blocks, fmt.Errorf("plog: sweep of partition %d: block %d: %d attempts lost races or had unknown outcomes", part, block, MaxSweepTries)
		}
		off := isequencer.PLogOffset(block << loBits)
		pKey := EventPKey(part, off)
		fence, fenced, err := ReadFence(ctx, st, part, off)
		if err != nil {
			return blocks, fmt.Errorf("plog: sweep: %w", err)
		}
		hasEvents := false
		err = st.Read(ctx, pKey, lo, hi, func([]byte, []byte) error {
			hasEvents = true
			return errStopRead
		})
		if err != nil && !errors.Is(err, errStopRead) {
			return blocks, fmt.Errorf("plog: sweep of partition %d: reading block %d: %w", part, block, err)
		}
		var ok bool
		switch {
		case fenced && fence > epoch:
			return blocks, fmt.Errorf("%w: partition %d: sweep for epoch %d found block %d fenced with epoch %d", ErrFenced, part, epoch, block, fence)
		case fenced && fence == epoch:
			if !hasEvents {
				return blocks, nil
			}
			block, tries = block+1, 0
			continue
		case fenced:
			ok, err = st.CompareAndSwap(ctx, pKey, fenceCC, encodeEpoch(fence), epochV, 0)
		default:
			ok, err = st.InsertIfNotExists(ctx, pKey, fenceCC, epochV, 0)
		}
		switch {
		case err == nil && ok:
			blocks++
			if !fenced && !hasEvents {
				return blocks, nil
			}
			block, tries = block+1, 0
		case err == nil, errors.Is(err, storage.ErrUnknownOutcome) && ctx.Err() == nil:
			// Lost a race or cannot tell: read the block again.
		default:
			return blocks, fmt.Errorf("plog: sweep of partition %d: fencing block %d with epoch %d: %w", part, block, epoch, err)
		}
	}
}
