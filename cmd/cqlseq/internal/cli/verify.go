package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/plog/plogcheck"
	"github.com/cqlseq/cqlseq/vvmadapter"
)

type verifyFlags struct {
	store      storeFlags
	app        uint32
	partitions []uint
	jsonFile   string
	acks       string
	plogFormat string
}

func newVerifyCmd(e *env) *cobra.Command {
	f := &verifyFlags{}
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check a partition's PLog against its stored numbers",
		Long: `verify reads each --partition's stored next PLog offset, then its whole PLog
(offset 1 to the first missing offset), then the stored numbers of every
(WSID, SeqID) the PLog names, and checks that:

  - the numbers of one (WSID, SeqID) strictly increase with the event
    offset, so no number appears twice;
  - every stored number is >= every number of an event below the stored
    next offset (events at or after it are the unflushed tail a restart
    replays);
  - the stored next offset is at most one past the last event.

It prints a report and exits 1 when a check fails. It only reads: on CQL it
is safe on a store in use; a bbolt file is locked by the process that has it
open (a running bench), so verify it after that process ends.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return usage(err)
			}
			scan := scanVerify
			if f.plogFormat == plogFormatVoedger {
				scan = scanVerifyVoedger
			}
			return runVerify(cmd.Context(), e, f, scan)
		},
	}
	fs := cmd.Flags()
	f.store.addKind(fs)
	f.store.addBoltReadOnly(fs, "bbolt: directory of "+boltFileName)
	f.store.cluster.add(fs)
	fs.Uint32Var(&f.app, "app", 1, "cluster application ID of the stored numbers (PLog keys carry none)")
	fs.UintSliceVar(&f.partitions, "partition", []uint{0}, "partitions to verify (repeat or comma-separate)")
	fs.StringVar(&f.jsonFile, "json", "", "write the findings as JSON to this file")
	fs.StringVar(&f.acks, "acks", "", "also check an ack log written by bench --ack-log: every acknowledged event in the PLog at its offset with exactly its numbers, no number acknowledged twice or going back")
	fs.StringVar(&f.plogFormat, "plog-format", plogFormatCQLSeq, "PLog format: cqlseq, or voedger (checks Voedger's PLog alone: record IDs created twice in a workspace, WLog offsets that repeat or go back)")
	return cmd
}

func (f *verifyFlags) validate() error {
	errs := []error{f.store.validate(), validPLogFormat(f.plogFormat)}
	if f.plogFormat == plogFormatVoedger && f.acks != "" {
		errs = append(errs, errors.New("--acks needs --plog-format cqlseq"))
	}
	errs = append(errs, validPartitions(f.partitions)...)
	return errors.Join(errs...)
}

func validPartitions(ps []uint) []error {
	if len(ps) == 0 {
		return []error{errors.New("--partition: none given")}
	}
	for _, p := range ps {
		if p > 0xFFFF {
			return []error{fmt.Errorf("--partition %d: want 0..65535", p)}
		}
	}
	return nil
}

// verifyJSON is what --json writes: plogcheck's report with the store and
// the application.
type verifyJSON struct {
	Store string `json:"store"`
	App   uint32 `json:"app"`
	plogcheck.Report
}

// verifyScan checks f's partitions in store, the way of one PLog format,
// and prints its report. It returns what --json writes and the number of
// problems found.
type verifyScan func(ctx context.Context, e *env, f *verifyFlags, store *openedStore) (out any, problems uint64, err error)

// runVerify opens the --json file and the store, runs scan, writes its
// report to the --json file and fails with errVerifyFailed when scan found
// a problem.
func runVerify(ctx context.Context, e *env, f *verifyFlags, scan verifyScan) (err error) {
	var jsonOut *jsonOutput
	if f.jsonFile != "" { // before the scan: a bad path fails at once
		if jsonOut, err = openJSONOutput(f.jsonFile); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, jsonOut.close()) }()
	}
	store, err := f.store.open(ctx, e.log, true)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, store.close()) }()
	out, problems, err := scan(ctx, e, f, store)
	if err != nil {
		return err
	}
	if jsonOut != nil {
		if err := jsonOut.write(out); err != nil {
			return err
		}
	}
	if problems > 0 {
		return fmt.Errorf("%w: %s problems (see the report on stdout)", errVerifyFailed, commas(problems))
	}
	return nil
}

// scanVerify is the verifyScan of the cqlseq PLog format: plogcheck
// against the stored numbers, and the --acks log.
func scanVerify(ctx context.Context, e *env, f *verifyFlags, store *openedStore) (any, uint64, error) {
	rd, err := plog.NewReader(store.st, plog.ReaderOptions{PageTimeout: scanPageTimeout})
	if err != nil {
		return nil, 0, err
	}
	w := e.stdout
	fmt.Fprintf(w, "verify: %s, app %d\n", store.desc, f.app)
	out := verifyJSON{Store: store.desc, App: f.app}
	for _, p := range f.partitions {
		bar := e.newBar(-1, fmt.Sprintf("partition %d", p))
		o := plogcheck.PartitionOptions{Stored: vvmadapter.New(store.st, isequencer.ClusterAppID(f.app))}
		if bar != nil {
			o.Progress = func(n, estimate uint64) {
				if m := int64(max(n, estimate)); m != bar.GetMax64() {
					bar.ChangeMax64(m)
				}
				_ = bar.Set64(int64(n))
			}
		}
		r, err := plogcheck.Partition(ctx, rd, isequencer.PartitionID(p), o)
		if bar != nil {
			_ = bar.Finish()
		}
		if err != nil {
			return nil, 0, err
		}
		printScan(e, r)
		out.Partitions = append(out.Partitions, r)
	}
	if f.acks != "" {
		ar, err := verifyAcks(ctx, e, store.st, f.acks)
		if err != nil {
			return nil, 0, err
		}
		out.Acks = ar
	}
	problems := out.Problems()
	out.OK = problems == 0
	return &out, problems, nil
}

func printScan(e *env, r *plogcheck.PartitionReport) {
	w := e.stdout
	next := "none stored"
	if r.StoredNext > 0 {
		next = fmt.Sprintf("%d", r.StoredNext)
	}
	gaps := ""
	if r.Gaps > 0 {
		gaps = ", " + plural(r.Gaps, "gap marker", "gap markers") + " among them"
	}
	fmt.Fprintf(w, "partition %d: %s (last offset %d%s), stored next offset %s (%s in the unflushed tail),\n",
		r.Partition, plural(r.Events, "event", "events"), r.Last, gaps, next, plural(r.Tail, "event", "events"))
	fmt.Fprintf(w, "  %s workspaces, %s (WSID, SeqID) sequences, %s numbers checked: ",
		commas(uint64(r.Workspaces)), commas(uint64(r.Keys)), commas(r.Numbers))
	if r.OK() {
		fmt.Fprintln(w, "OK")
		return
	}
	fmt.Fprintf(w, "FAILED, %s problems\n", commas(r.Problems))
	printFindings(w, r)
}

// errVerifyFailed marks a verification that found problems (exit 1).
var errVerifyFailed = errors.New("verification failed")

// scanPageTimeout is the per-page timeout of a scan; the cql store has
// its own per-query timeout too.
const scanPageTimeout = time.Minute
