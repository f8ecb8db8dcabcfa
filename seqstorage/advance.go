package seqstorage

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/vvmadapter"
)

// AdvanceOptions configure Storage.Advance.
type AdvanceOptions struct {
	// Numbers is added to each SeqID's largest number in the partition:
	// at least the most numbers one sequence of that SeqID may have handed
	// out since the state was saved. >= 1.
	Numbers uint64
	// Offsets is how many PLog offsets the gap marker skips: at least the
	// most offsets the partition may have handed out since the state was
	// saved. 1..plog.MaxSkip.
	Offsets uint64
	// Writer writes the gap marker as the partition's owner: the mode's
	// plog.GroupWriter made with Options.Owner's epoch and versions.
	Writer plog.GroupWriter
	// Initial gives the workspaces' SeqIDs with their initial values, as
	// for ActualizeOnce; a floor is at least an initial value less one.
	Initial map[isequencer.SeqID]isequencer.Number
	// Records, if not nil, writes the record rows of every event of the
	// PLog (the mode's plog.RecordsWriter, with Options.Owner's versions):
	// a backup may lack the records of any event, not only of those after
	// its stored next offset: an event whose write's outcome was unknown
	// is taken by its owner's replay without its records, and gets them
	// when a caller settles it, which may be after the backup was taken.
	// nil: none written (a PLog without record rows).
	Records plog.RecordsWriter
}

// Validate reports every problem of o at once.
func (o *AdvanceOptions) Validate() error {
	var errs []error
	if o.Numbers == 0 {
		errs = append(errs, fmt.Errorf("%w: Numbers 0: want >= 1", ErrInvalidOptions))
	}
	if o.Offsets == 0 || o.Offsets > plog.MaxSkip {
		errs = append(errs, fmt.Errorf("%w: Offsets %d: want 1..%d", ErrInvalidOptions, o.Offsets, uint64(plog.MaxSkip)))
	}
	if o.Writer == nil {
		errs = append(errs, fmt.Errorf("%w: Writer is nil", ErrInvalidOptions))
	}
	return errors.Join(errs...)
}

// Advanced is the outcome of Advance.
type Advanced struct {
	// Actualized is the replay of the whole PLog (from offset 1).
	Actualized
	// Floors are the number floors written, by SeqID.
	Floors []vvmadapter.Floor
	// Gap is the offset of the gap marker written; the next PLog offset
	// stored is Gap + Offsets + 1 (Actualized.Next).
	Gap isequencer.PLogOffset
	// RecordEvents is how many events' records AdvanceOptions.Records
	// wrote; RecordConflicts the offsets of those whose records it refused
	// because a record row names another offset (plog.ErrRecordConflict,
	// ModeTrust0: the event stays stored without them, as when its owner
	// is refused them; the row may be one the backup held).
	RecordEvents    int
	RecordConflicts []isequencer.PLogOffset
}

// Advance moves the partition's numbers and next PLog offset past what
// may have been handed out since its state was saved: the step after a
// restore from a backup (docs/operations.md "Backup and restore"). It
// needs Options.Owner, taken (TakeOver, fencing the PLog) before the call
// so that no earlier owner writes after the replay. It
//
//  1. replays the whole PLog (from offset 1, through gap markers), reading
//     the stored numbers of every workspace the events name and, with
//     o.Records, writing the record rows of the events as it reads them,
//     advanceRecordEvents events at a time (its memory does not grow with
//     the PLog; a record row names an event already in the PLog, so
//     writing it before the floors changes no number);
//  2. raises each SeqID's floor (vvmadapter.Floor; stored floors only
//     grow) to its largest number, or its initial value less one if that
//     is larger, plus o.Numbers: every workspace's number of the SeqID,
//     a workspace the PLog does not name included, then reads as at
//     least the floor, so none up to it is handed out again;
//  3. writes a gap marker (plog.Event.Skip = o.Offsets) at the offset
//     after the last event, with o.Writer;
//  4. stores the replay's numbers and the next offset after the gap.
//
// Each step is written only if the ones before it were. An error leaves
// the partition safe to advance again: record rows are written again as
// they were, the floors only grow, and a second run reads past the
// first's marker and adds a gap of its own.
func (s *Storage) Advance(ctx context.Context, o AdvanceOptions) (*Advanced, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if s.o.Owner == nil {
		return nil, fmt.Errorf("%w: app %d partition %d: advancing", ErrNotOwner, s.o.App, s.o.Partition)
	}
	fail := func(err error) (*Advanced, error) {
		return nil, fmt.Errorf("seqstorage: advancing app %d partition %d: %w", s.o.App, s.o.Partition, err)
	}
	rctx, cancel := s.callWithin(ctx)
	stored, err := s.readNextPLogOffset(rctx)
	cancel()
	if err != nil {
		return fail(err)
	}
	adv := &Advanced{}
	recs := recordsWriter{w: o.Records, adv: adv}
	keep := func(e *plog.Event) error {
		if o.Records == nil || e.Skip != 0 || len(e.Records) == 0 {
			return nil
		}
		return recs.add(ctx, e)
	}
	a, batch, err := s.replay(ctx, o.Initial, stored, 1, keep)
	if err != nil {
		return fail(err)
	}
	if err := recs.flush(ctx); err != nil {
		return fail(err)
	}
	floors, err := s.raisedFloors(ctx, a, o)
	if err != nil {
		return fail(err)
	}
	if err := s.o.Owner.PutFloors(ctx, floors); err != nil {
		return fail(err)
	}
	s.floors.Store(floorMap(floors))
	adv.Floors = floors
	gap := &plog.Event{Offset: a.Next, Skip: o.Offsets}
	if err := o.Writer.WriteGroup(ctx, []*plog.Event{gap}); err != nil {
		return fail(fmt.Errorf("writing the gap marker at PLog offset %d (floors written: advance again): %w", gap.Offset, err))
	}
	a.Next = gap.NextOffset()
	if err := s.WriteValuesAndNextPLogOffset(batch, a.Next); err != nil {
		return fail(fmt.Errorf("the floors and the gap marker at %d are written; storing the next offset %d (advance again): %w", gap.Offset, a.Next, err))
	}
	a.Written = true
	adv.Actualized, adv.Gap = *a, gap.Offset
	return adv, nil
}

