package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/vvmadapter"
)

// maxListed is how many findings of each kind a scan keeps to print.
const maxListed = 20

// scanReadWorkers bounds the concurrent reads of stored numbers.
const scanReadWorkers = 8

// Finding kinds.
const (
	findDuplicate  = "duplicate"
	findBackwards  = "backwards"
	findRegression = "regression"
	findOffset     = "offset"
)

// finding is one problem a scan found.
type finding struct {
	Kind string `json:"kind"`
	Text string `json:"text"`
}

// scanResult is what scanPartition found in one partition.
type scanResult struct {
	App        isequencer.ClusterAppID
	Partition  isequencer.PartitionID
	StoredNext isequencer.PLogOffset // the stored next PLog offset; 0: none stored
	Events     uint64                // events read, from offset 1 to the first missing offset
	Last       isequencer.PLogOffset // offset of the last event read; 0: none
	Numbers    uint64                // (event, SeqID) numbers checked
	Keys       int                   // distinct (WSID, SeqID) in the PLog
	Workspaces int                   // distinct WSIDs in the PLog
	Tail       uint64                // events at or after StoredNext: not yet reflected in the stored numbers
	Problems   uint64                // findings, all kinds
	ByKind     map[string]uint64
	Listed     []finding // the first maxListed of each kind
}

// ok reports whether the scan found nothing wrong.
func (r *scanResult) ok() bool { return r.Problems == 0 }

func (r *scanResult) add(kind, format string, a ...any) {
	addFinding(&r.Problems, &r.ByKind, &r.Listed, kind, fmt.Sprintf(format, a...))
}

// addFinding counts a finding of kind and keeps the first maxListed of
// each kind.
func addFinding(problems *uint64, byKind *map[string]uint64, listed *[]finding, kind, text string) {
	*problems++
	if *byKind == nil {
		*byKind = map[string]uint64{}
	}
	(*byKind)[kind]++
	if (*byKind)[kind] <= maxListed {
		*listed = append(*listed, finding{Kind: kind, Text: text})
	}
}

// keyState is what a scan remembers of one (WSID, SeqID).
type keyState struct {
	max        isequencer.Number     // the largest number seen
	maxOff     isequencer.PLogOffset // the event that carried it
	flushed    isequencer.Number     // the largest number of an event below the stored next offset
	flushedOff isequencer.PLogOffset
}

