package apppart

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/seqstorage"
	"github.com/cqlseq/cqlseq/vvmadapter"
)

// maxZoneAttempts bounds sealZone's replays when a conditional zone marker
// finds an earlier owner's late event at its offset.
const maxZoneAttempts = 8

// sealZone runs, as the partition opens and before its first event, the
// step that keeps every earlier owner's late write off what this owner
// writes and reads (docs/design.md "Late writes"). A late PLog write
// lands only in the block where this owner's replay ends, or before it
// (plog.SealZone). Conditional writes (trust0, trust1, fenced) land only
// where nothing is stored, so after an owner of those modes an owner of
// those modes needs nothing. Otherwise, when an earlier owner may have
// written versioned rows (vvmadapter.PLogWritesVersioned, or no record of
// it and an epoch above 1), or this owner writes them (trust2), it
// replays the PLog tail, stores the numbers and offset it found, seals the
// zone (a void gap marker over the rest of the block: its first event is
// in the next block) and stores the offset after it; the replay is
// reported to OpenOptions.Sequencer.Metrics as the sequencer's own is. Then it records how
// it writes the PLog itself, for the next owner. An error leaves the
// partition as safe as before: the next owner reads the same record and
// seals the zone again.
//
// A versioned seal is itself a versioned PLog write that may land late:
// if this process dies with its marker held, the next owner, of a
// conditional mode, must seal against it, so the record says "versioned"
// before the marker is sent (found by the simulation: a later process of
// the same owner, reading the record an earlier owner's conditional write
// had left, wrote its events where the held marker then landed).
func sealZone(ctx context.Context, o OpenOptions, own *seqstorage.Ownership, ss *seqstorage.Storage) error {
	owner := own.Owner
	prev, known, err := owner.Adapter().GetPLogWrites(ctx, o.Partition)
	if err != nil {
		return err
	}
	versioned := known && prev == vvmadapter.PLogWritesVersioned || !known && owner.Epoch() > 1
	self := vvmadapter.PLogWritesConditional
	if o.Mode == plog.ModeTrust2 {
		self = vvmadapter.PLogWritesVersioned
	}
	if owner.Epoch() > 1 && (versioned || self == vvmadapter.PLogWritesVersioned) {
		if versioned {
			if err := owner.PutPLogWrites(ctx, vvmadapter.PLogWritesVersioned); err != nil {
				return err
			}
		}
		for attempt := 1; ; attempt++ {
			began := time.Now()
			a, err := ss.ActualizeOnce(ctx, initialValues(o.SeqTypes), true)
			if err != nil {
				return err
			}
			if m := o.Sequencer.Metrics; m != nil {
				// The partition's replay, done here rather than by the
				// sequencer (whose own then reads nothing).
				m.Actualized(int(a.Events), time.Since(began))
			}
			next, err := plog.SealZone(ctx, plog.ZoneOptions{
				Storage: o.AppStorage, Partition: o.Partition, At: a.Next, From: a.StoredNext,
				Versioned: versioned, Versions: owner.Versions(),
			})
			if errors.Is(err, plog.ErrZoneTaken) && attempt < maxZoneAttempts {
				continue // an earlier owner's event landed there: replay again
			}
			if err != nil {
				return err
			}
			if err := owner.PutPLogOffset(ctx, next); err != nil {
				return fmt.Errorf("the zone at %d is sealed; %w", a.Next, err)
			}
			o.Logger.Info("apppart: sealed the PLog block where the replay ended against earlier owners' late writes",
				"app", o.App, "partition", o.Partition, "epoch", owner.Epoch(), "replay_end", a.Next, "events_replayed", a.Events,
				"earlier_writes_versioned", versioned, "next_plog_offset", next)
			break
		}
	}
	return owner.PutPLogWrites(ctx, self)
}
