package apppart

import (
	"context"
	"errors"
	"fmt"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
)

// serialFlow is the flow of the trust modes: one command at a time under
// the partition's lock, its event written before Flush.
//
//	Start (busy -> ErrBusy) -> Next... -> write the event -> Flush
//	                              |    \-> write failed  -> Actualize
//	                              \-> Next failed -> Cancel (nothing written)
type serialFlow struct {
	w  *plog.Writer
	ev plog.Event // reused under p.mu
}

func (f *serialFlow) do(ctx context.Context, p *Partition, cmd Command) (Result, error) {
	p.readAhead(cmd)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return Result{}, ErrClosed
	}
	if p.stopped != nil {
		return Result{}, p.stopped
	}
	off, ok := p.seq.Start(cmd.WSKind, cmd.WSID)
	if !ok {
		return Result{}, ErrBusy
	}
	nums := make([]isequencer.Number, 0, len(cmd.Seqs))
	for _, id := range cmd.Seqs {
		n, err := p.seq.Next(id)
		if err != nil {
			// No event is written: cancel the transaction. Its offset and
			// numbers are used again, and nothing needs actualizing (a
			// failed numbers read, ErrReadNumbers, took nothing at all).
			p.seq.Cancel()
			return Result{}, fmt.Errorf("apppart: WSID %d SeqID %d: %w", cmd.WSID, id, err)
		}
		nums = append(nums, n)
	}
	p.shape.fill(&f.ev, off, cmd, nums, cmd.Payload)
	wctx, cancel := context.WithTimeout(ctx, p.writeTimeout)
	err := f.w.Write(wctx, &f.ev)
	cancel()
	if err != nil {
		// The event may or may not be stored: actualization re-reads the
		// PLog from the last flushed offset, so its numbers are used again
		// only if it is not.
		p.seq.Actualize()
		if errors.Is(err, plog.ErrConflict) {
			p.stopped = fmt.Errorf("%w: %w", ErrStopped, err)
			p.logger.Error("apppart: event log conflict, partition stopped",
				"plog_offset", off, "wsid", cmd.WSID, "err", err)
			return Result{}, fmt.Errorf("%w at PLog offset %d: %w", ErrWrite, off, p.stopped)
		}
		p.logger.Warn("apppart: event write failed, actualizing",
			"plog_offset", off, "wsid", cmd.WSID, "err", err)
		return Result{}, fmt.Errorf("%w at PLog offset %d: %w", ErrWrite, off, err)
	}
	p.seq.Flush()
	return Result{Offset: off, Numbers: nums}, nil
}

func (f *serialFlow) stop() {}

func (f *serialFlow) epoch() uint64 { return 0 }

func (f *serialFlow) groupStats() (groups, events int) { return 0, 0 }
