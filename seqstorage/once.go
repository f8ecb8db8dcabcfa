package seqstorage

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/vvmadapter"
)

// ActualizedNumber is one (workspace, SeqID) that an actualization found.
type ActualizedNumber struct {
	WSID  isequencer.WSID
	SeqID isequencer.SeqID
	// Last is the largest of the stored number and the numbers of the
	// events read (0: none).
	Last isequencer.Number
	// Next is what the sequencer hands out next: Last+1, at least the
	// initial value.
	Next isequencer.Number
}

// Actualized is the outcome of ActualizeOnce.
type Actualized struct {
	Partition isequencer.PartitionID
	// StoredNext is the stored next PLog offset (0: none); the PLog was
	// read from it.
	StoredNext isequencer.PLogOffset
	// Next is the next PLog offset: one past the last event read, or
	// StoredNext (at least 1) when none was read.
	Next    isequencer.PLogOffset
	Events  uint64
	Numbers []ActualizedNumber // by WSID, then SeqID
	Written bool
}

// ActualizeOnce does what a sequencer does when it opens, without issuing
// anything: it reads the stored next PLog offset, replays the PLog from
// it through ActualizeSequencesFromPLog, and, for every workspace the
// events name, reads the stored numbers and reports the last and the next
// number of each SeqID in initial and each other SeqID the events name.
// initial gives the workspaces' SeqIDs with their initial values (a SeqID
// not in it starts at 1). With write, it stores the actualized numbers and
// the next offset with WriteValuesAndNextPLogOffset, so that a sequencer
// opened afterwards starts from them; without, it writes nothing. Writing
// needs Options.Owner, taken before the call (TakeOver), so that the
// replay starts after the takeover: with write and no Owner it returns an
// error wrapping ErrNotOwner and reads nothing.
//
// The stored numbers are read while the replay goes on: a workspace's
// read is queued when an event first names it, and up to
// Options.WriteWorkers readers each take up to storedReadBatch queued
// workspaces at a time and read them in one storage.ReadPartitions
// (bounded by Options.Timeout), so that the replay's and the reads' round
// trips overlap, and a tail that names many workspaces costs a request per
// batch of them, not per workspace. The first failed read ends the replay
// and is returned; a failed replay ends the reads.
func (s *Storage) ActualizeOnce(ctx context.Context, initial map[isequencer.SeqID]isequencer.Number, write bool) (*Actualized, error) {
	if write && s.o.Owner == nil {
		return nil, fmt.Errorf("%w: app %d partition %d: actualizing with write", ErrNotOwner, s.o.App, s.o.Partition)
	}
	rctx, cancel := s.callWithin(ctx)
	stored, err := s.readNextPLogOffset(rctx)
	cancel()
	if err != nil {
		return nil, err
	}
	a, batch, err := s.replay(ctx, initial, stored, max(stored, 1), nil)
	if err != nil {
		return nil, err
	}
	if write {
		if err := s.WriteValuesAndNextPLogOffset(batch, a.Next); err != nil {
			return nil, err
		}
		a.Written = true
	}
	return a, nil
}

