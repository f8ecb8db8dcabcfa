package simulation

import (
	"bytes"
	"context"
	"fmt"

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
	pr, err := plogcheck.Partition(ctx, rd, Partition, plogcheck.PartitionOptions{Stored: vvmadapter.New(st, App)})
	if err != nil {
		return fmt.Errorf("simulation: seed %d: %w", w.rep.Seed, err)
	}
	w.findings("PLog", &pr.Findings)
	ar, err := plogcheck.Acks(ctx, rd, &plogcheck.AckLog{Acks: w.acks}, plogcheck.AckOptions{RecordSeqs: []isequencer.SeqID{SeqRecord}, Records: st})
	if err != nil {
		return fmt.Errorf("simulation: seed %d: %w", w.rep.Seed, err)
	}
	w.findings("acks", &ar.Findings)

	at := map[isequencer.PLogOffset][]byte{}    // payload of the event read at each offset
	where := map[string]isequencer.PLogOffset{} // offset of each payload read
	err = rd.ReadEvents(ctx, Partition, 1, func(e *plog.Event) error {
		if e.Skip > 0 {
			return nil
		}
		at[e.Offset] = bytes.Clone(e.Payload)
		if prev, ok := where[string(e.Payload)]; ok {
			w.rep.Findings = append(w.rep.Findings, fmt.Sprintf("payload %q at offsets %d and %d: one command's event stored twice", e.Payload, prev, e.Offset))
		}
		where[string(e.Payload)] = e.Offset
		return nil
	})
	if err != nil {
		return fmt.Errorf("simulation: seed %d: reading the PLog: %w", w.rep.Seed, err)
	}
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

func (w *world) findings(what string, f *plogcheck.Findings) {
	for _, x := range f.Listed {
		w.rep.Findings = append(w.rep.Findings, fmt.Sprintf("%s: %v: %s", what, x.Kind, x.Text))
	}
	if n := f.Unlisted(); n > 0 {
		w.rep.Findings = append(w.rep.Findings, fmt.Sprintf("%s: %d more findings", what, n))
	}
}
