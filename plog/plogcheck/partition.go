package plogcheck

import (
	"context"
	"fmt"
	"slices"

	"golang.org/x/sync/errgroup"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/vvmadapter"
)

// Stored reads what the sequencer stored beside a PLog: a partition's
// next PLog offset and the numbers of a workspace.
type Stored interface {
	// GetPLogOffset returns the partition's stored next PLog offset; ok
	// false (and 0) when none is stored.
	GetPLogOffset(ctx context.Context, part isequencer.PartitionID) (isequencer.PLogOffset, bool, error)
	// GetNumbersMax sets dst[i] to the stored number of (ws, ids[i]), the
	// largest of every cell the sequencer writes it to; 0 when none.
	GetNumbersMax(ctx context.Context, ws isequencer.WSID, ids []isequencer.SeqID, dst []isequencer.Number) error
}

var _ Stored = (*vvmadapter.Adapter)(nil)

// PartitionOptions configure Partition.
type PartitionOptions struct {
	// Stored reads the partition's stored next offset and numbers
	// (vvmadapter.New(st, app)). Nil checks the PLog alone: only Duplicate
	// and Backwards can be found, and every event is in the tail.
	Stored Stored
	// Progress, if set, is called now and then with the events read so
	// far and the number expected (the stored next offset - 1).
	Progress func(events, estimate uint64)
}

// PartitionReport is what Partition found in one partition.
type PartitionReport struct {
	Partition  isequencer.PartitionID `json:"partition"`
	StoredNext isequencer.PLogOffset  `json:"stored_next_offset"` // 0: none stored (or not read)
	Events     uint64                 `json:"events"`             // events read, from offset 1 to the first missing offset, gap markers included
	Gaps       uint64                 `json:"gaps,omitempty"`     // of them, gap markers (`cqlseq advance`)
	Last       isequencer.PLogOffset  `json:"last_offset"`        // the last offset the events cover (a gap marker's last skipped one); 0: none
	Tail       uint64                 `json:"tail"`               // events at or after StoredNext: not yet reflected in the stored numbers
	Workspaces int                    `json:"workspaces"`         // distinct WSIDs in the PLog
	Keys       int                    `json:"keys"`               // distinct (WSID, SeqID) in the PLog
	Numbers    uint64                 `json:"numbers"`            // (event, SeqID) numbers checked
	Findings
}

// storedReadWorkers bounds the concurrent reads of stored numbers.
const storedReadWorkers = 8

// keyState is what Partition remembers of one (WSID, SeqID).
type keyState struct {
	max        isequencer.Number     // the largest number seen
	maxOff     isequencer.PLogOffset // the event that carried it
	flushed    isequencer.Number     // the largest number of an event below the stored next offset
	flushedOff isequencer.PLogOffset
}

// Partition reads partition part's stored next PLog offset (o.Stored),
// then its whole PLog from rd (offset 1 to the first missing offset), then
// the stored numbers of every (WSID, SeqID) the PLog names, and reports
//
//   - Duplicate and Backwards: the numbers of one (WSID, SeqID), the
//     largest per SeqID of each event, must strictly increase with the
//     event offset;
//   - Regression: every stored number must be >= every number of its
//     (WSID, SeqID) carried by an event below the stored next offset;
//   - OffsetBeyondLog: the stored next offset must be at most one past the
//     last event.
//
// Numbers of events at or after the stored next offset (the unflushed
// tail) are checked only for increase: a restart replays them. The stored
// next offset is read first and stored numbers only ever grow, so a check
// of a partition in use finds no false regression.
//
// An error is a read that failed; findings are never errors.
func Partition(ctx context.Context, rd plog.PLogReader, part isequencer.PartitionID, o PartitionOptions) (*PartitionReport, error) {
	if rd == nil {
		return nil, fmt.Errorf("%w: PLog reader is nil", ErrInvalidOptions)
	}
	r := &PartitionReport{Partition: part}
	if o.Stored != nil {
		next, _, err := o.Stored.GetPLogOffset(ctx, part)
		if err != nil {
			return nil, fmt.Errorf("plogcheck: partition %d: %w", part, err)
		}
		r.StoredNext = next
	}
	next := r.StoredNext
	keys := map[isequencer.NumberKey]keyState{}
	var evNums []plog.SeqNumber
	err := rd.ReadEvents(ctx, part, 1, func(e *plog.Event) error {
		r.Events++
		r.Last = e.NextOffset() - 1
		if e.Skip > 0 {
			r.Gaps++
		}
		if o.Progress != nil && r.Events%1024 == 0 {
			o.Progress(r.Events, uint64(max(next, 1)-1))
		}
		flushed := e.Offset < next
		if !flushed {
			r.Tail++
		}
		evNums = largestPerSeq(evNums[:0], e.Numbers)
		for _, n := range evNums {
			r.Numbers++
			k := isequencer.NumberKey{WSID: e.WSID, SeqID: n.SeqID}
			s, seen := keys[k]
			switch {
			case seen && n.Number == s.max:
				r.add(Finding{Kind: Duplicate, Partition: part, Offset: e.Offset, WSID: k.WSID, SeqID: k.SeqID, Number: n.Number,
					PrevPartition: part, PrevOffset: s.maxOff, PrevNumber: s.max,
					Text: fmt.Sprintf("WSID %d SeqID %d: number %d at offset %d was already issued at offset %d",
						k.WSID, k.SeqID, n.Number, e.Offset, s.maxOff)})
			case seen && n.Number < s.max:
				r.add(Finding{Kind: Backwards, Partition: part, Offset: e.Offset, WSID: k.WSID, SeqID: k.SeqID, Number: n.Number,
					PrevPartition: part, PrevOffset: s.maxOff, PrevNumber: s.max,
					Text: fmt.Sprintf("WSID %d SeqID %d: number %d at offset %d is below %d at offset %d (numbers must increase: reused or out of order)",
						k.WSID, k.SeqID, n.Number, e.Offset, s.max, s.maxOff)})
			default:
				s.max, s.maxOff = n.Number, e.Offset
			}
			if flushed && n.Number > s.flushed {
				s.flushed, s.flushedOff = n.Number, e.Offset
			}
			keys[k] = s
		}
		return nil
	})
	if o.Progress != nil {
		o.Progress(r.Events, uint64(max(next, 1)-1))
	}
	if err != nil {
		return nil, fmt.Errorf("plogcheck: partition %d: %w", part, err)
	}
	r.Keys = len(keys)
	if next > r.Last+1 {
		r.add(Finding{Kind: OffsetBeyondLog, Partition: part, Offset: next, PrevOffset: r.Last,
			Text: fmt.Sprintf("stored next PLog offset %d is beyond the log's end (last event at offset %d): the events between are missing", next, r.Last)})
	}
	if err := r.checkStored(ctx, o.Stored, keys); err != nil {
		return nil, fmt.Errorf("plogcheck: partition %d: reading stored numbers: %w", part, err)
	}
	return r, nil
}

