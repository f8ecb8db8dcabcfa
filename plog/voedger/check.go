package voedger

import (
	"context"
	"fmt"

	"github.com/cqlseq/cqlseq/isequencer"
)

// ProblemKind names what Check found wrong.
type ProblemKind string

// Problem kinds.
const (
	// DuplicateRecordID: a record ID created by an earlier event of the
	// workspace is created again (sys.Corrupted events count with the
	// records of the event they carry).
	DuplicateRecordID ProblemKind = "duplicate-record-id"
	// WLogOffsetRepeat: an event has the WLog offset of the workspace's
	// previous event.
	WLogOffsetRepeat ProblemKind = "wlog-offset-repeat"
	// WLogOffsetBack: an event's WLog offset is below the workspace's
	// previous event's.
	WLogOffsetBack ProblemKind = "wlog-offset-back"
)

// Problem is one finding of Check.
type Problem struct {
	Kind   ProblemKind
	WSID   isequencer.WSID
	Offset isequencer.PLogOffset // the event where it was found
	Value  uint64                // the record ID or WLog offset
	// PrevOffset and Prev: the earlier event it clashes with and its value
	// (the record's creator; the workspace's previous WLog offset).
	PrevOffset isequencer.PLogOffset
	Prev       uint64
}

func (p Problem) String() string {
	switch p.Kind {
	case DuplicateRecordID:
		return fmt.Sprintf("WSID %d: record ID %d created at offset %d again at offset %d", p.WSID, p.Value, p.PrevOffset, p.Offset)
	default:
		return fmt.Sprintf("WSID %d: WLog offset %d at offset %d after WLog offset %d at offset %d (%s)", p.WSID, p.Value, p.Offset, p.Prev, p.PrevOffset, p.Kind)
	}
}

// CheckReport is what Check found in one partition.
type CheckReport struct {
	Partition   isequencer.PartitionID
	Events      uint64
	First, Last isequencer.PLogOffset // 0 when there are no events
	Workspaces  int
	RecordIDs   uint64 // record IDs created (argument trees and CUD creates)
	Problems    []Problem
}

// OK reports whether no problem was found.
func (r *CheckReport) OK() bool { return len(r.Problems) == 0 }

// Check reads partition part of the PLog from its first event to the
// first missing offset (ReadEvents) and reports every record ID created
// twice in a workspace (by argument trees with IDs, CUD creates, and the
// original events of sys.Corrupted events; singleton IDs included) and
// every WLog offset that does not grow along the workspace's events.
// Invalid events count with their WLog offset only. It keeps every record
// ID of the partition in memory. A read error is returned with the report
// so far.
func Check(ctx context.Context, r *Reader, part isequencer.PartitionID) (*CheckReport, error) {
	type wlog struct {
		off isequencer.PLogOffset
		v   uint64
	}
	rep := &CheckReport{Partition: part}
	created := map[isequencer.WSID]map[uint64]isequencer.PLogOffset{}
	last := map[isequencer.WSID]wlog{}
	err := r.ReadEvents(ctx, part, 0, func(e *Event) error {
		rep.Events++
		if rep.First == 0 {
			rep.First = e.Offset
		}
		rep.Last = e.Offset
		ids := created[e.WSID]
		if ids == nil {
			ids = map[uint64]isequencer.PLogOffset{}
			created[e.WSID] = ids
		}
		for o := e; o != nil; o = o.Original {
			if !o.Valid {
				continue
			}
			for _, id := range append(o.ArgumentIDs(), o.CreatedIDs()...) {
				rep.RecordIDs++
				if prev, dup := ids[id]; dup {
					rep.Problems = append(rep.Problems, Problem{Kind: DuplicateRecordID, WSID: e.WSID, Offset: e.Offset, Value: id, PrevOffset: prev})
					continue
				}
				ids[id] = e.Offset
			}
		}
		if p, ok := last[e.WSID]; ok && e.WLogOffset <= p.v {
			kind := WLogOffsetBack
			if e.WLogOffset == p.v {
				kind = WLogOffsetRepeat
			}
			rep.Problems = append(rep.Problems, Problem{Kind: kind, WSID: e.WSID, Offset: e.Offset, Value: e.WLogOffset, PrevOffset: p.off, Prev: p.v})
		}
		last[e.WSID] = wlog{off: e.Offset, v: e.WLogOffset}
		return nil
	})
	rep.Workspaces = len(created)
	return rep, err
}