// replay is ActualizeOnce's reading, from PLog offset from (stored is the
// stored next offset): the actualized numbers, and those of them above
// the stored ones, by WSID then SeqID. It shows each event read to
// onEvent, if not nil (valid during the call only; its error ends the
// replay).
func (s *Storage) replay(ctx context.Context, initial map[isequencer.SeqID]isequencer.Number, stored, from isequencer.PLogOffset, onEvent func(*plog.Event) error) (*Actualized, []isequencer.SeqValue, error) {
	a := &Actualized{Partition: s.o.Partition, StoredNext: stored, Next: from}
	initialIDs := make([]isequencer.SeqID, 0, len(initial))
	for id := range initial {
		initialIDs = append(initialIDs, id)
	}
	slices.Sort(initialIDs)

	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := newStoredReader(rctx, s)
	found := map[isequencer.NumberKey]isequencer.Number{}
	byWS := map[isequencer.WSID][]isequencer.SeqID{} // initialIDs, then the others found
	replayErr := s.actualizeFromPLog(r.ctx, from, onEvent, func(batch []isequencer.SeqValue, off isequencer.PLogOffset) error {
		if a.Events > 0 && off < a.Next {
			return fmt.Errorf("seqstorage: app %d partition %d: PLog offset %d after %d", s.o.App, s.o.Partition, off, a.Next-1)
		}
		a.Events++
		a.Next = off + 1
		for _, v := range batch {
			if last, ok := found[v.Key]; ok {
				found[v.Key] = max(last, v.Value)
				continue
			}
			found[v.Key] = v.Value
			ids, seen := byWS[v.Key.WSID]
			_, isInitial := initial[v.Key.SeqID]
			var read []isequencer.SeqID // what to read of the workspace now
			switch {
			case !seen:
				read = slices.Clone(initialIDs)
				if !isInitial {
					read = append(read, v.Key.SeqID)
				}
				byWS[v.Key.WSID] = slices.Clone(read)
			case !isInitial:
				read = []isequencer.SeqID{v.Key.SeqID}
				byWS[v.Key.WSID] = append(ids, v.Key.SeqID)
			default:
				continue // read with the workspace's initial SeqIDs
			}
			if err := r.read(v.Key.WSID, read); err != nil {
				return err
			}
		}
		return nil
	})
	// A read that failed ended the replay (with r.ctx's error), unless the
	// caller's ctx was done too.
	readsEnded := r.ctx.Err() != nil && ctx.Err() == nil
	if replayErr != nil {
		cancel() // the reads are of no use now
	}
	storedNums, readErr := r.wait()
	switch {
	case replayErr != nil && !readsEnded:
		return nil, nil, replayErr
	case readErr != nil:
		return nil, nil, readErr
	case replayErr != nil:
		return nil, nil, replayErr
	}

	batch := make([]isequencer.SeqValue, 0, len(found))
	for ws, ids := range byWS {
		for _, id := range ids {
			k := isequencer.NumberKey{WSID: ws, SeqID: id}
			last := max(storedNums[k], found[k])
			first, ok := initial[id]
			if !ok {
				first = 1
			}
			a.Numbers = append(a.Numbers, ActualizedNumber{WSID: ws, SeqID: id, Last: last, Next: max(last+1, first)})
			if found[k] > storedNums[k] {
				batch = append(batch, isequencer.SeqValue{Key: k, Value: found[k]})
			}
		}
	}
	slices.SortFunc(a.Numbers, func(x, y ActualizedNumber) int {
		if x.WSID != y.WSID {
			return cmp.Compare(x.WSID, y.WSID)
		}
		return cmp.Compare(x.SeqID, y.SeqID)
	})
	slices.SortFunc(batch, func(x, y isequencer.SeqValue) int {
		if x.Key.WSID != y.Key.WSID {
			return cmp.Compare(x.Key.WSID, y.Key.WSID)
		}
		return cmp.Compare(x.Key.SeqID, y.Key.SeqID)
	})
	return a, batch, nil
}

// storedReadBatch is the most workspaces a storedReader reads in one
// request, at most storage.MaxReadPartitions. 50: 10,000 workspaces read
// 32 requests at a time on a 3-node cluster at RF 3 took 0.80-1.20 s at 50
// a request, 0.93-1.21 s at 100 and 3.03-4.27 s at one (docs/benchmarks.md).
const storedReadBatch = 50

// storedRead is one workspace's stored numbers to read.
type storedRead struct {
	ws  isequencer.WSID
	ids []isequencer.SeqID
}

