package simulation

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/cqlseq/cqlseq/apppart"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/plog/plogcheck"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/vvmadapter"
)

// check reads the store as it is once every held write has landed or been
// dropped, and adds to the report every violation of the promises:
//
//   - plogcheck.Partition: no number twice or backwards in the PLog (read
//     from offset 1, as every reader reads it), no stored number below one
//     the PLog holds before the stored next offset, no stored offset past
//     the PLog's end;
//   - plogcheck.Acks: every acknowledged command (Do answered Stored, or
//     Settle did) is in the PLog at its offset with its workspace, numbers
//     and payload, with its record row naming it; no offset or number
//     acknowledged twice; no number going back;
//   - every final answer: the PLog holds the command's event at its offset
//     if and only if the answer was Stored (also for a command answered
//     stored with its records refused, which plogcheck.Acks does not
//     check);
//   - no command's payload at two offsets (an event applied twice).
func (w *world) check(ctx context.Context, st storage.Storage) error {
	rd, err := plog.NewReader(st, plog.ReaderOptions{})
	if err != nil {
		return err
	}
	ad := vvmadapter.New(st, App)
	floors, err := ad.GetFloors(ctx, Partition)
	if err != nil {
		return fmt.Errorf("simulation: seed %d: %w", w.rep.Seed, err)
	}
	pr, err := plogcheck.Partition(ctx, rd, Partition, plogcheck.PartitionOptions{Stored: flooredStored{ad, floors}})
	if err != nil {
		return fmt.Errorf("simulation: seed %d: %w", w.rep.Seed, err)
	}
	w.findings("PLog", &pr.Findings)
	ar, err := plogcheck.Acks(ctx, rd, &plogcheck.AckLog{Acks: w.acks}, plogcheck.AckOptions{RecordSeqs: []isequencer.SeqID{SeqRecord}, Records: st})
	if err != nil {
		return fmt.Errorf("simulation: seed %d: %w", w.rep.Seed, err)
	}
	w.findings("acks", &ar.Findings)

	at, err := readPLog(ctx, st)
	if err != nil {
		return fmt.Errorf("simulation: seed %d: reading the PLog: %w", w.rep.Seed, err)
	}
	where := map[string]isequencer.PLogOffset{} // offset of each payload read
	for _, off := range slices.Sorted(maps.Keys(at)) {
		if prev, ok := where[string(at[off])]; ok {
			w.rep.Findings = append(w.rep.Findings, fmt.Sprintf("payload %q at offsets %d and %d: one command's event stored twice", at[off], prev, off))
		}
		where[string(at[off])] = off
	}
	w.checkLost(at)
	for _, a := range w.answers {
		switch held := bytes.Equal(at[a.res.Offset], a.cmd.Payload); {
		case a.outcome == apppart.NotStored && held:
			w.rep.Findings = append(w.rep.Findings, fmt.Sprintf("%s answered %q at offset %d not stored, and the PLog holds it there", a.by, a.cmd.Payload, a.res.Offset))
		case a.outcome == apppart.Stored && !held:
			w.rep.Findings = append(w.rep.Findings, fmt.Sprintf("%s answered %q at offset %d stored, and the PLog does not hold it there", a.by, a.cmd.Payload, a.res.Offset))
		}
	}
	return nil
}

// flooredStored reads the stored numbers as seqstorage does: each raised
// to its SeqID's floor (written by advance).
type flooredStored struct {
	*vvmadapter.Adapter
	floors []vvmadapter.Floor
}

func (f flooredStored) GetNumbersMax(ctx context.Context, ws isequencer.WSID, ids []isequencer.SeqID, dst []isequencer.Number) error {
	if err := f.Adapter.GetNumbersMax(ctx, ws, ids, dst); err != nil {
		return err
	}
	for i, id := range ids {
		for _, fl := range f.floors {
			if fl.SeqID == id {
				dst[i] = max(dst[i], fl.Number)
			}
		}
	}
	return nil
}

// readPLog returns the payload of each event the PLog's readers read (from
// offset 1, passing gap markers), by offset.
func readPLog(ctx context.Context, st storage.Storage) (map[isequencer.PLogOffset][]byte, error) {
	rd, err := plog.NewReader(st, plog.ReaderOptions{})
	if err != nil {
		return nil, err
	}
	at := map[isequencer.PLogOffset][]byte{}
	err = rd.ReadEvents(ctx, Partition, 1, func(e *plog.Event) error {
		if e.Skip == 0 {
			at[e.Offset] = bytes.Clone(e.Payload)
		}
		return nil
	})
	return at, err
}

// checkLost: no offset or number of a command acknowledged and then lost
// with a restore is acknowledged again for a command made after the
// restore (the promise advance keeps: what was handed out since the backup
// is never handed out again), and no event of such a command the PLog's
// readers read holds a lost offset. (A command of the lost period whose
// outcome was unknown may still land where a lost one was acknowledged, if
// it lands before advance replays: that is the lost period's own
// write, not an offset handed out again.)
func (w *world) checkLost(at map[isequencer.PLogOffset][]byte) {
	type key struct {
		ws  isequencer.WSID
		seq int
		n   isequencer.Number
	}
	offsets := map[isequencer.PLogOffset]answer{}
	numbers := map[key]answer{}
	for _, a := range w.lost {
		offsets[a.res.Offset] = a
		for j, n := range a.res.Numbers {
			numbers[key{a.cmd.WSID, j, n}] = a
		}
	}
	for off, payload := range at {
		if l, ok := offsets[off]; ok && w.afterRestore(payload) {
			w.rep.Findings = append(w.rep.Findings, fmt.Sprintf("restore: offset %d of %q (acknowledged, lost with the restore) holds %q: an offset handed out again", off, l.cmd.Payload, payload))
		}
	}
	for _, a := range w.answers {
		if a.outcome != apppart.Stored || !w.afterRestore(a.cmd.Payload) {
			continue
		}
		for j, n := range a.res.Numbers {
			if l, ok := numbers[key{a.cmd.WSID, j, n}]; ok {
				w.rep.Findings = append(w.rep.Findings, fmt.Sprintf("restore: WSID %d number %d of %q (acknowledged, lost with the restore) acknowledged again for %q: a number handed out again", a.cmd.WSID, n, l.cmd.Payload, a.cmd.Payload))
			}
		}
	}
}

// afterRestore reports whether the command of payload was made after the
// restore.
func (w *world) afterRestore(payload []byte) bool {
	var n int
	if _, err := fmt.Sscanf(string(payload), "cmd %d", &n); err != nil {
		panic(fmt.Sprintf("simulation: payload %q", payload))
	}
	return w.restoredAt > 0 && n > w.restoredAt
}

func (w *world) findings(what string, f *plogcheck.Findings) {
	for _, x := range f.Listed {
		w.rep.Findings = append(w.rep.Findings, fmt.Sprintf("%s: %v: %s", what, x.Kind, x.Text))
	}
	if n := f.Unlisted(); n > 0 {
		w.rep.Findings = append(w.rep.Findings, fmt.Sprintf("%s: %d more findings", what, n))
	}
}
