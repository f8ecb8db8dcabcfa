package cli

import (
	"bufio"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cqlseq/cqlseq/galloc"
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

	// child mode (hidden): run process childIndex only, start drawing at
	// childStart (Unix ms), write the result into childOut.
	childOut   string
	childIndex int
	childStart int64
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
at a time), and the children's IDs are merged for the checks.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return usage(err)
			}
			if f.childOut != "" {
				return runAllocChild(cmd.Context(), e, f)
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
	fs.StringVar(&f.childOut, "child-out", "", "")
	fs.IntVar(&f.childIndex, "child-index", 0, "")
	fs.Int64Var(&f.childStart, "child-start", 0, "")
	for _, n := range []string{"child-out", "child-index", "child-start"} {
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

	runs []idRun // the IDs handed out, as runs of consecutive IDs
}

// idRun is a run of consecutive IDs [First, Last]: an ID handed out just
// after its predecessor extends the run. A process's IDs are kept as runs
// (at most one per chunk and goroutine while IDs increase), so that the
// uniqueness check takes memory for the chunks, not for the IDs.
type idRun struct{ First, Last int64 }

// runsOf collects the IDs of one goroutine as runs.
type runsOf struct {
	runs      []idRun
	n         uint64
	monotonic bool
}

func (r *runsOf) add(v int64) {
	if r.n == 0 {
		r.monotonic = true
	}
	r.n++
	if k := len(r.runs); k > 0 {
		last := &r.runs[k-1]
		if v <= last.Last {
			r.monotonic = false
		}
		if v == last.Last+1 {
			last.Last = v
			return
		}
	}
	r.runs = append(r.runs, idRun{v, v})
}

// overlaps returns how many IDs of runs were handed out more than once:
// the IDs covered by more than one run.
func overlaps(runs []idRun) uint64 {
	slices.SortFunc(runs, func(a, b idRun) int { return cmp.Compare(a.First, b.First) })
	var dup uint64
	reach := int64(math.MinInt64) // the largest Last so far
	for i, r := range runs {
		if i > 0 && r.First <= reach {
			dup += uint64(min(r.Last, reach) - r.First + 1)
		}
		reach = max(reach, r.Last)
	}
	return dup
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
	var results []procResult
	desc := shared.desc
	began := time.Now()
	if f.spawn {
		desc += " (child processes)"
		if results, err = spawnAlloc(ctx, e, f, fs); err != nil {
			return err
		}
	} else {
		results = make([]procResult, f.procs)
		start := make(chan struct{})
		var wg, ready sync.WaitGroup
		errs := make([]error, f.procs)
		ready.Add(f.procs)
		for p := range f.procs {
			wg.Go(func() {
				once := sync.OnceFunc(ready.Done)
				defer once()
				st := shared.st
				if f.store.kind == storeCQL && p > 0 { // a session per process
					o, err := f.store.open(ctx, e.log, false)
					if err != nil {
						errs[p] = err
						return
					}
					defer func() { _ = o.close() }()
					st = o.st
				}
				results[p], errs[p] = allocProcess(ctx, f, p, st, once, start)
			})
		}
		ready.Wait() // every process has opened the sequence
		close(start)
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
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

// allocProcess is one process: it opens the sequence on st (instrumented),
// calls opened, waits for start, draws its share with f.goroutines goroutines, and
// closes the sequence.
func allocProcess(ctx context.Context, f *allocFlags, p int, st storage.Storage, opened func(), start <-chan struct{}) (procResult, error) {
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
	per := make([]runsOf, f.goroutines)
	errs := make([]error, f.goroutines)
	began := time.Now()
	var wg sync.WaitGroup
	for g := range f.goroutines {
		n := total / int64(f.goroutines)
		if int64(g) < total%int64(f.goroutines) {
			n++
		}
		wg.Go(func() {
			for range n {
				v, err := seq.Next(ctx)
				if err != nil {
					errs[g] = err
					break
				}
				per[g].add(v)
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
		Chunks: seq.Chunks(), Monotonic: true,
	}
	r.Monotonic = slices.IsSortedFunc(r.Chunks, func(a, b galloc.Chunk) int { return cmp.Compare(a.First, b.First) })
	for _, g := range per {
		if g.n > 0 && !g.monotonic {
			r.Monotonic = false
		}
		r.runs = append(r.runs, g.runs...)
		r.IDs += g.n
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
	var all []idRun
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
	rep.Duplicates = overlaps(all)
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
func runAllocChild(ctx context.Context, e *env, f *allocFlags) error {
	o, err := f.store.open(ctx, e.log, false)
	if err != nil {
		return err
	}
	defer func() { _ = o.close() }()
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
	r, err := allocProcess(ctx, f, f.childIndex, o.st, func() {}, start)
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
// given to this one, and reads back their results.
func spawnAlloc(ctx context.Context, e *env, f *allocFlags, fs *pflag.FlagSet) ([]procResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "cqlseq-alloc-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var args []string
	fs.Visit(func(fl *pflag.Flag) {
		switch fl.Name {
		case "spawn", "json", "child-out", "child-index", "child-start":
			return
		}
		if sv, ok := fl.Value.(pflag.SliceValue); ok {
			for _, v := range sv.GetSlice() {
				args = append(args, "--"+fl.Name+"="+v)
			}
			return
		}
		args = append(args, "--"+fl.Name+"="+fl.Value.String())
	})
	startAt := time.Now().Add(5 * time.Second).UnixMilli()
	cmds := make([]*exec.Cmd, f.procs)
	for p := range cmds {
		a := append([]string{"--log-level", e.logLevel, "alloc"}, args...)
		a = append(a, "--child-out", dir, "--child-index", strconv.Itoa(p), "--child-start", strconv.FormatInt(startAt, 10))
		cmds[p] = exec.CommandContext(ctx, exe, a...)
		cmds[p].Stdout, cmds[p].Stderr = io.Discard, e.stderr
		if err := cmds[p].Start(); err != nil {
			for _, c := range cmds[:p] {
				_ = c.Process.Kill()
				_ = c.Wait()
			}
			return nil, fmt.Errorf("starting child %d: %w", p, err)
		}
	}
	var errs []error
	for p, c := range cmds {
		if err := c.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("child %d: %w", p, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	results := make([]procResult, f.procs)
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
			run := idRun{int64(binary.BigEndian.Uint64(raw[i:])), int64(binary.BigEndian.Uint64(raw[i+8:]))}
			results[p].runs = append(results[p].runs, run)
			n += uint64(run.Last - run.First + 1)
		}
		if n != results[p].IDs {
			return nil, fmt.Errorf("child %d: %d IDs in its file, %d reported", p, n, results[p].IDs)
		}
	}
	return results, nil
}