// storedReader reads workspaces' stored numbers for ActualizeOnce, in up to
// Options.WriteWorkers requests at a time of up to storedReadBatch
// workspaces each, while the replay that names them goes on.
// Its queue is not bounded: it holds at most one read per key the replay
// found, which ActualizeOnce keeps anyway, and a bounded one would hold the
// replay back while the first events name most workspaces. Its goroutines
// are started by newStoredReader and ended by wait, which ActualizeOnce
// calls on every path.
type storedReader struct {
	s    *Storage
	g    *errgroup.Group
	ctx  context.Context // ended by the first failed read or by the caller's
	stop func() bool     // of the AfterFunc that wakes the readers when ctx ends

	mu      sync.Mutex
	cond    sync.Cond // on mu: pending, closed or ctx changed
	pending []storedRead
	closed  bool
	stored  map[isequencer.NumberKey]isequencer.Number
}

func newStoredReader(ctx context.Context, s *Storage) *storedReader {
	g, gctx := errgroup.WithContext(ctx)
	r := &storedReader{s: s, g: g, ctx: gctx, stored: map[isequencer.NumberKey]isequencer.Number{}}
	r.cond.L = &r.mu
	r.stop = context.AfterFunc(gctx, func() {
		r.mu.Lock()
		r.cond.Broadcast()
		r.mu.Unlock()
	})
	for range s.o.WriteWorkers {
		g.Go(r.work)
	}
	return r
}

// read queues a read of ws's ids; ids must not change afterwards. It fails
// once the reader's context is done.
func (r *storedReader) read(ws isequencer.WSID, ids []isequencer.SeqID) error {
	if err := r.ctx.Err(); err != nil {
		return err
	}
	r.mu.Lock()
	r.pending = append(r.pending, storedRead{ws: ws, ids: ids})
	r.mu.Unlock()
	r.cond.Signal()
	return nil
}

// take waits for queued reads and appends to dst the workspaces of up to
// storedReadBatch of them, the oldest first (two reads of one workspace
// become one read of both's SeqIDs); nil once the queue is closed and
// empty or the reader's context is done.
func (r *storedReader) take(dst []vvmadapter.WorkspaceNumbers) []vvmadapter.WorkspaceNumbers {
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.pending) == 0 && !r.closed && r.ctx.Err() == nil {
		r.cond.Wait()
	}
	if len(r.pending) == 0 || r.ctx.Err() != nil {
		return nil
	}
	n := min(len(r.pending), storedReadBatch)
	for _, q := range r.pending[:n] {
		i := slices.IndexFunc(dst, func(w vvmadapter.WorkspaceNumbers) bool { return w.WSID == q.ws })
		if i < 0 {
			dst = append(dst, vvmadapter.WorkspaceNumbers{WSID: q.ws, IDs: q.ids})
			continue
		}
		dst[i].IDs = append(slices.Clip(dst[i].IDs), q.ids...)
	}
	r.pending = r.pending[n:]
	for i := range dst {
		dst[i].Numbers = make([]isequencer.Number, len(dst[i].IDs))
	}
	return dst
}

func (r *storedReader) work() error {
	var reads []vvmadapter.WorkspaceNumbers
	for {
		if reads = r.take(reads[:0]); reads == nil {
			return nil
		}
		ctx, cancel := r.s.callWithin(r.ctx)
		err := r.s.readWorkspacesNumbers(ctx, reads)
		cancel()
		if err != nil {
			return err
		}
		r.mu.Lock()
		for _, q := range reads {
			for i, id := range q.IDs {
				r.stored[isequencer.NumberKey{WSID: q.WSID, SeqID: id}] = q.Numbers[i]
			}
		}
		r.mu.Unlock()
	}
}

// wait closes the queue, waits for the readers to finish it and returns
// the numbers read, or the first read's error.
func (r *storedReader) wait() (map[isequencer.NumberKey]isequencer.Number, error) {
	r.mu.Lock()
	r.closed = true
	r.cond.Broadcast()
	r.mu.Unlock()
	err := r.g.Wait()
	r.stop()
	if err != nil {
		return nil, err
	}
	return r.stored, nil
}