// advanceRecordEvents is how many events' records Advance holds before
// it writes them: its memory does not grow with the PLog.
const advanceRecordEvents = 1024

// recordsWriter writes the records of the events Advance replays, in
// chunks of advanceRecordEvents events, counting them in adv.
type recordsWriter struct {
	w       plog.RecordsWriter
	adv     *Advanced
	pending []*plog.Event
}

// add keeps a copy of e's records, writing the chunk once it is full.
func (r *recordsWriter) add(ctx context.Context, e *plog.Event) error {
	r.pending = append(r.pending, &plog.Event{Partition: e.Partition, Offset: e.Offset, WSID: e.WSID, Records: slices.Clone(e.Records)})
	if len(r.pending) < advanceRecordEvents {
		return nil
	}
	return r.flush(ctx)
}

// flush writes the records kept.
func (r *recordsWriter) flush(ctx context.Context) error {
	if len(r.pending) == 0 {
		return nil
	}
	err := r.w.WriteRecordsOf(ctx, r.pending, func(e *plog.Event, _ error) {
		r.adv.RecordConflicts = append(r.adv.RecordConflicts, e.Offset)
	})
	if err != nil {
		return fmt.Errorf("writing the records of the events at PLog offsets %d-%d (advance again): %w", r.pending[0].Offset, r.pending[len(r.pending)-1].Offset, err)
	}
	r.adv.RecordEvents += len(r.pending)
	clear(r.pending)
	r.pending = r.pending[:0]
	return nil
}

// raisedFloors returns the floors Advance writes: per SeqID, the largest
// of its numbers a replayed (which the stored floors already raise), its
// initial value less one and its stored floor, plus o.Numbers.
func (s *Storage) raisedFloors(ctx context.Context, a *Actualized, o AdvanceOptions) ([]vvmadapter.Floor, error) {
	top := map[isequencer.SeqID]isequencer.Number{}
	stored, err := s.readFloors(ctx)
	if err != nil {
		return nil, err
	}
	for id, n := range stored {
		top[id] = n
	}
	for id, first := range o.Initial {
		if first > 0 {
			top[id] = max(top[id], first-1)
		}
	}
	for _, n := range a.Numbers {
		top[n.SeqID] = max(top[n.SeqID], n.Last)
	}
	floors := make([]vvmadapter.Floor, 0, len(top))
	for id, n := range top {
		if uint64(n) > math.MaxUint64-o.Numbers {
			return nil, fmt.Errorf("%w: SeqID %d: %d + %d", isequencer.ErrNumberOverflow, id, n, o.Numbers)
		}
		floors = append(floors, vvmadapter.Floor{SeqID: id, Number: n + isequencer.Number(o.Numbers)})
	}
	slices.SortFunc(floors, func(x, y vvmadapter.Floor) int { return int(x.SeqID) - int(y.SeqID) })
	return floors, nil
}

func floorMap(floors []vvmadapter.Floor) *map[isequencer.SeqID]isequencer.Number {
	m := make(map[isequencer.SeqID]isequencer.Number, len(floors))
	for _, x := range floors {
		m[x.SeqID] = x.Number
	}
	return &m
}
