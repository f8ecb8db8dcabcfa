package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/cqlseq/cqlseq/apppart"
	"github.com/cqlseq/cqlseq/internal/lab/timeline"
	"github.com/cqlseq/cqlseq/internal/latency"
	"github.com/cqlseq/cqlseq/isequencer"
)

// latencyMethod documents how the reports' percentiles are computed.
const latencyMethod = "latency of each successful command (Do call, including the wait for its partition): " + latency.Method

type benchFlags struct {
	store    storeFlags
	clock    clockFlags
	kill     killPointFlags
	load     loadFlags
	baseline bool
	jsonFile string
	ackLog   string
	timeline timelineFlags
	nodePIDs []int
}

func newBenchCmd(e *env) *cobra.Command {
	f := &benchFlags{}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Benchmark the command flow on bbolt or a CQL cluster",
		Long: `bench drives --partitions application partitions with commands (each takes a
record ID and a WLog offset in a random one of --workspaces workspaces and
writes its event to the PLog in --mode) for --duration, and reports
commands/s, latency percentiles, busy rejections, flush batch sizes and the
time the partitions took to actualize when opened.

--baseline also runs, after it, a raw PLog insert loop: plog.Writer alone,
same mode, same event shape, no sequencer (PLog partitions 61440+p, at
offsets from the run's start time in microseconds << 12, so runs never
collide), and prints the ratio of the two rates.

On bbolt without --dir/--file the file is in a temporary directory that is
removed at the end. ` + latencyMethod + `.

--timeline FILE writes the timeline of the sequencer run (not the
baseline's): ` + timelineHelp + `

--plot FILE.svg draws it: commands/s and latency over time, in two panels.
Both files are checked to be writable before the run starts.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			storeErr := f.store.validate() // first: it resolves the store's kind
			if err := errors.Join(append(append(append(f.clock.validate(f.store.kind), f.kill.validate()...), f.timeline.validate()...), storeErr, f.load.validate())...); err != nil {
				return usage(err)
			}
			if err := f.timeline.checkWritable(); err != nil {
				return err
			}
			if err := checkNodePIDs(f.nodePIDs); err != nil {
				return err
			}
			return runBench(cmd.Context(), e, f)
		},
	}
	fs := cmd.Flags()
	f.store.addKind(fs)
	f.store.addBolt(fs, "bbolt: directory of "+boltFileName+" (default: a temporary directory, removed at the end)")
	f.store.cluster.add(fs)
	f.clock.add(fs)
	f.kill.add(fs)
	f.load.add(fs, 10*time.Second)
	fs.BoolVar(&f.baseline, "baseline", false, "also run a raw PLog insert loop (plog.Writer alone, same mode) and print the ratio")
	fs.StringVar(&f.jsonFile, "json", "", "write the report as JSON to this file")
	f.timeline.add(fs)
	fs.IntSliceVar(&f.nodePIDs, "node-pids", nil, "PIDs of the store's local node processes: report their CPU time per command")
	_ = fs.MarkHidden("node-pids")
	fs.StringVar(&f.ackLog, "ack-log", "", "append each acknowledged command (partition, offset, WSID, numbers) to this file, fsynced before it counts (for verify --acks)")
	return cmd
}

// benchReport is bench's report; --json writes it.
type benchReport struct {
	Store         string         `json:"store"`
	Mode          string         `json:"mode"`
	App           uint32         `json:"app"`
	Partitions    int            `json:"partitions"`
	Workspaces    int            `json:"workspaces"`
	Concurrency   int            `json:"concurrency"`
	DurationS     float64        `json:"duration_s"`
	Interrupted   bool           `json:"interrupted"`
	Actualization actReport      `json:"actualization"`
	Sequencer     phaseReport    `json:"sequencer"`
	Busy          busyReport     `json:"busy"`
	Flush         flushReport    `json:"flush"`
	Baseline      *phaseReport   `json:"baseline,omitempty"`
	Ratio         float64        `json:"sequencer_to_baseline,omitempty"`
	CQL           *cqlHostReport `json:"cql_hosts,omitempty"`
	Cost          *costReport    `json:"cost,omitempty"` // the sequencer run's; nil: no command acknowledged
	LatencyMethod string         `json:"latency_method"`
}

// cqlHostReport is what the CQL session's health-aware host choice did.
type cqlHostReport struct {
	Attempts       uint64   `json:"attempts"`
	Hedges         uint64   `json:"hedges"`
	Retries        uint64   `json:"retries"`
	Probes         uint64   `json:"probes"`
	Suspicions     uint64   `json:"suspicions"`
	SuspectedAtEnd []string `json:"suspected_at_end"`
	HealthyP99Ms   float64  `json:"healthy_p99_ms"`
}

type actReport struct {
	WallMs         float64 `json:"wall_ms"`         // from the first Open until every partition had actualized
	SlowestMs      float64 `json:"slowest_ms"`      // the slowest partition's actualization, as its sequencer measured it
	EventsReplayed int     `json:"events_replayed"` // all partitions
}

type phaseReport struct {
	Commands   uint64        `json:"commands"`
	Numbers    uint64        `json:"numbers"`
	ElapsedS   float64       `json:"elapsed_s"`
	PerSecond  float64       `json:"per_second"`
	Latency    latencyReport `json:"latency_ms"`
	Errors     uint64        `json:"errors"`
	FirstError string        `json:"first_error,omitempty"`
	Stopped    string        `json:"stopped,omitempty"`
}

type latencyReport struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
}

type busyReport struct {
	Rejections  uint64 `json:"rejections"`  // ErrBusy answers to the load (each retried)
	Actualizing uint64 `json:"actualizing"` // the sequencers' count, by reason
	Unflushed   uint64 `json:"unflushed"`
}

type flushReport struct {
	Flushes   uint64  `json:"flushes"`
	Values    uint64  `json:"values"`
	MeanBatch float64 `json:"mean_batch"`
	MaxBatch  uint64  `json:"max_batch"`
}

func newPhaseReport(r *loadResult) phaseReport {
	p := phaseReport{
		Commands:  r.commands,
		Numbers:   r.numbers,
		ElapsedS:  r.elapsed.Seconds(),
		PerSecond: r.perSecond(),
		Latency: latencyReport{
			Mean: msf(r.lat.Mean()), P50: msf(r.lat.Quantile(0.50)), P95: msf(r.lat.Quantile(0.95)),
			P99: msf(r.lat.Quantile(0.99)), Max: msf(r.lat.Max()),
		},
		Errors: r.errors,
	}
	if r.firstErr != nil {
		p.FirstError = oneLine(r.firstErr)
	}
	if r.stopped != nil {
		p.Stopped = oneLine(r.stopped)
	}
	return p
}

func runBench(ctx context.Context, e *env, f *benchFlags) (err error) {
	in, err := e.startInstruments(f.load.metricsAddr)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, in.stop()) }()
	f.store.cluster.now = f.clock.now(time.Now())
	store, err := f.store.open(ctx, e.log, false)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, store.close()) }()
	if err := store.registerHostHealth(in.mc); err != nil {
		return err
	}
	st := in.mc.Storage(f.kill.wrap(store.st, isequencer.ClusterAppID(f.load.app), e.stderr))

	rep := benchReport{
		Store: store.desc, Mode: f.load.parsedMode.String(), App: f.load.app, Partitions: f.load.partitions,
		Workspaces: f.load.workspaces, Concurrency: f.load.concurrency, DurationS: f.load.duration.Seconds(),
		LatencyMethod: latencyMethod,
	}
	fmt.Fprintf(e.stdout, "cqlseq bench: %s, mode %s, app %d, %s, %s workspaces, %s per partition, %v\n",
		rep.Store, rep.Mode, rep.App, plural(uint64(rep.Partitions), "partition", "partitions"), commas(uint64(rep.Workspaces)),
		plural(uint64(rep.Concurrency), "goroutine", "goroutines"), f.load.duration)

	var count atomic.Uint64
	lc := f.load.loadConfig(f.load.duration)
	lc.count = &count
	// The ack log exists from the start: a run killed while it opens its
	// partitions leaves an empty one for verify --acks.
	if f.ackLog != "" {
		al, aerr := startAckLog(e, f.ackLog, &rep)
		if aerr != nil {
			return aerr
		}
		defer func() { err = errors.Join(err, al.Close()) }()
		lc.ack = func(p isequencer.PartitionID, ws isequencer.WSID, res apppart.Result) error {
			return al.Ack(p, res.Offset, ws, commandSeqs, res.Numbers)
		}
	}
	parts, ost, err := openPartitions(ctx, f.load.openConfig(e, in, st))
	if err != nil {
		return err
	}
	rep.Actualization = actReport{WallMs: msf(ost.wall), SlowestMs: msf(ost.maxTook), EventsReplayed: ost.events}

	title := fmt.Sprintf("cqlseq bench: %s, mode %s, %s, %s per partition", rep.Store, rep.Mode,
		plural(uint64(rep.Partitions), "partition", "partitions"), plural(uint64(rep.Concurrency), "client", "clients"))
	rec, err := f.timeline.recorder(title)
	if err != nil {
		return err
	}
	lc.timeline = rec
	costBefore, err := readCostCounts(in.mc, store, f.nodePIDs)
	if err != nil {
		return err
	}
	stop := e.timedProgress("sequencer", f.load.duration, &count)
	res := runCommands(ctx, parts.parts, lc)
	stop()
	var tl *timeline.Timeline
	if rec != nil {
		tl = rec.Timeline(time.Now())
	}
	lc.timeline = nil
	if err := parts.close(); err != nil {
		return err
	}
	costAfter, err := readCostCounts(in.mc, store, f.nodePIDs)
	if err != nil {
		return err
	}
	rep.Cost = newCostReport(costBefore, costAfter, res.commands)
	rep.Sequencer = newPhaseReport(&res)
	rep.Busy.Rejections = res.busy
	rep.Busy.Actualizing, rep.Busy.Unflushed = parts.busyByReason()
	fl, vals, maxB := parts.flushStats()
	rep.Flush = flushReport{Flushes: fl, Values: vals, MaxBatch: maxB}
	if fl > 0 {
		rep.Flush.MeanBatch = float64(vals) / float64(fl)
	}

	if f.baseline && ctx.Err() == nil {
		count.Store(0)
		stop := e.timedProgress("baseline", f.load.duration, &count)
		bres, err := runBaseline(ctx, st, f.load.parsedMode, baselineBase(time.Now()), lc)
		stop()
		if err != nil {
			return err
		}
		b := newPhaseReport(&bres)
		rep.Baseline = &b
		if b.PerSecond > 0 {
			rep.Ratio = rep.Sequencer.PerSecond / b.PerSecond
		}
	}
	if h, ok := store.hostHealth(); ok {
		rep.CQL = &cqlHostReport{Attempts: h.Attempts, Hedges: h.Hedges, Retries: h.Retries, Probes: h.Probes,
			Suspicions: h.Suspicions, SuspectedAtEnd: h.Suspected, HealthyP99Ms: msf(h.HealthyP99)}
	}
	rep.Interrupted = ctx.Err() != nil
	printBench(e.stdout, &rep)
	if f.jsonFile != "" {
		if err := writeJSON(f.jsonFile, &rep); err != nil {
			return err
		}
	}
	if err := f.timeline.write(e, tl); err != nil {
		return err
	}
	return benchOutcome(ctx, &res, &rep)
}

// benchOutcome is bench's verdict once the report is printed: the
// interruption, a stopped run (a conflict, an ack log failure, a refused
// command), a run in which commands failed and none succeeded, or a
// stopped baseline is an error (exit 1, one line); else nil.
func benchOutcome(ctx context.Context, res *loadResult, rep *benchReport) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case res.stopped != nil:
		return fmt.Errorf("the sequencer run stopped: %w", res.stopped)
	case res.commands == 0 && res.errors > 0:
		return fmt.Errorf("no command succeeded, %s failed; the first: %w", commas(res.errors), res.firstErr)
	case rep.Baseline != nil && rep.Baseline.Stopped != "":
		return fmt.Errorf("the baseline stopped: %s", rep.Baseline.Stopped)
	}
	return nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func printLatency(w io.Writer, l latencyReport) {
	fmt.Fprintf(w, "  latency        mean %.3f ms, p50 %.3f ms, p95 %.3f ms, p99 %.3f ms, max %.3f ms\n", l.Mean, l.P50, l.P95, l.P99, l.Max)
}

func printPhase(w io.Writer, name, unit string, p *phaseReport) {
	fmt.Fprintf(w, "%-15s%s %s in %.2f s = %s %s/s, %s numbers\n", name, commas(p.Commands), unit, p.ElapsedS,
		commas(uint64(p.PerSecond+0.5)), unit, commas(p.Numbers))
	printLatency(w, p.Latency)
	if p.Errors > 0 {
		fmt.Fprintf(w, "  errors         %s, first: %s\n", commas(p.Errors), p.FirstError)
	}
	if p.Stopped != "" {
		fmt.Fprintf(w, "  STOPPED        %s\n", p.Stopped)
	}
}

// hedgesNote says which hedges and retries a healthy cluster shows.
const hedgesNote = `  (normal on a healthy cluster: hedges near 1 % of attempts, as the adaptive hedge delay is the p99 of
   healthy replies; a few retries after a timeout; no suspicion. More, or a suspected host: docs/gray-failure.md)`

func printBench(w io.Writer, r *benchReport) {
	fmt.Fprintf(w, "%-15s%d partitions ready in %.1f ms (slowest %.1f ms), %s PLog events replayed\n", "actualization",
		r.Partitions, r.Actualization.WallMs, r.Actualization.SlowestMs, commas(uint64(r.Actualization.EventsReplayed)))
	printPhase(w, "sequencer", "commands", &r.Sequencer)
	fmt.Fprintf(w, "  busy           %s rejections (sequencers: %s actualizing, %s too many unflushed)\n",
		commas(r.Busy.Rejections), commas(r.Busy.Actualizing), commas(r.Busy.Unflushed))
	fmt.Fprintf(w, "  flushes        %s writes of %s values: %.1f values per write on average, %s at most\n",
		commas(r.Flush.Flushes), commas(r.Flush.Values), r.Flush.MeanBatch, commas(r.Flush.MaxBatch))
	printCost(w, r.Cost)
	if c := r.CQL; c != nil {
		suspected := "none"
		if len(c.SuspectedAtEnd) > 0 {
			suspected = strings.Join(c.SuspectedAtEnd, ",")
		}
		fmt.Fprintf(w, "  cql hosts      %s attempts, %s hedges, %s retries, %s probes, %s suspicions, healthy p99 %.3f ms, suspected at the end: %s\n",
			commas(c.Attempts), commas(c.Hedges), commas(c.Retries), commas(c.Probes), commas(c.Suspicions), c.HealthyP99Ms, suspected)
		fmt.Fprintln(w, hedgesNote)
	}
	if r.Baseline != nil {
		printPhase(w, "baseline", "events", r.Baseline)
		fmt.Fprintf(w, "%-15ssequencer / baseline = %.2f (commands/s over raw PLog events/s, mode %s)\n", "ratio", r.Ratio, r.Mode)
	}
	if r.Interrupted {
		fmt.Fprintln(w, "interrupted: the figures cover the time that ran")
	}
	fmt.Fprintf(w, "(%s)\n", latencyMethod)
}
