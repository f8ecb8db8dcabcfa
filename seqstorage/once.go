package seqstorage

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"golang.org/x/sync/errgroup"

	"github.com/cqlseq/cqlseq/isequencer"
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
// events name, reads the stored numbers (up to Options.WriteWorkers
// workspaces at a time) and reports the last and the next number of each
// SeqID in initial and each other SeqID the events name. initial gives the
// workspaces' SeqIDs with their initial values (a SeqID not in it starts
// at 1). With write, it stores the actualized numbers and the next
// offset with WriteValuesAndNextPLogOffset, so that a sequencer opened
// afterwards starts from them; without, it writes nothing.
func (s *Storage) ActualizeOnce(ctx context.Context, initial map[isequencer.SeqID]isequencer.Number, write bool) (*Actualized, error) {
	stored, err := s.ReadNextPLogOffset()
	if err != nil {
		return nil, err
	}
	a := &Actualized{Partition: s.o.Partition, StoredNext: stored, Next: max(stored, 1)}
	found := map[isequencer.NumberKey]isequencer.Number{}
	err = s.ActualizeSequencesFromPLog(ctx, max(stored, 1), func(batch []isequencer.SeqValue, off isequencer.PLogOffset) error {
		if a.Events > 0 && off < a.Next {
			return fmt.Errorf("seqstorage: app %d partition %d: PLog offset %d after %d", s.o.App, s.o.Partition, off, a.Next-1)
		}
		a.Events++
		a.Next = off + 1
		for _, v := range batch {
			found[v.Key] = max(found[v.Key], v.Value)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	byWS := map[isequencer.WSID][]isequencer.SeqID{}
	for k := range found {
		if byWS[k.WSID] == nil {
			for id := range initial {
				byWS[k.WSID] = append(byWS[k.WSID], id)
			}
		}
		if _, ok := initial[k.SeqID]; !ok {
			byWS[k.WSID] = append(byWS[k.WSID], k.SeqID)
		}
	}
	// The stored numbers, one ReadNumbers per workspace, up to
	// Options.WriteWorkers at a time.
	wss := make([]isequencer.WSID, 0, len(byWS))
	for ws, ids := range byWS {
		slices.Sort(ids)
		wss = append(wss, ws)
	}
	storedNums := make([][]isequencer.Number, len(wss))
	var g errgroup.Group
	g.SetLimit(s.o.WriteWorkers)
	for i, ws := range wss {
		g.Go(func() (err error) {
			storedNums[i], err = s.ReadNumbers(ws, byWS[ws])
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	batch := make([]isequencer.SeqValue, 0, len(found))
	for w, ws := range wss {
		ids, nums := byWS[ws], storedNums[w]
		for i, id := range ids {
			k := isequencer.NumberKey{WSID: ws, SeqID: id}
			last := max(nums[i], found[k])
			first, ok := initial[id]
			if !ok {
				first = 1
			}
			a.Numbers = append(a.Numbers, ActualizedNumber{WSID: ws, SeqID: id, Last: last, Next: max(last+1, first)})
			if found[k] > nums[i] {
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
	if write {
		if err := s.WriteValuesAndNextPLogOffset(batch, a.Next); err != nil {
			return nil, err
		}
		a.Written = true
	}
	return a, nil
}
