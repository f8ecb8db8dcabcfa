package cli

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cqlseq/cqlseq/galloc"
	"github.com/cqlseq/cqlseq/galloc/galloccheck"
	"github.com/cqlseq/cqlseq/internal/lab/timeline"
	"github.com/cqlseq/cqlseq/metrics"
	"github.com/cqlseq/cqlseq/storage"
)

type allocFlags struct {
	store      storeFlags
	name       string
	typ        string
	chunk      int64
	start      int64
	step       int64
	prefetchAt float64
	noPrefetch bool
	procs      int
	goroutines int
	ids        int64
	spawn      bool
	jsonFile   string
	timeline   timelineFlags

	// child mode (hidden): run process childIndex only, start drawing at
	// childStart (Unix ms), write the result into childOut and, when
	// childTimeline is set, the process's timeline into that file (JSON).
	childOut      string
	childIndex    int
	childStart    int64
	childTimeline string
}

func newAllocCmd(e *env) *cobra.Command {
	f := &allocFlags{}
	cmd := &cobra.Command{
		Use:   "alloc",
		Short: "Draw IDs from one galloc sequence with many goroutines in many processes, and check them",
		Long: `alloc opens the galloc sequence --name in --procs processes, each with its own
galloc.Sequence (own process name, own prefetch) and, on CQL, its own
session; --goroutines goroutines per process then draw --ids IDs in all.
It reports IDs/s, chunk fetches, compare-and-swap conflicts, unknown LWT
outcomes, waits for a chunk, lightweight transactions (from the storage
metrics), the values wasted (allocated, never handed out: at most two
chunks per process), and checks every ID handed out: unique across all
processes, increasing within each goroutine, chunks increasing within each
process. A failed check exits with 1.

The processes run in this one OS process unless --spawn is given: then each
is a child process of this binary (CQL only: a bbolt file admits one process
at a time), and the children's IDs are merged for the checks.

--timeline FILE writes the run's timeline, from the moment the processes are
released to draw, also when a process fails. It holds
` + timelineHelp + `
Each ID handed out (one Next call) counts as one acknowledged command, with
the latency of its Next call, and a failed Next as one failed command (alloc
has no busy answers). With --spawn each child records its own timeline and
they are merged: the counts summed, each interval's latencies the slowest
child's (not percentiles of all the children's calls together).

--plot FILE.svg draws it: the rate and latency of Next over time, in two
panels. Both files are checked to be writable before the run starts.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return usage(err)
			}
			if f.childOut != "" {
				return runAllocChild(cmd.Context(), e, f)
			}
			if err := f.timeline.checkWritable(); err != nil {
				return err
			}
			return runAlloc(cmd.Context(), e, f, cmd.Flags())
		},
	}
	fs := cmd.Flags()
	f.store.addKind(fs)
	f.store.addBolt(fs, "bbolt: directory of "+boltFileName+" (default: a temporary directory, removed at the end)")
	f.store.cluster.add(fs)
	fs.StringVar(&f.name, "name", "alloc", "sequence name")
	fs.StringVar(&f.typ, "type", "bigint", "sequence type: smallint, integer or bigint (bounds the values, sets the default chunk)")
	fs.Int64Var(&f.chunk, "chunk", 100_000, "chunk size, at least 1 (BDR's are 1,000 / 1,000,000 / 1,000,000,000 by type)")
	fs.Int64Var(&f.start, "start", 1, "first value")
	fs.Int64Var(&f.step, "step", 1, "difference between consecutive values")
	fs.Float64Var(&f.prefetchAt, "prefetch-at", galloc.DefaultPrefetchAt, "fraction of a chunk handed out before the next is fetched")
	fs.BoolVar(&f.noPrefetch, "no-prefetch", false, "fetch a chunk only when the current one is used up")
	fs.IntVar(&f.procs, "procs", 4, "processes")
	fs.IntVar(&f.goroutines, "goroutines", 16, "goroutines per process")
	fs.Int64Var(&f.ids, "ids", 1_000_000, "IDs to draw in all")
	fs.BoolVar(&f.spawn, "spawn", false, "run each process as a child process of this binary (--store cql)")
	fs.StringVar(&f.jsonFile, "json", "", "write the report as JSON to this file")
	f.timeline.add(fs)
	fs.StringVar(&f.childOut, "child-out", "", "")
	fs.IntVar(&f.childIndex, "child-index", 0, "")
	fs.Int64Var(&f.childStart, "child-start", 0, "")
	fs.StringVar(&f.childTimeline, "child-timeline", "", "")
	for _, n := range []string{"child-out", "child-index", "child-start", "child-timeline"} {
		_ = fs.MarkHidden(n)
	}
	return cmd
}

var allocTypes = map[string]galloc.Type{"smallint": galloc.SmallInt, "integer": galloc.Integer, "bigint": galloc.BigInt}

func (f *allocFlags) options() galloc.Options {
	return galloc.Options{Type: allocTypes[f.typ], ChunkSize: f.chunk, Start: f.start, StartZero: f.start == 0,
		Step: f.step, PrefetchAt: f.prefetchAt, NoPrefetch: f.noPrefetch}
}

func (f *allocFlags) validate() error {
	errs := []error{f.store.validate()}
	if _, ok := allocTypes[f.typ]; !ok {
		errs = append(errs, fmt.Errorf("--type %q: want smallint, integer or bigint", f.typ))
	} else {
		o := f.options()
		o.EnsureDefaults()
		o.ChunkSize = f.chunk // 0 is an error here, not the type's default
		errs = append(errs, o.Validate())
	}
	if f.procs < 1 || f.goroutines < 1 {
		errs = append(errs, fmt.Errorf("--procs %d, --goroutines %d: want at least 1 each", f.procs, f.goroutines))
	}
	if f.ids < 1 || f.ids > 1<<30 {
		errs = append(errs, fmt.Errorf("--ids %d: want 1..%d", f.ids, 1<<30))
	}
	if f.spawn && f.store.kind != storeCQL {
		errs = append(errs, errors.New("--spawn needs --store cql (a bbolt file admits one process at a time)"))
	}
	errs = append(errs, f.timeline.validate()...)
	return errors.Join(errs...)
}

// procResult is one process's share of an alloc run.
type procResult struct {
	Process         string         `json:"process"`
	IDs             uint64         `json:"ids"`
	ElapsedS        float64        `json:"elapsed_s"`
	Fetches         uint64         `json:"fetches"`
	Conflicts       uint64         `json:"conflicts"`
	UnknownOutcomes uint64         `json:"unknown_outcomes"`
	Abandoned       uint64         `json:"abandoned"` // allocations in flight when the process closed
	Waits           uint64         `json:"waits"`
	LWTs            uint64         `json:"lwts"`
	Held            uint64         `json:"held"` // allocated, not handed out when the process closed
	Chunks          []galloc.Chunk `json:"chunks"`
	Monotonic       bool           `json:"monotonic"` // each goroutine's IDs and the chunks increase
	Error           string         `json:"error,omitempty"`

	runs []galloccheck.Run // the IDs handed out, as its goroutines' runs of consecutive IDs
}

// allocReport is alloc's report; --json writes it.
type allocReport struct {
	Store           string       `json:"store"`
	Sequence        string       `json:"sequence"`
	Type            string       `json:"type"`
	ChunkSize       int64        `json:"chunk_size"`
	Procs           int          `json:"procs"`
	Goroutines      int          `json:"goroutines_per_proc"`
	Spawned         bool         `json:"spawned"`
	IDs             uint64       `json:"ids"`
	ElapsedS        float64      `json:"elapsed_s"`
	PerSecond       float64      `json:"ids_per_second"`
	Fetches         uint64       `json:"chunk_fetches"`
	Conflicts       uint64       `json:"conflicts"`
	UnknownOutcomes uint64       `json:"unknown_outcomes"`
	Abandoned       uint64       `json:"abandoned"`
	Waits           uint64       `json:"waits"`
	LWTs            uint64       `json:"lwts"`
	Allocated       uint64       `json:"allocated"` // values the stored record shows allocated during the run
	Wasted          uint64       `json:"wasted"`    // allocated, never handed out
	ChunkUse        float64      `json:"chunk_use_pct"`
	Unique          bool         `json:"unique"`
	Duplicates      uint64       `json:"duplicates"`
	Monotonic       bool         `json:"monotonic_per_process"`
	Processes       []procResult `json:"processes"`
}

// share returns how many of the run's IDs process p draws.
func (f *allocFlags) share(p int) int64 {
	n := f.ids / int64(f.procs)
	if int64(p) < f.ids%int64(f.procs) {
		n++
	}
	return n
}

func runAlloc(ctx context.Context, e *env, f *allocFlags, fs *pflag.FlagSet) (err error) {
	shared, err := f.store.open(ctx, e.log, false)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, shared.close()) }()
	before, _, err := galloc.ReadRecord(ctx, shared.st, f.name)
	if err != nil {
		return err
	}
	var (
		results []procResult
		tl      *timeline.Timeline // nil: none wanted
	)
	desc := shared.desc
	if f.spawn {
		desc += " (child processes)"
	}
	opts := f.options()
	opts.EnsureDefaults()
	title := fmt.Sprintf("cqlseq alloc: %s, sequence %q (%s, chunk %s), %s x %s", desc, f.name, f.typ, commas(uint64(opts.ChunkSize)),
		plural(uint64(f.procs), "process", "processes"), plural(uint64(f.goroutines), "goroutine", "goroutines"))
	began := time.Now()
	if f.spawn {
		results, tl, err = spawnAlloc(ctx, e, f, fs, title)
		if err != nil {
			return f.failedRun(e, tl, err)
		}
	} else {
		runCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		results = make([]procResult, f.procs)
		start := make(chan struct{})
		var rec *timeline.Recorder // set before start is closed, read after
		newShard := func() *timeline.Shard {
			if rec == nil {
				return nil
			}
			return rec.NewShard()
		}
		var wg, ready sync.WaitGroup
		errs := make([]error, f.procs)
		ready.Add(f.procs)
		for p := range f.procs {
			wg.Go(func() {
				once := sync.OnceFunc(ready.Done)
				defer once()
				st := shared.st
				if f.store.kind == storeCQL && p > 0 { // a session per process
					o, err := f.store.open(runCtx, e.log, false)
					if err != nil {
						errs[p] = err
						return
					}
					defer func() { _ = o.close() }()
					st = o.st
				}
				results[p], errs[p] = allocProcess(runCtx, f, p, st, once, start, newShard)
			})
		}
		ready.Wait() // every process has opened the sequence
		rec, err = f.timeline.recorder(title)
		if err != nil {
			cancel() // the processes stop at once
		}
		close(start)
		wg.Wait()
		if err != nil {
			return err
		}
		if rec != nil {
			tl = rec.Timeline(time.Now())
		}
		if err := errors.Join(errs...); err != nil {
			return f.failedRun(e, tl, err)
		}
	}
	after, _, err := galloc.ReadRecord(ctx, shared.st, f.name)
	if err != nil {
		return err
	}
	rep := mergeAlloc(f, desc, results, time.Since(began))
	rep.Allocated = after.Allocated - before.Allocated
	rep.Wasted = rep.Allocated - rep.IDs
	rep.ChunkUse = percent(rep.IDs, rep.Allocated)
	printAlloc(e.stdout, rep)
	if f.jsonFile != "" {
		if err := writeJSON(f.jsonFile, rep); err != nil {
			return err
		}
	}
	if err := f.timeline.write(e, tl); err != nil {
		return err
	}
	switch {
	case !rep.Unique:
		return fmt.Errorf("alloc: %d IDs handed out more than once", rep.Duplicates)
	case !rep.Monotonic:
		return errors.New("alloc: IDs of a process did not increase")
	case rep.Wasted > 2*uint64(rep.ChunkSize)*uint64(rep.Procs):
		return fmt.Errorf("alloc: %d values wasted, more than 2 chunks per process", rep.Wasted)
	}
	return nil
}

// failedRun returns err, the error of a run that produced no report, after
// writing tl (the timeline of the time it ran, nil: none wanted) when it
// holds an interval: it shows when the run failed.
func (f *allocFlags) failedRun(e *env, tl *timeline.Timeline, err error) error {
	if tl == nil || len(tl.Intervals) == 0 {
		return err
	}
	return errors.Join(err, f.timeline.write(e, tl))
}

// allocProcess is one process: it opens the sequence on st (instrumented),
// calls opened, waits for start, draws its share with f.goroutines
// goroutines, and closes the sequence. Each goroutine records each Next
// into its own shard, newShard's answer once start is closed (nil: none):
// an ID handed out as acknowledged, with the Next's latency, an error as
// failed.
func allocProcess(ctx context.Context, f *allocFlags, p int, st storage.Storage, opened func(), start <-chan struct{},
	newShard func() *timeline.Shard) (procResult, error) {
	mc, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		return procResult{}, err
	}
	host, _ := os.Hostname()
	o := f.options()
	o.Process = fmt.Sprintf("%s:%d:p%d", host, os.Getpid(), p)
	seq, err := galloc.Open(ctx, mc.Storage(st), f.name, o)
	if err != nil {
		return procResult{}, err
	}
	defer seq.Close() // after an early return
	opened()
	<-start
	total := f.share(p)
	per := make([]galloccheck.Recorder, f.goroutines)
	errs := make([]error, f.goroutines)
	began := time.Now()
	var wg sync.WaitGroup
	for g := range f.goroutines {
		n := total / int64(f.goroutines)
		if int64(g) < total%int64(f.goroutines) {
			n++
		}
		wg.Go(func() {
			shard := newShard()
			defer shard.Flush()
			for range n {
				asked := time.Now()
				v, err := seq.Next(ctx)
				now := time.Now()
				if err != nil {
					shard.Fail(now)
					errs[g] = err
					break
				}
				shard.Ack(now, now.Sub(asked))
				per[g].Add(v)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(began)
	_ = seq.Close() // the prefetch in flight ends: Held is final
	stt := seq.Stats()
	lwts, _ := mc.LWTCalls()
	r := procResult{
		Process: o.Process, ElapsedS: elapsed.Seconds(), Fetches: stt.Fetches, Conflicts: stt.Conflicts,
		UnknownOutcomes: stt.UnknownOutcomes, Abandoned: stt.Abandoned, Waits: stt.Waits, LWTs: lwts, Held: stt.Held,
		Chunks: seq.Chunks(),
	}
	r.Monotonic = galloccheck.ChunksIncrease(r.Chunks)
	for g := range per {
		r.Monotonic = r.Monotonic && per[g].Monotonic()
		r.runs = append(r.runs, per[g].Runs()...)
		r.IDs += per[g].IDs()
	}
	if err := errors.Join(errs...); err != nil {
		r.Error = err.Error()
		return r, fmt.Errorf("process %d: %w", p, err)
	}
	return r, nil
}

func mergeAlloc(f *allocFlags, desc string, results []procResult, wall time.Duration) allocReport {
	o := f.options()
	o.EnsureDefaults()
	rep := allocReport{Store: desc, Sequence: f.name, Type: f.typ, ChunkSize: o.ChunkSize, Procs: f.procs,
		Goroutines: f.goroutines, Spawned: f.spawn, Monotonic: true, Processes: results}
	var all []galloccheck.Run
	for _, r := range results {
		rep.IDs += r.IDs
		rep.ElapsedS = max(rep.ElapsedS, r.ElapsedS)
		rep.Fetches += r.Fetches
		rep.Conflicts += r.Conflicts
		rep.UnknownOutcomes += r.UnknownOutcomes
		rep.Abandoned += r.Abandoned
		rep.Waits += r.Waits
		rep.LWTs += r.LWTs
		rep.Monotonic = rep.Monotonic && r.Monotonic
		all = append(all, r.runs...)
	}
	if rep.ElapsedS == 0 {
		rep.ElapsedS = wall.Seconds()
	}
	rep.PerSecond = float64(rep.IDs) / rep.ElapsedS
	rep.Duplicates, _ = galloccheck.Duplicates(all)
	rep.Unique = rep.Duplicates == 0
	return rep
}

func printAlloc(w io.Writer, r allocReport) {
	fmt.Fprintf(w, "alloc: %s, sequence %q (%s, chunk %s), %d processes x %d goroutines\n", r.Store, r.Sequence, r.Type, commas(uint64(r.ChunkSize)), r.Procs, r.Goroutines)
	fmt.Fprintf(w, "%-16s%s in %.2f s = %s IDs/s\n", "IDs", commas(r.IDs), r.ElapsedS, commas(uint64(r.PerSecond+0.5)))
	fmt.Fprintf(w, "%-16s%s fetches, %s conflicts, %s unknown outcomes, %s cut short at close, %s LWTs\n", "chunks",
		commas(r.Fetches), commas(r.Conflicts), commas(r.UnknownOutcomes), commas(r.Abandoned), commas(r.LWTs))
	fmt.Fprintf(w, "%-16s%s\n", "waits", commas(r.Waits))
	fmt.Fprintf(w, "%-16s%s of %s values allocated (held unused at the end: at most 2 chunks per process); chunk use %.2f %%\n", "wasted", commas(r.Wasted), commas(r.Allocated), r.ChunkUse)
	uniq := "all unique"
	if !r.Unique {
		uniq = fmt.Sprintf("%s DUPLICATES", commas(r.Duplicates))
	}
	mono := "increasing per goroutine and per process's chunks"
	if !r.Monotonic {
		mono = "NOT increasing"
	}
	fmt.Fprintf(w, "%-16s%s; %s\n", "check", uniq, mono)
}

// runAllocChild is one spawned process: it waits until childStart, draws
// its share, and writes its result (JSON) and IDs (big-endian int64s).
// With childTimeline it records its timeline from childStart, the same
// instant in every child, and writes it there even when it fails.
func runAllocChild(ctx context.Context, e *env, f *allocFlags) (err error) {
	o, err := f.store.open(ctx, e.log, false)
	if err != nil {
		return err
	}
	defer func() { _ = o.close() }()
	var rec *timeline.Recorder
	if f.childTimeline != "" {
		rec, err = timeline.New(timeline.Options{Start: time.UnixMilli(f.childStart), Interval: f.timeline.interval,
			Title: fmt.Sprintf("cqlseq alloc: process %d", f.childIndex)})
		if err != nil {
			return err
		}
		defer func() {
			if werr := rec.Timeline(time.Now()).WriteFile(f.childTimeline); werr != nil {
				err = errors.Join(err, fmt.Errorf("--child-timeline: %w", werr))
			}
		}()
	}
	start := make(chan struct{})
	go func() {
		t := time.NewTimer(time.Until(time.UnixMilli(f.childStart)))
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		close(start)
	}()
	newShard := func() *timeline.Shard { return nil }
	if rec != nil {
		newShard = rec.NewShard
	}
	r, err := allocProcess(ctx, f, f.childIndex, o.st, func() {}, start, newShard)
	if err != nil {
		return err
	}
	base := filepath.Join(f.childOut, "proc-"+strconv.Itoa(f.childIndex))
	idf, err := os.Create(base + ".ids")
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(idf)
	for _, run := range r.runs {
		_ = binary.Write(bw, binary.BigEndian, run.First)
		_ = binary.Write(bw, binary.BigEndian, run.Last)
	}
	if err := errors.Join(bw.Flush(), idf.Close()); err != nil {
		return err
	}
	return writeJSON(base+".json", r)
}

// spawnAlloc runs f.procs child processes of this binary with the flags
// given to this one, and reads back their results and, when a timeline is
// wanted, their timelines merged into one titled title. When a child
// fails it returns the error with the timelines of the children that
// wrote one.
func spawnAlloc(ctx context.Context, e *env, f *allocFlags, fs *pflag.FlagSet, title string) ([]procResult, *timeline.Timeline, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp("", "cqlseq-alloc-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	startAt := time.Now().Add(5 * time.Second).UnixMilli()
	cmds := make([]*exec.Cmd, f.procs)
	for p := range cmds {
		cmds[p] = exec.CommandContext(ctx, exe, allocChildArgs(e.logLevel, fs, dir, p, startAt, f.timeline.wanted())...)
		cmds[p].Stdout, cmds[p].Stderr = io.Discard, e.stderr
		if err := cmds[p].Start(); err != nil {
			for _, c := range cmds[:p] {
				_ = c.Process.Kill()
				_ = c.Wait()
			}
			return nil, nil, fmt.Errorf("starting child %d: %w", p, err)
		}
	}
	var errs []error
	failed := make([]bool, f.procs)
	for p, c := range cmds {
		if err := c.Wait(); err != nil {
			failed[p] = true
			errs = append(errs, fmt.Errorf("child %d: %w", p, err))
		}
	}
	var tl *timeline.Timeline
	if f.timeline.wanted() {
		var terr error
		tl, terr = mergeChildTimelines(dir, failed, title)
		errs = append(errs, terr)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, tl, err
	}
	results, err := readChildResults(dir, f.procs)
	if err != nil {
		return nil, nil, err
	}
	return results, tl, nil
}

// allocChildArgs returns the arguments of child p of the alloc run whose
// flags are fs: the flags set in fs but the parent's own (--spawn, --json,
// --timeline, --plot; --timeline-interval is passed), and the child's: it
// writes its result into dir, starts drawing at startAt (Unix ms) and,
// with record, records its timeline into childTimelineFile(dir, p).
func allocChildArgs(logLevel string, fs *pflag.FlagSet, dir string, p int, startAt int64, record bool) []string {
	args := []string{"--log-level", logLevel, "alloc"}
	fs.Visit(func(fl *pflag.Flag) {
		switch fl.Name {
		case "spawn", "json", "timeline", "plot", "child-out", "child-index", "child-start", "child-timeline":
			return // the parent's, or set per child
		}
		if sv, ok := fl.Value.(pflag.SliceValue); ok {
			for _, v := range sv.GetSlice() {
				args = append(args, "--"+fl.Name+"="+v)
			}
			return
		}
		args = append(args, "--"+fl.Name+"="+fl.Value.String())
	})
	args = append(args, "--child-out", dir, "--child-index", strconv.Itoa(p), "--child-start", strconv.FormatInt(startAt, 10))
	if record {
		args = append(args, "--child-timeline", childTimelineFile(dir, p))
	}
	return args
}

// childTimelineFile names the file in dir into which child p writes its
// timeline.
func childTimelineFile(dir string, p int) string {
	return filepath.Join(dir, "proc-"+strconv.Itoa(p)+".timeline.json")
}

// mergeChildTimelines merges the timelines the children wrote into dir,
// one per element of failed, titled title. A child that failed may have
// written none (it failed before drawing, or was killed): it is skipped.
func mergeChildTimelines(dir string, failed []bool, title string) (*timeline.Timeline, error) {
	var tls []*timeline.Timeline
	for p, bad := range failed {
		tl, err := timeline.ReadFile(childTimelineFile(dir, p))
		if bad && errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("child %d's timeline: %w", p, err)
		}
		tls = append(tls, tl)
	}
	return timeline.Merge(title, tls...)
}

// readChildResults reads the results (JSON) and IDs the procs children
// wrote into dir.
func readChildResults(dir string, procs int) ([]procResult, error) {
	results := make([]procResult, procs)
	for p := range results {
		base := filepath.Join(dir, "proc-"+strconv.Itoa(p))
		b, err := os.ReadFile(base + ".json")
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &results[p]); err != nil {
			return nil, fmt.Errorf("child %d's result: %w", p, err)
		}
		raw, err := os.ReadFile(base + ".ids")
		if err != nil {
			return nil, err
		}
		var n uint64
		for i := 0; i+16 <= len(raw); i += 16 {
			run := galloccheck.Run{First: int64(binary.BigEndian.Uint64(raw[i:])), Last: int64(binary.BigEndian.Uint64(raw[i+8:]))}
			results[p].runs = append(results[p].runs, run)
			n += run.Len()
		}
		if n != results[p].IDs {
			return nil, fmt.Errorf("child %d: %d IDs in its file, %d reported", p, n, results[p].IDs)
		}
	}
	return results, nil
}
