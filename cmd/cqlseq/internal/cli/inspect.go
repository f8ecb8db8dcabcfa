package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/vvmadapter"
)

type inspectFlags struct {
	store     storeFlags
	app       uint32
	partition uint
	wsText    []string
	ws        []uint64 // parsed by validate
	from      uint64
	to        uint64
	limit     int
}

func newInspectCmd(e *env) *cobra.Command {
	f := &inspectFlags{}
	cmd := &cobra.Command{
		Use:   "inspect",
		Short: "Show a partition's next PLog offset and epoch, workspaces' numbers, and PLog events",
		Long: `inspect shows, for one application partition: the stored next PLog offset
and ownership epoch (vvmadapter's rows), the stored numbers of each --ws
workspace (every SeqID stored), and the PLog events from --from, decoded,
up to --to (inclusive) and at most --limit of them; with --ws, only the
events of those workspaces (the scan reads past the others).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return usage(err)
			}
			return runInspect(cmd.Context(), e, f)
		},
	}
	fs := cmd.Flags()
	f.store.addKind(fs)
	f.store.addBoltReadOnly(fs, "bbolt: directory of "+boltFileName)
	f.store.cluster.add(fs)
	fs.Uint32Var(&f.app, "app", 1, "cluster application ID of the stored numbers (PLog keys carry none)")
	fs.UintVar(&f.partition, "partition", 0, "partition")
	fs.StringSliceVar(&f.wsText, "ws", nil, "workspaces (WSIDs) whose numbers and events to show (repeat or comma-separate; none: every event)")
	fs.Uint64Var(&f.from, "from", 1, "first PLog offset to show")
	fs.Uint64Var(&f.to, "to", 0, "last PLog offset to show (0: no bound)")
	fs.IntVar(&f.limit, "limit", 20, "events to show at most (0: none)")
	cmd.AddCommand(newInspectGallocCmd(e))
	return cmd
}

func (f *inspectFlags) validate() error {
	errs := []error{f.store.validate()}
	errs = append(errs, validPartitions([]uint{f.partition})...)
	f.ws = f.ws[:0]
	for _, s := range f.wsText {
		ws, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("--ws %q: want a WSID (1..2^64-1)", s))
		case ws == 0:
			errs = append(errs, errors.New("--ws 0: WSID 0 is not a workspace"))
		default:
			f.ws = append(f.ws, ws)
		}
	}
	if f.from == 0 {
		errs = append(errs, errors.New("--from 0: offsets start at 1"))
	}
	if f.to != 0 && f.to < f.from {
		errs = append(errs, fmt.Errorf("--to %d is below --from %d", f.to, f.from))
	}
	if f.limit < 0 {
		errs = append(errs, fmt.Errorf("--limit %d: want >= 0", f.limit))
	}
	return errors.Join(errs...)
}

// errEnough stops a PLog read at --limit or --to.
var errEnough = errors.New("enough events")

func runInspect(ctx context.Context, e *env, f *inspectFlags) (err error) {
	store, err := f.store.open(ctx, e.log, true)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, store.close()) }()
	st := store.st
	app, part := isequencer.ClusterAppID(f.app), isequencer.PartitionID(f.partition)
	w := e.stdout
	fmt.Fprintf(w, "inspect: %s, app %d, partition %d\n", store.desc, app, part)

	next, ok, err := vvmadapter.New(st, app).GetPLogOffset(ctx, part)
	if err != nil {
		return err
	}
	if ok {
		fmt.Fprintf(w, "%-18s%d (stored: events below it are reflected in the stored numbers)\n", "next PLog offset", next)
	} else {
		fmt.Fprintf(w, "%-18snone stored\n", "next PLog offset")
	}
	if err := printEpoch(ctx, w, st, app, part); err != nil {
		return err
	}
	for _, ws := range f.ws {
		if err := printNumbers(ctx, w, st, app, isequencer.WSID(ws)); err != nil {
			return err
		}
	}
	if f.limit == 0 {
		return nil
	}
	return printEvents(ctx, w, st, part, f)
}

func printEpoch(ctx context.Context, w io.Writer, st storage.Storage, app isequencer.ClusterAppID, part isequencer.PartitionID) error {
	v, ok, err := vvmadapter.New(st, app).ReadEpoch(ctx, part)
	if err != nil {
		return err
	}
	if !ok {
		fmt.Fprintf(w, "%-18snone stored (the row is reserved for partition ownership)\n", "epoch")
		return nil
	}
	fmt.Fprintf(w, "%-18s%d\n", "epoch", v)
	return nil
}

// printNumbers prints every number cell stored for workspace ws (one
// partition read): the seed's cells (SeqID) and the per-epoch cells fenced
// owners wrote before version ranges (SeqID@epoch); the sequencer uses the
// largest per SeqID (and the partition's floor).
func printNumbers(ctx context.Context, w io.Writer, st storage.Storage, app isequencer.ClusterAppID, ws isequencer.WSID) error {
	var parts []string
	err := vvmadapter.New(st, app).ReadNumberCells(ctx, ws, func(c vvmadapter.NumberCell) error {
		parts = append(parts, c.String())
		return nil
	})
	if err != nil {
		return err
	}
	if len(parts) == 0 {
		fmt.Fprintf(w, "%-18sno numbers stored\n", fmt.Sprintf("workspace %d", ws))
		return nil
	}
	fmt.Fprintf(w, "%-18s%s\n", fmt.Sprintf("workspace %d", ws), strings.Join(parts, ", "))
	return nil
}

func printEvents(ctx context.Context, w io.Writer, st storage.Storage, part isequencer.PartitionID, f *inspectFlags) error {
	r, err := plog.NewReader(st, plog.ReaderOptions{PageTimeout: scanPageTimeout})
	if err != nil {
		return err
	}
	if len(f.ws) == 0 {
		fmt.Fprintf(w, "events from offset %d:\n", f.from)
	} else {
		fmt.Fprintf(w, "events of workspace %s from offset %d:\n", joinUints(f.ws), f.from)
	}
	shown := 0
	last := isequencer.PLogOffset(0)
	err = r.ReadEvents(ctx, part, isequencer.PLogOffset(f.from), func(e *plog.Event) error {
		if f.to != 0 && uint64(e.Offset) > f.to {
			return errEnough
		}
		last = e.NextOffset() - 1
		if len(f.ws) > 0 && !slices.Contains(f.ws, uint64(e.WSID)) {
			return nil
		}
		fmt.Fprintf(w, "  %s\n", formatEvent(e))
		shown++
		if shown >= f.limit {
			return errEnough
		}
		return nil
	})
	switch {
	case errors.Is(err, errEnough) && shown == 0:
		fmt.Fprintf(w, "  none up to offset %d\n", f.to)
	case errors.Is(err, errEnough):
		return nil
	case err != nil:
		return err
	case last == 0:
		fmt.Fprintf(w, "  none: the log has no event at offset %d\n", f.from)
	case shown == 0:
		fmt.Fprintf(w, "  none of these workspaces' (the log ends after offset %d)\n", last)
	default:
		fmt.Fprintf(w, "  (the log ends after offset %d)\n", last)
	}
	return nil
}

// joinUints formats vs as "1, 5, 9".
func joinUints(vs []uint64) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = strconv.FormatUint(v, 10)
	}
	return strings.Join(parts, ", ")
}

func formatEvent(e *plog.Event) string {
	if e.Skip > 0 && e.Void {
		return fmt.Sprintf("offset %d: void marker: offsets %d..%d hold no event (writes in doubt abandoned)", e.Offset, e.Offset+1, e.NextOffset()-1)
	}
	if e.Skip > 0 {
		return fmt.Sprintf("offset %d: gap marker: offsets %d..%d hold no event (cqlseq advance)", e.Offset, e.Offset+1, e.NextOffset()-1)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "offset %d: WSID %d kind %d", e.Offset, e.WSID, e.WSKind)
	if e.WLogOffset != 0 {
		fmt.Fprintf(&b, " wlog %d", e.WLogOffset)
	}
	b.WriteString(" numbers [")
	for i, n := range e.Numbers {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d:%d", n.SeqID, n.Number)
	}
	b.WriteString("]")
	if len(e.Records) > 0 {
		fmt.Fprintf(&b, " records %v", e.Records)
	}
	fmt.Fprintf(&b, " payload %d bytes", len(e.Payload))
	return b.String()
}