// checkStored counts the workspaces of keys, reads the stored numbers of
// every key with a flushed number (one read per workspace,
// storedReadWorkers at a time) and reports each one below it.
func (r *PartitionReport) checkStored(ctx context.Context, stored Stored, keys map[isequencer.NumberKey]keyState) error {
	byWS := map[isequencer.WSID][]isequencer.SeqID{}
	for k, s := range keys {
		if _, ok := byWS[k.WSID]; !ok {
			byWS[k.WSID] = nil // counted as a workspace even with nothing to check
		}
		if s.flushed > 0 {
			byWS[k.WSID] = append(byWS[k.WSID], k.SeqID)
		}
	}
	r.Workspaces = len(byWS)
	if stored == nil {
		return nil // nothing is flushed without a stored next offset
	}
	wss := make([]isequencer.WSID, 0, len(byWS))
	for ws, ids := range byWS {
		if len(ids) > 0 {
			slices.Sort(ids)
			wss = append(wss, ws)
		}
	}
	slices.Sort(wss)
	got := make([][]isequencer.Number, len(wss))
	err := forEachBounded(ctx, len(wss), storedReadWorkers, func(ctx context.Context, i int) error {
		ids := byWS[wss[i]]
		got[i] = make([]isequencer.Number, len(ids))
		return stored.GetNumbersMax(ctx, wss[i], ids, got[i])
	})
	if err != nil {
		return err
	}
	for i, ws := range wss {
		for j, id := range byWS[ws] {
			s := keys[isequencer.NumberKey{WSID: ws, SeqID: id}]
			if n := got[i][j]; n < s.flushed {
				r.add(Finding{Kind: Regression, Partition: r.Partition, Offset: s.flushedOff, WSID: ws, SeqID: id, Number: s.flushed, Stored: n,
					Text: fmt.Sprintf("WSID %d SeqID %d: stored number %d is below %d at offset %d (below the stored next offset %d: a restart would issue it again)",
						ws, id, n, s.flushed, s.flushedOff, r.StoredNext)})
			}
		}
	}
	return nil
}

// largestPerSeq appends to dst one entry per SeqID of nums, with its
// largest number, in the order the SeqIDs first appear (an event's
// numbers are conventionally one per SeqID; readers take the largest).
func largestPerSeq(dst, nums []plog.SeqNumber) []plog.SeqNumber {
	for _, n := range nums {
		if i := slices.IndexFunc(dst, func(x plog.SeqNumber) bool { return x.SeqID == n.SeqID }); i >= 0 {
			dst[i].Number = max(dst[i].Number, n.Number)
			continue
		}
		dst = append(dst, n)
	}
	return dst
}

// forEachBounded calls fn(ctx, i) for i in [0, n) on at most workers
// goroutines (errgroup; at least one) and waits for them. The first error
// a call returns wins: it cancels the context given to the other calls,
// no call starts after it, and it is returned (the others' errors are
// dropped). When no call failed but the caller's ctx ended, ctx.Err() is
// returned; no call starts after ctx ended either.
func forEachBounded(ctx context.Context, n, workers int, fn func(ctx context.Context, i int) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(workers, 1))
	for i := range n {
		if gctx.Err() != nil {
			break // a call failed or ctx ended
		}
		g.Go(func() error {
			if gctx.Err() != nil {
				return nil // a call failed or ctx ended while this one waited
			}
			return fn(gctx, i)
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}
