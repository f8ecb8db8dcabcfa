package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/plog/plogcheck"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/faulty"
	"github.com/cqlseq/cqlseq/storage/mem"
	"github.com/cqlseq/cqlseq/vvmadapter"
)

// demoAfter bounds the commands the demo runs after the restart.
const demoAfter = time.Second

// demoKillGrace is how long load workers may run past the crash; they stop
// at their first failure after it.
const demoKillGrace = time.Second

// errCrashed is what the cut-off store answers.
var errCrashed = fmt.Errorf("demo: crashed: %w", storage.ErrUnavailable)

// startKiller calls kill once d has passed, unless the returned stop comes
// first; stop waits for the goroutine.
func startKiller(d time.Duration, kill func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			kill()
		case <-done:
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

type demoFlags struct {
	store  storeFlags // bbolt only: dir, file, no-sync
	memory bool
	load   loadFlags
}

func newDemoCmd(e *env) *cobra.Command {
	f := &demoFlags{store: storeFlags{kind: storeBolt}}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Simulate a command processor, kill and restart it, and check every number (offline)",
		Long: `demo runs a simulated command processor on an embedded bbolt file (or, with
--memory, in memory): --partitions application partitions take commands in
--workspaces workspaces for --duration. Then it crashes: the store stops
answering (nothing more is written; commands in flight fail) and every
partition and the store are closed, with the values not yet flushed lost.
It re-opens them and shows how many PLog events the restart replayed out
of all and how long it took. It runs a little more load, and finally scans every
partition's PLog with the code of 'cqlseq verify': no number may appear
twice, and the stored numbers must cover every flushed event. It exits 1
when the check fails.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			err := f.load.validate()
			if f.memory && (f.store.dir != "" || f.store.file != "") {
				err = errors.Join(err, errors.New("--memory excludes --dir and --file"))
			}
			err = errors.Join(err, f.store.validate())
			if err != nil {
				return usage(err)
			}
			return runDemo(cmd.Context(), e, f)
		},
	}
	fs := cmd.Flags()
	f.store.kind = storeBolt // the demo's store is embedded (or --memory), whatever CQLSEQ_CQL_HOSTS says
	f.store.addBolt(fs, "directory of "+boltFileName+" (default: a temporary directory, removed at the end)")
	fs.BoolVar(&f.memory, "memory", false, "use the in-memory store instead of bbolt")
	f.load.add(fs, 5*time.Second)
	return cmd
}

// demoStore is the demo's store, re-openable for the restart.
type demoStore struct {
	f      *demoFlags
	e      *env
	in     *instruments
	opened *openedStore // bbolt
	mem    *mem.Store
}

func (d *demoStore) open(ctx context.Context) (storage.Storage, error) {
	if d.f.memory {
		if d.mem == nil {
			d.mem = mem.New(mem.Options{})
		}
		return d.in.mc.Storage(d.mem), nil
	}
	f := d.f.store
	if d.opened != nil { // re-open the same file
		f.file, f.dir = d.opened.path, ""
	}
	o, err := f.open(ctx, d.e.log, false)
	if err != nil {
		return nil, err
	}
	if d.opened != nil {
		o.tmpDir = d.opened.tmpDir
	}
	d.opened = o
	return d.in.mc.Storage(o.st), nil
}

// kill closes the bbolt file (the in-memory store lives on, as a disk
// would).
func (d *demoStore) kill() error {
	if d.opened == nil {
		return nil
	}
	err := d.opened.st.Close()
	d.opened.st = nil
	return err
}

func (d *demoStore) close() error {
	switch {
	case d.opened != nil:
		return d.opened.close()
	case d.mem != nil:
		return d.mem.Close()
	}
	return nil
}

func (d *demoStore) desc() string {
	if d.f.memory {
		return "in-memory store"
	}
	return d.opened.desc
}

func runDemo(ctx context.Context, e *env, f *demoFlags) (err error) {
	in, err := e.startInstruments(f.load.metricsAddr)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, in.stop()) }()
	ds := &demoStore{f: f, e: e, in: in}
	defer func() { err = errors.Join(err, ds.close()) }()
	st, err := ds.open(ctx)
	if err != nil {
		return err
	}
	w := e.stdout
	fmt.Fprintf(w, "cqlseq demo: %s, mode %s, %d partitions, %s workspaces, %v\n\n",
		ds.desc(), f.load.parsedMode, f.load.partitions, commas(uint64(f.load.workspaces)), f.load.duration)

	// The first run's store can be cut off, as by a crash: from then on
	// nothing more is written.
	cutter, err := faulty.New(st, faulty.Options{})
	if err != nil {
		return err
	}
	parts, _, err := openPartitions(ctx, f.load.openConfig(e, in, cutter))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, parts.close()) }()

	// 1. Load, until the crash at --duration.
	var (
		count  atomic.Uint64
		killed atomic.Bool
	)
	lc := f.load.loadConfig(f.load.duration + demoKillGrace)
	lc.count, lc.killed = &count, &killed
	stop := e.timedProgress("load", f.load.duration, &count)
	stopKiller := startKiller(f.load.duration, func() {
		killed.Store(true)
		_ = cutter.SetRules(faulty.Rule{Action: faulty.Fail, Err: errCrashed})
	})
	res := runCommands(ctx, parts.parts, lc)
	stopKiller()
	stop()
	if err := demoLoadErr(ctx, &res); err != nil {
		return err
	}
	fmt.Fprintf(w, "1. load     %s commands in %.2f s = %s commands/s, %s numbers issued\n",
		commas(res.commands), res.elapsed.Seconds(), commas(uint64(res.perSecond()+0.5)), commas(res.numbers))
	fmt.Fprintf(w, "            latency p50 %s, p99 %s; %s busy rejections, %s errors\n",
		ms(res.lat.Quantile(0.5)), ms(res.lat.Quantile(0.99)), commas(res.busy), commas(res.errors))

	// 2. Crash: the store stopped answering at --duration; the partitions
	// are closed with what they had not flushed, and so is the store.
	_ = cutter.SetRules(faulty.Rule{Action: faulty.Fail, Err: errCrashed}) // if the load ended before the killer
	if err := errors.Join(parts.close(), ds.kill()); err != nil {
		return err
	}
	fmt.Fprintf(w, "2. crash    the store stopped answering: %s in flight failed; values not yet flushed are lost\n",
		plural(res.killed, "command", "commands"))

	// 3. Restart.
	if st, err = ds.open(ctx); err != nil {
		return err
	}
	parts, ost, err := openPartitions(ctx, f.load.openConfig(e, in, st))
	if err != nil {
		return err
	}
	total := res.events()
	fmt.Fprintf(w, "3. restart  %d partitions ready in %s: replayed %s of the %s PLog events (%.2f %%)\n",
		f.load.partitions, ms(ost.wall), commas(uint64(ost.events)), commas(total), percent(uint64(ost.events), total))
	fmt.Fprintf(w, "            the slowest partition actualized in %s\n", ms(ost.maxTook))

	// 4. More commands after the restart: the sequences continue.
	after := min(demoAfter, f.load.duration)
	count.Store(0)
	lc.duration, lc.seed, lc.killed = after, f.load.seed+1, nil
	stop = e.timedProgress("after", after, &count)
	res2 := runCommands(ctx, parts.parts, lc)
	stop()
	if err := demoLoadErr(ctx, &res2); err != nil {
		return err
	}
	fmt.Fprintf(w, "4. continue %s more commands in %.2f s\n", commas(res2.commands), res2.elapsed.Seconds())
	if err := parts.close(); err != nil {
		return err
	}

	// 5. Verify every partition's PLog against the stored numbers.
	return demoVerify(ctx, e, st, f)
}

// demoLoadErr turns an interrupted or stopped load into the demo's error.
func demoLoadErr(ctx context.Context, r *loadResult) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case r.stopped != nil:
		return r.stopped
	case r.commands == 0 && r.firstErr != nil:
		return fmt.Errorf("no command succeeded: %w", r.firstErr)
	}
	return nil
}

func demoVerify(ctx context.Context, e *env, st storage.Storage, f *demoFlags) error {
	rd, err := plog.NewReader(st, plog.ReaderOptions{})
	if err != nil {
		return err
	}
	o := plogcheck.PartitionOptions{Stored: vvmadapter.New(st, isequencer.ClusterAppID(f.load.app))}
	var sum plogcheck.PartitionReport
	var failed []*plogcheck.PartitionReport
	for p := range f.load.partitions {
		r, err := plogcheck.Partition(ctx, rd, isequencer.PartitionID(p), o)
		if err != nil {
			return fmt.Errorf("verify: %w", err)
		}
		sum.Events += r.Events
		sum.Workspaces += r.Workspaces
		sum.Keys += r.Keys
		sum.Numbers += r.Numbers
		sum.Problems += r.Problems
		if !r.OK() {
			failed = append(failed, r)
		}
	}
	w := e.stdout
	fmt.Fprintf(w, "5. verify   %s PLog events, %s workspaces, %s sequences, %s numbers checked: ",
		commas(sum.Events), commas(uint64(sum.Workspaces)), commas(uint64(sum.Keys)), commas(sum.Numbers))
	if len(failed) == 0 {
		fmt.Fprintln(w, "OK")
		fmt.Fprintln(w, "            no number was issued twice; the stored numbers cover every flushed event")
		return nil
	}
	fmt.Fprintln(w, "FAILED")
	for _, r := range failed {
		printFindings(w, r)
	}
	return fmt.Errorf("%w: %s problems", errVerifyFailed, commas(sum.Problems))
}

// printFindings lists a partition's findings, and how many more it found.
func printFindings(w io.Writer, r *plogcheck.PartitionReport) {
	for _, fd := range r.Listed {
		fmt.Fprintf(w, "  partition %d %s\n", r.Partition, fd)
	}
	if n := r.Unlisted(); n > 0 {
		fmt.Fprintf(w, "  partition %d: %s more not listed\n", r.Partition, commas(n))
	}
}
