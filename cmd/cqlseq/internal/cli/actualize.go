package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/plog/voedger"
	"github.com/cqlseq/cqlseq/seqstorage"
	"github.com/cqlseq/cqlseq/storage/mem"
	"github.com/cqlseq/cqlseq/vvmadapter"
)

// PLog formats of actualize and verify.
const (
	plogFormatCQLSeq  = "cqlseq"
	plogFormatVoedger = "voedger"
)

func validPLogFormat(f string) error {
	if f != plogFormatCQLSeq && f != plogFormatVoedger {
		return fmt.Errorf("--plog-format %q: want %s or %s", f, plogFormatCQLSeq, plogFormatVoedger)
	}
	return nil
}

type actualizeFlags struct {
	store           storeFlags
	seqKeyspace     string
	seqFile         string
	plogFormat      string
	app             uint32
	appSet          bool
	partitions      []uint
	jsonFile        string
	write           bool
	opaqueCorrupted bool
}

func newActualizeCmd(e *env) *cobra.Command {
	f := &actualizeFlags{}
	cmd := &cobra.Command{
		Use:   "actualize",
		Short: "Replay a partition's PLog into its sequence numbers (take over a Voedger partition)",
		Long: `actualize does, for each --partition, what a sequencer does when it opens:
it reads the stored next PLog offset (none stored: from the partition's first
event), replays the PLog from there, and reports the next PLog offset, the
events read and, for every (workspace, SeqID) the events name, the last
number (the largest of the stored number and the events' numbers) and the
next number the sequencer would hand out.

With --plog-format voedger it reads a PLog that Voedger wrote (codec 1 and
2) with Voedger's sequences (4 = WLog offset from 1, 5 = record ID from
200001) and keeps the numbers in Voedger's layout under --app, Voedger's
ClusterAppID. Unlike Voedger, a singleton ID never pulls the record-ID
sequence below 200001, and a sys.Corrupted event counts with the records of
the event it carries. The sequence rows may live in another keyspace
(--seq-keyspace) or bbolt file (--seq-file) than the PLog.

Nothing is written without --write. With it, actualize first takes every
--partition over as an owner does when it opens (a new ownership epoch; for
the cqlseq PLog format also the PLog's fences from the stored next offset),
then replays and stores the numbers and the next offset with that epoch's
versions, so that a sequencer opened afterwards starts from them. An owner
still running is deposed: in fenced mode its next write is refused and its
partition stops. If a partition cannot be taken over (the store refuses or
is down, a later owner fenced the PLog first, a bbolt file another process
holds), nothing is written and actualize exits 1. After --write with
--plog-format voedger the partition belongs to cqlseq: Voedger's own
(unversioned) writes of its numbers would no longer replace these.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.appSet = cmd.Flags().Changed("app")
			if err := f.validate(); err != nil {
				return usage(err)
			}
			return runActualize(cmd.Context(), e, f)
		},
	}
	fs := cmd.Flags()
	f.store.addKind(fs)
	f.store.addBolt(fs, "bbolt: directory of "+boltFileName+" (the PLog's store)")
	f.store.cluster.add(fs)
	fs.StringVar(&f.seqKeyspace, "seq-keyspace", "", "cql: keyspace of the sequence rows (Voedger's VVM keyspace; default --keyspace)")
	fs.StringVar(&f.seqFile, "seq-file", "", "bbolt: file of the sequence rows (default the PLog's file)")
	fs.StringVar(&f.plogFormat, "plog-format", plogFormatCQLSeq, "PLog format: cqlseq or voedger")
	fs.Uint32Var(&f.app, "app", 0, "cluster application ID of the sequence rows (required)")
	fs.UintSliceVar(&f.partitions, "partition", nil, "partitions to actualize (repeat or comma-separate; required)")
	fs.StringVar(&f.jsonFile, "json", "", "write the result as JSON to this file")
	fs.BoolVar(&f.write, "write", false, "take each partition over (a new epoch; the cqlseq PLog's fences), then store the numbers and the next PLog offset (default: write nothing)")
	fs.BoolVar(&f.opaqueCorrupted, "opaque-corrupted", false, "voedger: accept sys.Corrupted events whose original bytes do not decode (they then count with their WLog offset only: make sure their records' IDs are not issued again)")
	return cmd
}

func (f *actualizeFlags) validate() error {
	errs := []error{f.store.validate(), validPLogFormat(f.plogFormat)}
	errs = append(errs, validPartitions(f.partitions)...)
	if !f.appSet {
		errs = append(errs, errors.New("--app: required (the cluster application ID)"))
	}
	if f.seqKeyspace != "" && f.store.kind != storeCQL {
		errs = append(errs, errors.New("--seq-keyspace needs --store cql"))
	}
	if f.seqFile != "" && f.store.kind != storeBolt {
		errs = append(errs, errors.New("--seq-file needs --store bbolt"))
	}
	if f.store.kind == storeBolt && f.store.boltPath() == "" {
		errs = append(errs, errors.New("--store bbolt: give --dir or --file (the PLog's store)"))
	}
	if f.opaqueCorrupted && f.plogFormat != plogFormatVoedger {
		errs = append(errs, errors.New("--opaque-corrupted needs --plog-format voedger"))
	}
	return errors.Join(errs...)
}

// actualizeJSON is what --json writes.
type actualizeJSON struct {
	PLogFormat string                `json:"plog_format"`
	App        uint32                `json:"app"`
	Written    bool                  `json:"written"`
	Partitions []actualizedPartition `json:"partitions"`
}

type actualizedPartition struct {
	Partition uint16 `json:"partition"`
	// Epoch is the epoch --write took the partition over with (absent
	// without --write).
	Epoch          uint64 `json:"epoch,omitempty"`
	NextPLogOffset uint64 `json:"next_plog_offset"`
	Events         uint64 `json:"events"`
	// OffsetReached is the offset of the last event read (0: none);
	// ReadSeconds the replay's duration and EventsPerSecond its rate.
	OffsetReached   uint64             `json:"offset_reached"`
	ReadSeconds     float64            `json:"read_seconds"`
	EventsPerSecond float64            `json:"events_per_second"`
	Numbers         []actualizedNumber `json:"numbers"`
}

type actualizedNumber struct {
	WSID  uint64 `json:"wsid"`
	SeqID uint16 `json:"seq_id"`
	Last  uint64 `json:"last"`
	Next  uint64 `json:"next"`
}

// open opens the PLog's store and the sequence rows' (the same one unless
// --seq-keyspace or --seq-file names another) and returns a closeAll that
// closes both. A bbolt PLog file must exist. Without --write, bbolt files
// are opened read-only and an absent --seq-file reads as empty (it is not
// created); with --write the sequence rows' file is opened for writing,
// and so is the PLog's when it is the same file or the format is cqlseq
// (TakeOver fences it).
func (f *actualizeFlags) open(ctx context.Context, e *env) (plogSt, seqSt *openedStore, closeAll func() error, err error) {
	if p := f.store.boltPath(); f.store.kind == storeBolt {
		if _, err := os.Stat(p); err != nil {
			return nil, nil, nil, fmt.Errorf("the PLog's bbolt file: %w", err)
		}
	}
	sameBolt := f.seqFile == "" || (f.store.boltPath() != "" && samePath(f.seqFile, f.store.boltPath()))
	sameCQL := f.seqKeyspace == "" || f.seqKeyspace == f.store.cluster.keyspace
	if (f.store.kind == storeBolt && sameBolt) || (f.store.kind == storeCQL && sameCQL) {
		st, err := f.store.open(ctx, e.log, !f.write || f.store.kind == storeCQL)
		if err != nil {
			return nil, nil, nil, err
		}
		return st, st, st.close, nil
	}
	// --write fences a cqlseq PLog (seqstorage.TakeOver): its store is
	// written too.
	fencePLog := f.write && f.plogFormat == plogFormatCQLSeq
	if plogSt, err = f.store.open(ctx, e.log, !fencePLog); err != nil {
		return nil, nil, nil, err
	}
	seqFlags := f.store
	switch f.store.kind {
	case storeCQL:
		seqFlags.cluster.keyspace = f.seqKeyspace
	case storeBolt:
		seqFlags.dir, seqFlags.file = "", f.seqFile
	}
	if _, statErr := os.Stat(f.seqFile); f.store.kind == storeBolt && !f.write && errors.Is(statErr, os.ErrNotExist) {
		// Nothing stored yet, and nothing will be: do not create the file.
		seqSt = &openedStore{st: mem.New(mem.Options{}), kind: storeBolt, desc: "bbolt " + f.seqFile + " (absent: nothing stored)"}
	} else if seqSt, err = seqFlags.open(ctx, e.log, !f.write); err != nil {
		return nil, nil, nil, errors.Join(err, plogSt.close())
	}
	return plogSt, seqSt, func() error { return errors.Join(seqSt.close(), plogSt.close()) }, nil
}

func samePath(a, b string) bool {
	x, err1 := filepath.Abs(a)
	y, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && x == y
}

func runActualize(ctx context.Context, e *env, f *actualizeFlags) (err error) {
	var jsonOut *jsonOutput
	if f.jsonFile != "" {
		if jsonOut, err = openJSONOutput(f.jsonFile); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, jsonOut.close()) }()
	}
	plogSt, seqSt, closeAll, err := f.open(ctx, e)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeAll()) }()
	w := e.stdout
	fmt.Fprintf(w, "actualize: %s PLog in %s, sequence rows in %s, app %d\n", f.plogFormat, plogSt.desc, seqSt.desc, f.app)
	owners, err := f.takeOver(ctx, e, plogSt, seqSt)
	if err != nil {
		return err
	}
	out := actualizeJSON{PLogFormat: f.plogFormat, App: f.app, Written: f.write, Partitions: []actualizedPartition{}}
	for i, p := range f.partitions {
		bar := e.newSpinner(fmt.Sprintf("actualize partition %d", p))
		var rd replayProgress
		if bar != nil {
			rd.report = func(r *replayProgress) {
				bar.Describe(fmt.Sprintf("actualize partition %d: %s events, %s events/s, offset %d", p, commas(r.events), commas(uint64(r.rate())), r.last))
			}
		}
		var owner *vvmadapter.Owner
		if owners != nil {
			owner = owners[i]
		}
		s, initial, err := f.seqStorage(plogSt, seqSt, isequencer.PartitionID(p), owner, &rd)
		if err != nil {
			return err
		}
		a, err := s.ActualizeOnce(ctx, initial, f.write)
		if bar != nil {
			_ = bar.Finish()
		}
		if err != nil {
			return fmt.Errorf("partition %d: %w", p, err)
		}
		printActualized(e, a, &rd)
		jp := actualizedPartition{Partition: uint16(a.Partition), Epoch: owner.Epoch(), NextPLogOffset: uint64(a.Next), Events: a.Events,
			OffsetReached: uint64(rd.last), ReadSeconds: rd.elapsed().Seconds(), EventsPerSecond: rd.rate(), Numbers: []actualizedNumber{}}
		for _, n := range a.Numbers {
			jp.Numbers = append(jp.Numbers, actualizedNumber{WSID: uint64(n.WSID), SeqID: uint16(n.SeqID), Last: uint64(n.Last), Next: uint64(n.Next)})
		}
		out.Partitions = append(out.Partitions, jp)
	}
	if f.write {
		fmt.Fprintln(w, "written: the numbers and next PLog offsets above are stored")
	} else {
		fmt.Fprintln(w, "nothing written (give --write to store the numbers and next PLog offsets)")
	}
	if jsonOut != nil {
		return jsonOut.write(&out)
	}
	return nil
}

// takeOver, with --write, takes every partition over (seqstorage.TakeOver)
// before anything is read or written, fencing a cqlseq PLog, and returns
// their owners in f.partitions' order; without --write, nil. If one
// cannot be taken, no number or offset has been written: it returns the
// error, naming the partition.
func (f *actualizeFlags) takeOver(ctx context.Context, e *env, plogSt, seqSt *openedStore) ([]*vvmadapter.Owner, error) {
	if !f.write {
		return nil, nil
	}
	owners := make([]*vvmadapter.Owner, len(f.partitions))
	for i, p := range f.partitions {
		o := seqstorage.TakeOverOptions{Storage: seqSt.st, App: isequencer.ClusterAppID(f.app), Partition: isequencer.PartitionID(p)}
		if f.plogFormat == plogFormatCQLSeq {
			o.FencePLog = plogSt.st
		}
		own, err := seqstorage.TakeOver(ctx, o)
		if err != nil {
			return nil, fmt.Errorf("partition %d: cannot take the partition over, nothing written: %w", p, err)
		}
		owners[i] = own.Owner
		stored := "none stored"
		if own.StoredNext > 0 {
			stored = fmt.Sprintf("%d", own.StoredNext)
		}
		fences := "PLog not fenced (Voedger's)"
		if o.FencePLog != nil {
			fences = fmt.Sprintf("%s fenced", plural(uint64(own.FencedBlocks), "PLog block", "PLog blocks"))
		}
		fmt.Fprintf(e.stdout, "took over partition %d: epoch %d, stored next offset %s, %s\n", p, own.Owner.Epoch(), stored, fences)
	}
	return owners, nil
}

// seqStorage returns the partition's seqstorage.Storage for the PLog
// format, reading the PLog through rd and writing through owner (nil: it
// only reads), and the initial values of its sequences.
func (f *actualizeFlags) seqStorage(plogSt, seqSt *openedStore, part isequencer.PartitionID, owner *vvmadapter.Owner, rd *replayProgress) (*seqstorage.Storage, map[isequencer.SeqID]isequencer.Number, error) {
	app := isequencer.ClusterAppID(f.app)
	o := seqstorage.Options{Storage: seqSt.st, App: app, Partition: part, Timeout: scanPageTimeout, Owner: owner}
	var initial map[isequencer.SeqID]isequencer.Number
	if f.plogFormat == plogFormatVoedger {
		// seqstorage.NewVoedger's Storage, over a reader that counts.
		r, err := voedger.NewReader(plogSt.st, voedger.ReaderOptions{PageTimeout: scanPageTimeout, OpaqueCorrupted: f.opaqueCorrupted})
		if err != nil {
			return nil, nil, err
		}
		rd.r, o.MinAccepted, initial = r.SeqReader(), voedger.MinAccepted(), voedger.SeqTypes()
	} else {
		r, err := plog.NewReader(plogSt.st, plog.ReaderOptions{PageTimeout: scanPageTimeout})
		if err != nil {
			return nil, nil, err
		}
		rd.r = r
	}
	o.Reader = rd
	s, err := seqstorage.New(o)
	return s, initial, err
}

// replayProgress is a plog.PLogReader that counts the events another one
// reads and calls report (if set) every progressEvery events.
type replayProgress struct {
	r            plog.PLogReader
	report       func(*replayProgress)
	events       uint64
	last         isequencer.PLogOffset // the offset of the last event read
	began, ended time.Time
}

var _ plog.PLogReader = (*replayProgress)(nil)

const progressEvery = 4096

// ReadEvents implements plog.PLogReader.
func (p *replayProgress) ReadEvents(ctx context.Context, part isequencer.PartitionID, from isequencer.PLogOffset, cb func(e *plog.Event) error) error {
	p.began = time.Now()
	defer func() { p.ended = time.Now() }()
	return p.r.ReadEvents(ctx, part, from, func(e *plog.Event) error {
		p.events++
		p.last = e.Offset
		if p.report != nil && p.events%progressEvery == 0 {
			p.report(p)
		}
		return cb(e)
	})
}

// elapsed is the replay's duration so far (all of it once it ended).
func (p *replayProgress) elapsed() time.Duration {
	switch {
	case p.began.IsZero():
		return 0
	case p.ended.IsZero():
		return time.Since(p.began)
	}
	return p.ended.Sub(p.began)
}

// rate is the events read per second of elapsed.
func (p *replayProgress) rate() float64 {
	if d := p.elapsed(); d > 0 {
		return float64(p.events) / d.Seconds()
	}
	return 0
}

func printActualized(e *env, a *seqstorage.Actualized, rd *replayProgress) {
	w := e.stdout
	stored := "none stored"
	if a.StoredNext > 0 {
		stored = fmt.Sprintf("%d", a.StoredNext)
	}
	fmt.Fprintf(w, "partition %d: stored next offset %s, %s read, next PLog offset %d\n",
		a.Partition, stored, plural(a.Events, "event", "events"), a.Next)
	for _, n := range a.Numbers {
		fmt.Fprintf(w, "  WSID %d  SeqID %d  last %d  next %d\n", n.WSID, n.SeqID, n.Last, n.Next)
	}
	if rd.events == 0 {
		fmt.Fprintf(w, "partition %d: replayed nothing: the PLog has no event at or after offset %d (%.2f s)\n",
			a.Partition, a.Next, rd.elapsed().Seconds())
		return
	}
	fmt.Fprintf(w, "partition %d: replayed %s in %.2f s (%s events/s), offset reached %d\n",
		a.Partition, plural(rd.events, "event", "events"), rd.elapsed().Seconds(), commas(uint64(rd.rate())), rd.last)
}