// scanPartition reads partition part's stored next PLog offset, then its
// whole PLog (from offset 1 to the first missing offset), then the stored
// numbers of every (WSID, SeqID) the PLog names, and checks that
//
//   - the numbers of one (WSID, SeqID) strictly increase with the event
//     offset, so no number appears twice (an equal number is reported as a
//     duplicate, a smaller one as going backwards);
//   - every stored number is >= every number of that key carried by an
//     event below the stored next offset (those events are flushed: a
//     restart does not replay them);
//   - the stored next offset is at most one past the last event.
//
// Numbers of events at or after the stored next offset (the unflushed
// tail) are checked only for increase: a restart replays them. The stored
// next offset is read first and stored numbers only ever grow, so a scan
// of a partition that is in use finds no false regression.
//
// progress, if set, is called now and then with the number of events read
// so far and the number expected (the stored next offset - 1).
func scanPartition(ctx context.Context, st storage.Storage, app isequencer.ClusterAppID, part isequencer.PartitionID, pageTimeout time.Duration, progress func(events, estimate uint64)) (*scanResult, error) {
	r := &scanResult{App: app, Partition: part}
	ad := vvmadapter.New(st, app)
	next, _, err := ad.GetPLogOffset(ctx, part)
	if err != nil {
		return nil, err
	}
	r.StoredNext = next
	reader, err := plog.NewReader(st, plog.ReaderOptions{PageTimeout: pageTimeout})
	if err != nil {
		return nil, err
	}
	keys := map[isequencer.NumberKey]keyState{}
	var evNums []plog.SeqNumber // the event's numbers, largest per SeqID
	err = reader.ReadEvents(ctx, part, 1, func(e *plog.Event) error {
		r.Events++
		r.Last = e.Offset
		if progress != nil && r.Events%1024 == 0 {
			progress(r.Events, uint64(max(next, 1)-1))
		}
		flushed := e.Offset < next
		if !flushed {
			r.Tail++
		}
		evNums = evNums[:0]
		for _, n := range e.Numbers {
			if i := slices.IndexFunc(evNums, func(x plog.SeqNumber) bool { return x.SeqID == n.SeqID }); i >= 0 {
				evNums[i].Number = max(evNums[i].Number, n.Number)
				continue
			}
			evNums = append(evNums, n)
		}
		for _, n := range evNums {
			r.Numbers++
			k := isequencer.NumberKey{WSID: e.WSID, SeqID: n.SeqID}
			s, seen := keys[k]
			switch {
			case seen && n.Number == s.max:
				r.add(findDuplicate, "WSID %d SeqID %d: number %d at offset %d was already issued at offset %d",
					k.WSID, k.SeqID, n.Number, e.Offset, s.maxOff)
			case seen && n.Number < s.max:
				r.add(findBackwards, "WSID %d SeqID %d: number %d at offset %d is below %d at offset %d (numbers must increase: reused or out of order)",
					k.WSID, k.SeqID, n.Number, e.Offset, s.max, s.maxOff)
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
	if progress != nil {
		progress(r.Events, uint64(max(next, 1)-1))
	}
	if err != nil {
		return nil, err
	}
	r.Keys = len(keys)
	if next > r.Last+1 {
		r.add(findOffset, "stored next PLog offset %d is beyond the log's end (last event at offset %d): the events between are missing", next, r.Last)
	}
	return r, checkStored(ctx, ad, keys, r)
}

// checkStored reads the stored numbers of every WSID in keys (one read per
// workspace, scanReadWorkers at a time) and adds a regression finding for
// each stored number below the key's flushed number.
func checkStored(ctx context.Context, ad *vvmadapter.Adapter, keys map[isequencer.NumberKey]keyState, r *scanResult) error {
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
	wss := make([]isequencer.WSID, 0, len(byWS))
	for ws, ids := range byWS {
		if len(ids) > 0 {
			slices.Sort(ids)
			wss = append(wss, ws)
		}
	}
	slices.Sort(wss)
	stored := make([][]isequencer.Number, len(wss))
	err := forEachBounded(ctx, len(wss), scanReadWorkers, func(ctx context.Context, i int) error {
		ids := byWS[wss[i]]
		stored[i] = make([]isequencer.Number, len(ids))
		return ad.GetNumbersMax(ctx, wss[i], ids, stored[i]) // seed and per-epoch (fenced) cells, as the sequencer reads them
	})
	if err != nil {
		return err
	}
	for i, ws := range wss {
		for j, id := range byWS[ws] {
			s := keys[isequencer.NumberKey{WSID: ws, SeqID: id}]
			if got := stored[i][j]; got < s.flushed {
				r.add(findRegression, "WSID %d SeqID %d: stored number %d is below %d at offset %d (below the stored next offset %d: a restart would issue it again)",
					ws, id, got, s.flushed, s.flushedOff, r.StoredNext)
			}
		}
	}
	return nil
}

// forEachBounded calls fn(ctx, i) for i in [0, n) on at most workers
// goroutines and waits for them. The first error cancels the others'
// context and is returned.
func forEachBounded(ctx context.Context, n, workers int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		next     int
	)
	take := func() (int, bool) {
		mu.Lock()
		defer mu.Unlock()
		if next >= n || firstErr != nil {
			return 0, false
		}
		next++
		return next - 1, true
	}
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i, ok := take()
				if !ok {
					return
				}
				if err := fn(ctx, i); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
						cancel()
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return firstErr
}

// errVerifyFailed marks a verification that found problems (exit 1).
var errVerifyFailed = errors.New("verification failed")
