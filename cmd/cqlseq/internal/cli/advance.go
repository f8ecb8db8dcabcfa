package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cqlseq/cqlseq/apppart"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/vvmadapter"
)

type advanceFlags struct {
	store      storeFlags
	app        uint32
	appSet     bool
	partitions []uint
	mode       string
	numbers    uint64
	offsets    uint64
	seqs       []string
	quiet      time.Duration
	jsonFile   string
}

// minQuietCQL is the shortest --quiet on CQL: an owner at work writes
// events or its offset well within it.
const minQuietCQL = time.Second

func newAdvanceCmd(e *env) *cobra.Command {
	f := &advanceFlags{}
	cmd := &cobra.Command{
		Use:   "advance",
		Short: "After a restore, move each partition's numbers and PLog offsets past what was handed out since the backup",
		Long: `advance is the step after restoring a keyspace or a bbolt file from a backup:
numbers and PLog offsets handed out after the backup was taken are not in it,
and an owner opened on the restored store would hand them out again. For each
--partition advance

  1. watches the partition for --quiet and refuses, writing nothing, if an
     owner is at work (its epoch, its stored next offset or its PLog's end
     moves): stop every owner of the partition first;
  2. takes the partition over as an owner opens it (a new epoch; the PLog's
     fences) and replays its whole PLog;
  3. raises each sequence's floor to its largest number in the partition
     plus --numbers: every workspace's number of that sequence, in a
     workspace the restored PLog never names too, then starts above it;
  4. writes a gap marker after the last event that skips --offsets offsets,
     and stores the next PLog offset after the gap.

Give margins above what may have been handed out since the backup: --numbers
at least the most numbers one sequence (one workspace's) took since, --offsets
at least the most events the partition stored since (the rate times the time
since the backup, with room to spare). A margin too small hands numbers out
again; a large one only leaves a gap. advance may run again after an error:
the floors only grow and each run adds its own gap.

Events stored after the backup are lost with the restore: Partition.Settle
answers ErrRestored for them. Only the cqlseq PLog format is supported.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.appSet = cmd.Flags().Changed("app")
			if err := f.validate(); err != nil {
				return usage(err)
			}
			return runAdvance(cmd.Context(), e, f)
		},
	}
	fs := cmd.Flags()
	f.store.addKind(fs)
	f.store.addBolt(fs, "bbolt: directory of "+boltFileName)
	f.store.cluster.add(fs)
	fs.Uint32Var(&f.app, "app", 0, "cluster application ID (required)")
	fs.UintSliceVar(&f.partitions, "partition", nil, "partitions to advance (repeat or comma-separate; required)")
	fs.StringVar(&f.mode, "mode", "", "the partitions' event log write mode: trust0, trust1, trust2 or fenced (required: the gap marker is written as the owners write events)")
	fs.Uint64Var(&f.numbers, "numbers", 0, "added to each sequence's largest number: at least the most numbers one sequence took since the backup (required)")
	fs.Uint64Var(&f.offsets, "offsets", 0, "PLog offsets the gap skips: at least the most events a partition stored since the backup (required)")
	fs.StringSliceVar(&f.seqs, "seq", []string{"1=1", "2=1"}, "sequences and their initial values, ID=initial: a sequence no event names still gets a floor (default: the bench and demo workload's)")
	fs.DurationVar(&f.quiet, "quiet", 5*time.Second, "how long to watch each partition for an owner at work before writing (at least 1s on cql; 0 on bbolt, whose lock keeps owners out)")
	fs.StringVar(&f.jsonFile, "json", "", "write the result as JSON to this file")
	return cmd
}

func (f *advanceFlags) validate() error {
	errs := append([]error{f.store.validate()}, validPartitions(f.partitions)...)
	if !f.appSet {
		errs = append(errs, errors.New("--app: required (the cluster application ID)"))
	}
	if _, err := plog.ParseMode(f.mode); err != nil {
		errs = append(errs, fmt.Errorf("--mode %q: want trust0, trust1, trust2 or fenced (the owners' mode)", f.mode))
	}
	if f.numbers == 0 {
		errs = append(errs, errors.New("--numbers: required, >= 1"))
	}
	if f.offsets == 0 || f.offsets > plog.MaxSkip {
		errs = append(errs, fmt.Errorf("--offsets %d: want 1..%d", f.offsets, uint64(plog.MaxSkip)))
	}
	if _, err := parseSeqs(f.seqs); err != nil {
		errs = append(errs, err)
	}
	switch {
	case f.quiet < 0:
		errs = append(errs, fmt.Errorf("--quiet %v: negative", f.quiet))
	case f.store.kind == storeCQL && f.quiet < minQuietCQL:
		errs = append(errs, fmt.Errorf("--quiet %v: at least %v on cql (an owner at work must have time to show)", f.quiet, minQuietCQL))
	}
	if f.store.kind == storeBolt && f.store.boltPath() == "" {
		errs = append(errs, errors.New("--store bbolt: give --dir or --file"))
	}
	return errors.Join(errs...)
}

// parseSeqs parses --seq's ID=initial pairs into one workspace kind.
func parseSeqs(seqs []string) (map[isequencer.WSKind]map[isequencer.SeqID]isequencer.Number, error) {
	m := map[isequencer.SeqID]isequencer.Number{}
	for _, s := range seqs {
		id, initial, ok := strings.Cut(s, "=")
		i, err1 := strconv.ParseUint(id, 10, 16)
		n, err2 := strconv.ParseUint(initial, 10, 64)
		if !ok || err1 != nil || err2 != nil || i == 0 || n == 0 {
			return nil, fmt.Errorf("--seq %q: want ID=initial (SeqID 1..65535, initial >= 1)", s)
		}
		m[isequencer.SeqID(i)] = isequencer.Number(n)
	}
	if len(m) == 0 {
		return nil, errors.New("--seq: name at least one sequence")
	}
	return map[isequencer.WSKind]map[isequencer.SeqID]isequencer.Number{wsKind: m}, nil
}

// advanceJSON is what --json writes.
type advanceJSON struct {
	App        uint32              `json:"app"`
	Mode       string              `json:"mode"`
	Numbers    uint64              `json:"numbers"`
	Offsets    uint64              `json:"offsets"`
	Partitions []advancedPartition `json:"partitions"`
}

type advancedPartition struct {
	Partition      uint16          `json:"partition"`
	Events         uint64          `json:"events"`
	Gap            uint64          `json:"gap"`
	NextPLogOffset uint64          `json:"next_plog_offset"`
	Floors         []advancedFloor `json:"floors"`
}

type advancedFloor struct {
	SeqID uint16 `json:"seq_id"`
	Floor uint64 `json:"floor"`
}

func runAdvance(ctx context.Context, e *env, f *advanceFlags) (err error) {
	var jsonOut *jsonOutput
	if f.jsonFile != "" {
		if jsonOut, err = openJSONOutput(f.jsonFile); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, jsonOut.close()) }()
	}
	st, err := f.store.open(ctx, e.log, false)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, st.close()) }()
	mode, _ := plog.ParseMode(f.mode)
	types, _ := parseSeqs(f.seqs)
	w := e.stdout
	fmt.Fprintf(w, "advance: %s, app %d, mode %s, numbers +%s, offsets +%s\n", st.desc, f.app, mode, commas(f.numbers), commas(f.offsets))
	if f.quiet > 0 {
		if err := f.watch(ctx, e, st.st); err != nil {
			return err
		}
	}
	out := advanceJSON{App: f.app, Mode: mode.String(), Numbers: f.numbers, Offsets: f.offsets, Partitions: []advancedPartition{}}
	for _, p := range f.partitions {
		o := apppart.OpenOptions{Storage: st.st, App: isequencer.ClusterAppID(f.app), Partition: isequencer.PartitionID(p), Mode: mode,
			SeqTypes: types, StorageTimeout: scanPageTimeout, Logger: e.log}
		a, err := apppart.Advance(ctx, o, apppart.Margins{Numbers: f.numbers, Offsets: f.offsets})
		if err != nil {
			return fmt.Errorf("partition %d: %w", p, err)
		}
		floors := make([]string, len(a.Floors))
		jp := advancedPartition{Partition: uint16(p), Events: a.Events, Gap: uint64(a.Gap), NextPLogOffset: uint64(a.Next), Floors: []advancedFloor{}}
		for i, x := range a.Floors {
			floors[i] = fmt.Sprintf("SeqID %d: %s", x.SeqID, commas(uint64(x.Number)))
			jp.Floors = append(jp.Floors, advancedFloor{SeqID: uint16(x.SeqID), Floor: uint64(x.Number)})
		}
		fmt.Fprintf(w, "partition %d: %s replayed, gap marker at %d skips %s offsets, next PLog offset %d; floors %s\n",
			p, plural(a.Events, "event", "events"), a.Gap, commas(f.offsets), a.Next, strings.Join(floors, ", "))
		out.Partitions = append(out.Partitions, jp)
	}
	fmt.Fprintln(w, "advanced: owners may open the partitions now")
	if jsonOut != nil {
		return jsonOut.write(&out)
	}
	return nil
}

// ownerTrace is what shows an owner at work on a partition.
type ownerTrace struct {
	epoch    uint64
	stored   isequencer.PLogOffset // the stored next PLog offset
	plogNext isequencer.PLogOffset // the offset after the PLog's last event from stored
}

// watch refuses, with an error naming what moved, if an owner is at work
// on any partition during --quiet: its epoch, stored next offset or PLog
// end changes between two looks.
func (f *advanceFlags) watch(ctx context.Context, e *env, st storage.Storage) error {
	rd, err := plog.NewReader(st, plog.ReaderOptions{PageTimeout: scanPageTimeout})
	if err != nil {
		return err
	}
	look := func() ([]ownerTrace, error) {
		out := make([]ownerTrace, len(f.partitions))
		for i, p := range f.partitions {
			if out[i], err = traceOf(ctx, st, rd, isequencer.ClusterAppID(f.app), isequencer.PartitionID(p)); err != nil {
				return nil, fmt.Errorf("partition %d: %w", p, err)
			}
		}
		return out, nil
	}
	before, err := look()
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "watching %s for %v: no owner may be at work\n", plural(uint64(len(f.partitions)), "partition", "partitions"), f.quiet)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(f.quiet):
	}
	after, err := look()
	if err != nil {
		return err
	}
	var moved []string
	for i, p := range f.partitions {
		b, a := before[i], after[i]
		if b != a {
			moved = append(moved, fmt.Sprintf("partition %d (epoch %d -> %d, stored next offset %d -> %d, PLog end %d -> %d)",
				p, b.epoch, a.epoch, b.stored, a.stored, b.plogNext, a.plogNext))
		}
	}
	if len(moved) > 0 {
		return fmt.Errorf("an owner is at work on %s: stop every owner of the partitions, then advance again; nothing written", strings.Join(moved, ", "))
	}
	return nil
}

// traceOf reads partition part's ownerTrace.
func traceOf(ctx context.Context, st storage.Storage, rd *plog.Reader, app isequencer.ClusterAppID, part isequencer.PartitionID) (ownerTrace, error) {
	ad := vvmadapter.New(st, app)
	epoch, err := ad.GetEpoch(ctx, part)
	if err != nil {
		return ownerTrace{}, err
	}
	stored, _, err := ad.GetPLogOffset(ctx, part)
	if err != nil {
		return ownerTrace{}, err
	}
	t := ownerTrace{epoch: epoch, stored: stored, plogNext: max(stored, 1)}
	err = rd.ReadEvents(ctx, part, t.plogNext, func(e *plog.Event) error {
		t.plogNext = e.NextOffset()
		return nil
	})
	return t, err
}
