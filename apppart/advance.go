package apppart

import (
	"context"
	"fmt"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/seqstorage"
	"github.com/cqlseq/cqlseq/vvmadapter"
)

// Margins are how far Advance moves a partition past its stored state:
// at least what may have been handed out since that state was saved.
type Margins struct {
	// Numbers is added to each SeqID's largest number (>= 1): at least
	// the most numbers one sequence may have handed out since.
	Numbers uint64
	// Offsets is how many PLog offsets the gap skips (1..plog.MaxSkip):
	// at least the most events the partition may have stored since.
	Offsets uint64
}

// Advance moves the partition past what may have been handed out since
// its stored state was saved, the step after a restore from a backup
// (seqstorage.Storage.Advance; docs/operations.md "Backup and restore"):
// it takes the partition over as Open does (a new epoch) and fences its
// PLog in every mode, replays the whole PLog, raises each SeqID's number
// floor to its largest number plus m.Numbers, writes a gap marker of
// m.Offsets offsets (a versioned put, in every mode, recorded as such for
// the next owner: vvmadapter.PLogWritesVersioned) and stores the next
// offset after it. o are the options the partition's owners Open it with (their
// Sequencer, MaxGroupEvents, Hooks, WriteTimeout and Metrics are unused).
//
// A running owner is deposed: in fenced mode its next write is refused;
// in the trust modes nothing stops it, so stop every owner first (`cqlseq
// advance` refuses to run while it sees one at work). After an error the
// partition may be advanced again: the floors only grow and a second run
// adds its own gap after the first's.
func Advance(ctx context.Context, o OpenOptions, m Margins) (*seqstorage.Advanced, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	// Past the restore's lost period: its late writes (versioned or
	// fenced) then replace and pass nothing this owner and its successors
	// write.
	own, err := seqstorage.TakeOver(ctx, seqstorage.TakeOverOptions{Storage: o.Storage, App: o.App, Partition: o.Partition, FencePLog: o.AppStorage, PastRestore: true})
	if err != nil {
		return nil, fmt.Errorf("apppart: advance: %w", err)
	}
	o.Logger.Info("apppart: took over partition to advance it", "app", o.App, "partition", o.Partition, "mode", o.Mode,
		"epoch", own.Owner.Epoch(), "stored_next_plog_offset", own.StoredNext, "blocks_fenced", own.FencedBlocks)
	reader, err := plog.NewReader(o.AppStorage, plog.ReaderOptions{PageTimeout: o.StorageTimeout})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	ss, err := seqstorage.New(seqstorage.Options{
		Storage: o.Storage, App: o.App, Partition: o.Partition, Reader: reader, Timeout: o.StorageTimeout,
		MinAccepted: o.MinAccepted, Owner: own.Owner,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	// The gap marker is a versioned put in every mode, which no earlier
	// owner's late write replaces; the next owner, told so, seals the
	// block it replays to (sealZone).
	if err := own.Owner.PutPLogWrites(ctx, vvmadapter.PLogWritesVersioned); err != nil {
		return nil, fmt.Errorf("apppart: advance: %w", err)
	}
	w := plog.NewMarkerWriter(o.AppStorage, o.Partition, own.Owner.Versions())
	// Every event's records are written again, as the mode writes records
	// (trust0: inserted if absent): the backup may lack some.
	gw, err := plog.NewGroupWriter(plog.WriterOptions{Storage: o.AppStorage, Partition: o.Partition, Mode: o.Mode, Versions: own.Owner.Versions()}, own.Owner.Epoch())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	records, _ := gw.(plog.RecordsWriter)
	a, err := ss.Advance(ctx, seqstorage.AdvanceOptions{Numbers: m.Numbers, Offsets: m.Offsets, Writer: w, Initial: initialValues(o.SeqTypes), Records: records})
	if err != nil {
		return nil, fmt.Errorf("apppart: %w", err)
	}
	o.Logger.Info("apppart: advanced partition", "app", o.App, "partition", o.Partition, "epoch", own.Owner.Epoch(),
		"events_replayed", a.Events, "gap_at", a.Gap, "gap_offsets", m.Offsets, "next_plog_offset", a.Next, "floors", len(a.Floors),
		"events_records_written", a.RecordEvents, "record_conflicts", len(a.RecordConflicts))
	return a, nil
}

// initialValues returns each SeqID's largest initial value over the
// workspace kinds.
func initialValues(types map[isequencer.WSKind]map[isequencer.SeqID]isequencer.Number) map[isequencer.SeqID]isequencer.Number {
	out := map[isequencer.SeqID]isequencer.Number{}
	for _, seqs := range types {
		for id, n := range seqs {
			out[id] = max(out[id], n)
		}
	}
	return out
}
