// Command cqlseq-figures runs the command behind each headline figure of the
// README and prints, with the machine named (make figures), the full table
// (case, figure, cost per command, command) and the same figures as the
// README's headline list (case: figure). Both are pasted: the table into
// docs/benchmarks.md's "The current table", the list into the README's
// Figures section.
//
// Cases, in order: the sequencer core and its in-memory recovery (go test
// -bench, medians of -count runs); recovery on one CQL node (make
// bench-recovery, which starts and stops its node); cqlseq bench on bbolt;
// and, on a 3-node launcher cluster it starts and stops, cqlseq bench at
// RF 3 in each mode with the nodes' CPU time per command, and a fenced run
// during which a node is SIGSTOPped for 15 s; then the ID service (make
// bench-service: cqlseq serve beside a trivial HTTP handler, under vegeta).
//
// Each cqlseq bench run records its timeline into -figures (NAME.json)
// and draws it (NAME.svg) with cqlseq plot; the command lines it logs
// draw them again from the recorded files.
//
//	cqlseq-figures -cqlseq bin/cqlseq -launcher bin/cassandra-launcher -figures docs/figures
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/cqlseq/cqlseq/internal/stats"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cqlseq/cqlseq/internal/lab/timeline"
	"github.com/cqlseq/cqlseq/internal/shellwords"
	"github.com/cqlseq/cqlseq/testenv/cassandra"
)

type config struct {
	cqlseq, launcher string
	figures          string // the directory of the recorded timelines and their charts
	count            int
	duration         time.Duration
	heap             string
	only             string
}

// row is one line of the table: what was measured, the figure, what a
// command cost ("" where the case has no commands), and the command that
// reproduces it; short names the case in the README's headline list.
type row struct{ what, short, figure, cost, command string }

// defaults is the configuration of the README's figures.
var defaults = config{
	cqlseq: "bin/cqlseq", launcher: "bin/cassandra-launcher", figures: "docs/figures",
	count: 5, duration: 30 * time.Second, heap: "512m",
}

// The paused-node run: node pausedNode of three is SIGSTOPped pauseFor,
// pauseAfter into a run of pausedRun.
const (
	pausedNode = 2
	pauseAfter = 15 * time.Second
	pauseFor   = 15 * time.Second
	pausedRun  = 45 * time.Second
)

// timelineInterval is the interval of the recorded timelines.
const timelineInterval = time.Second

func main() {
	c := defaults
	flag.StringVar(&c.cqlseq, "cqlseq", c.cqlseq, "the cqlseq binary")
	flag.StringVar(&c.launcher, "launcher", c.launcher, "the Cassandra launcher")
	flag.StringVar(&c.figures, "figures", c.figures, "directory of the recorded timelines (NAME.json) and their charts (NAME.svg)")
	flag.IntVar(&c.count, "count", c.count, "go test -count of the core benchmarks (medians are reported)")
	flag.DurationVar(&c.duration, "duration", c.duration, "cqlseq bench --duration")
	flag.StringVar(&c.heap, "heap", c.heap, "heap of each cluster node")
	flag.StringVar(&c.only, "only", "", "run only the cases whose name contains this (core, recovery, bbolt, rf3, service)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "cqlseq-figures: %v\n", err)
		os.Exit(1)
	}
}

// figureCase is a group of the table's rows measured together: plan gives
// their case and command (no figure), measure their figures, in order.
type figureCase struct {
	name    string
	plan    func(config) []row
	measure func(context.Context, config) ([]measured, error)
}

var cases = []figureCase{
	{"core", corePlan, coreMeasure},
	{"recovery", recoveryPlan, recoveryMeasure},
	{"bbolt", bboltPlan, bboltMeasure},
	{"rf3", clusterPlan, clusterMeasure},
	{"service", servicePlan, serviceMeasure},
}

// plan is the table make figures prints, without the figures.
func plan(c config) []row {
	var rows []row
	for _, cs := range cases {
		if c.only == "" || strings.Contains(cs.name, c.only) {
			rows = append(rows, cs.plan(c)...)
		}
	}
	return rows
}

func run(ctx context.Context, c config, w io.Writer) error {
	began, loadBefore := time.Now(), loadAverage()
	if err := os.MkdirAll(c.figures, 0o755); err != nil {
		return err
	}
	var rows []row
	for _, cs := range cases {
		if c.only != "" && !strings.Contains(cs.name, c.only) {
			continue
		}
		logf("%s ...", cs.name)
		figs, err := cs.measure(ctx, c)
		if err != nil {
			return fmt.Errorf("%s: %w", cs.name, err)
		}
		r := cs.plan(c)
		if len(figs) != len(r) {
			return fmt.Errorf("%s: %d figures for %d rows", cs.name, len(figs), len(r))
		}
		for i := range r {
			r[i].figure, r[i].cost = figs[i].figure, figs[i].cost
		}
		rows = append(rows, r...)
	}
	fmt.Fprintf(w, "\nMachine: %s. Apache Cassandra 5.0.8 (the launcher's, on loopback). %s, %s; make figures took %.0f s, load average %s at its start, %s at its end.\n\n",
		machine(), runtime.Version(), time.Now().UTC().Format("2006-01-02"), time.Since(began).Seconds(), loadBefore, loadAverage())
	fmt.Fprintln(w, tableHeader)
	for _, r := range rows {
		fmt.Fprintln(w, r.markdown())
	}
	fmt.Fprintf(w, "\n%s\n\n", headlinesIntro)
	for _, r := range rows {
		fmt.Fprintln(w, r.headline())
	}
	return nil
}

// tableHeader heads the full table (docs/benchmarks.md, The current table).
const tableHeader = "| case | figure | cost per command | command |\n|---|---|---|---|"

// headlinesIntro precedes the README's headline list in the output.
const headlinesIntro = "The README's Figures (its headline list):"

// markdown is r as a row of the full table.
func (r row) markdown() string {
	cost := r.cost
	if cost == "" {
		cost = "-"
	}
	return fmt.Sprintf("| %s | %s | %s | `%s` |", r.what, r.figure, cost, strings.ReplaceAll(r.command, "|", `\|`))
}

// headline is r as an item of the README's headline list: the case (its
// short name) and its figure, without cost or command (those are in the
// full table).
func (r row) headline() string {
	what := r.short
	if what == "" {
		what = r.what
	}
	return fmt.Sprintf("- %s: **%s**", what, r.figure)
}

// measured is a row's figure and cost.
type measured struct{ figure, cost string }

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s figures: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// machine names the machine: cores, CPU model, memory, kernel.
func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		if m := regexp.MustCompile(`(?m)^model name\s*:\s*(.+)$`).FindSubmatch(b); m != nil {
			model = strings.TrimSpace(string(m[1]))
		}
	}
	mem := "? GiB"
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if m := regexp.MustCompile(`(?m)^MemTotal:\s*(\d+) kB`).FindSubmatch(b); m != nil {
			kb, _ := strconv.ParseFloat(string(m[1]), 64)
			mem = fmt.Sprintf("%.0f GiB", kb/(1<<20))
		}
	}
	kernel := ""
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = ", Linux " + strings.TrimSpace(string(b))
	}
	return fmt.Sprintf("%d cores (%s), %s%s", runtime.NumCPU(), model, mem, kernel)
}

// loadAverage is the 1-minute load average ("?" when unknown): the figures
// of a busy machine are not its figures.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}

// command runs name args, with its stderr passed through, and returns its stdout.
func command(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var out bytes.Buffer
	cmd.Stdout = io.MultiWriter(&out, prefixed{})
	cmd.Stderr = os.Stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return out.Bytes(), nil
}

// prefixed copies a child's stdout to stderr, so that the run shows progress.
type prefixed struct{}

func (prefixed) Write(p []byte) (int, error) { return os.Stderr.Write(p) }

// benchMetric collects a metric's values from go test -bench output, per
// benchmark whose name starts with prefix.
func benchMetric(out []byte, prefix, unit string) []float64 {
	var vs []float64
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 || !strings.HasPrefix(f[0], prefix) {
			continue
		}
		for i := 2; i+1 < len(f); i += 2 {
			if f[i+1] == unit {
				if v, err := strconv.ParseFloat(f[i], 64); err == nil {
					vs = append(vs, v)
				}
			}
		}
	}
	return vs
}

func coreArgs(c config) []string {
	return []string{"test", "-run", "^$", "-bench", "BenchmarkSequencer/workspaces=1$|BenchmarkRecovery/unflushed", "-count", strconv.Itoa(c.count), "./isequencer/"}
}

func corePlan(c config) []row {
	cmd := shellLine("go", coreArgs(c))
	return []row{
		{what: "sequencer core, one transaction (Start + 3 Next + Flush), 1 workspace", short: "sequencer core, one transaction (Start + 3 Next + Flush)", command: cmd},
		{what: "recovery of 1,000,000 unflushed events (in memory)", short: "recovery of 1,000,000 unflushed events, in memory", command: cmd},
	}
}

func coreMeasure(ctx context.Context, c config) ([]measured, error) {
	out, err := command(ctx, "go", coreArgs(c)...)
	if err != nil {
		return nil, err
	}
	seq := benchMetric(out, "BenchmarkSequencer/workspaces=1-", "ns/op")
	rec := benchMetric(out, "BenchmarkRecovery/unflushed=", "ns/recovery")
	if len(seq) != c.count || len(rec) != c.count {
		return nil, fmt.Errorf("go test -bench: want %d results of each, got %d and %d", c.count, len(seq), len(rec))
	}
	return []measured{
		{figure: fmt.Sprintf("%.0f ns (median of %d)", stats.Median(seq), len(seq))},
		{figure: fmt.Sprintf("%.0f ms (median of %d)", stats.Median(rec)/1e6, len(rec))},
	}, nil
}

// recoveryMedian matches bench-recovery's medians: "cqlseq open this build wall 1.61 s".
var recoveryMedian = regexp.MustCompile(`(?m)^(cqlseq|voedger)\s+(open|actualize)\s+.*?\s+wall\s+([\d.]+) s`)

func recoveryPlan(config) []row {
	return []row{{
		what:    "recovery on CQL (one node) of 1,000,000 events over 10,000 workspaces: sequencer opening / `cqlseq actualize` (medians of 3)",
		short:   "recovery of 1,000,000 events on one CQL node, sequencer opening / `cqlseq actualize`",
		command: "make bench-recovery",
	}}
}

func recoveryMeasure(ctx context.Context, _ config) ([]measured, error) {
	out, err := command(ctx, "make", "--no-print-directory", "-s", "bench-recovery")
	if err != nil {
		return nil, err
	}
	_, medians, ok := bytes.Cut(out, []byte("medians of"))
	if !ok {
		return nil, errors.New("make bench-recovery printed no medians")
	}
	v := map[string]string{}
	for _, m := range recoveryMedian.FindAllSubmatch(medians, -1) {
		v[string(m[1])+" "+string(m[2])] = string(m[3])
	}
	for _, k := range []string{"cqlseq open", "cqlseq actualize", "voedger open", "voedger actualize"} {
		if v[k] == "" {
			return nil, fmt.Errorf("make bench-recovery: no median for %s", k)
		}
	}
	return []measured{{figure: fmt.Sprintf("%s s / %s s (cqlseq's PLog), %s s / %s s (Voedger's)", v["cqlseq open"], v["cqlseq actualize"], v["voedger open"], v["voedger actualize"])}}, nil
}

// benchJSON is the part of cqlseq bench --json the table shows.
type benchJSON struct {
	Sequencer struct {
		PerSecond float64 `json:"per_second"`
		Latency   struct {
			P99 float64 `json:"p99"`
		} `json:"latency_ms"`
	} `json:"sequencer"`
	Cost *struct {
		CQLStatements   *float64 `json:"cql_statements_per_command"`
		CQLConditional  *float64 `json:"cql_conditional_statements_per_command"`
		ClientCPUMs     *float64 `json:"client_cpu_ms_per_command"`
		NodeCPUMs       *float64 `json:"node_cpu_ms_per_command"`
		CommandsCounted uint64   `json:"commands"`
	} `json:"cost"`
}

// costText is what a command cost in r: the nodes' CPU time, this
// process's, and the CQL statements, as far as r has them.
func (r benchJSON) costText() (string, error) {
	c := r.Cost
	if c == nil || c.ClientCPUMs == nil {
		return "", errors.New("cqlseq bench reported no CPU time per command")
	}
	var parts []string
	if c.NodeCPUMs != nil {
		parts = append(parts, fmt.Sprintf("nodes %.2f core-ms", *c.NodeCPUMs))
	}
	parts = append(parts, fmt.Sprintf("cqlseq %.2f core-ms", *c.ClientCPUMs))
	if c.CQLStatements != nil && c.CQLConditional != nil {
		parts = append(parts, fmt.Sprintf("%.2f CQL statements (%.2f LWT)", *c.CQLStatements, *c.CQLConditional))
	}
	return strings.Join(parts, ", "), nil
}

// benchArgs are cqlseq bench's arguments for a case: store flags, then the
// load every case shares, for d.
func benchArgs(d time.Duration, store ...string) []string {
	args := append([]string{"bench"}, store...)
	return append(args, "--partitions", "4", "--concurrency", "16", "--duration", d.String(), "--no-progress")
}

// timelineArgs records the run's timeline as name.json under dir.
func timelineArgs(dir, name string) []string {
	return []string{"--timeline", filepath.Join(dir, name+".json"), "--timeline-interval", timelineInterval.String()}
}

// runBench runs cqlseq bench with args and --json, and returns its report.
func runBench(ctx context.Context, c config, args []string) (benchJSON, error) {
	dir, err := os.MkdirTemp("", "cqlseq-figures-")
	if err != nil {
		return benchJSON{}, err
	}
	defer os.RemoveAll(dir)
	js := filepath.Join(dir, "bench.json")
	if _, err := command(ctx, c.cqlseq, append(args, "--json", js)...); err != nil {
		return benchJSON{}, err
	}
	b, err := os.ReadFile(js)
	if err != nil {
		return benchJSON{}, err
	}
	var r benchJSON
	if err := json.Unmarshal(b, &r); err != nil {
		return benchJSON{}, fmt.Errorf("%s: %w", js, err)
	}
	return r, nil
}

// drawArgs are cqlseq plot's arguments drawing name.json into name.svg
// under dir, with title and regions (START:END:LABEL).
func drawArgs(dir, name, title string, regions ...string) []string {
	args := []string{"plot", "--timeline", filepath.Join(dir, name+".json"), "--out", filepath.Join(dir, name+".svg"), "--title", title}
	for _, r := range regions {
		args = append(args, "--region", r)
	}
	return args
}

// draw draws a recorded timeline with cqlseq plot and logs the command
// that draws it again.
func draw(ctx context.Context, c config, args []string) error {
	logf("chart: %s", shellLine("cqlseq", args))
	_, err := command(ctx, c.cqlseq, args...)
	return err
}

var bboltStore = []string{"--store", "bbolt", "--mode", "trust0"}

const bboltChart = "bbolt-trust0"

func bboltPlan(c config) []row {
	return []row{{what: "bbolt, trust0, 4 partitions x 16 clients, fsync on", short: "bbolt, trust0, fsync on, 4 x 16 clients", command: shellLine("cqlseq", benchArgs(c.duration, bboltStore...))}}
}

func bboltMeasure(ctx context.Context, c config) ([]measured, error) {
	r, err := runBench(ctx, c, append(benchArgs(c.duration, bboltStore...), timelineArgs(c.figures, bboltChart)...))
	if err != nil {
		return nil, err
	}
	cost, err := r.costText()
	if err != nil {
		return nil, err
	}
	if err := draw(ctx, c, drawArgs(c.figures, bboltChart, "bbolt, trust0, 4 partitions x 16 clients, fsync on")); err != nil {
		return nil, err
	}
	return []measured{{fmt.Sprintf("%s commands/s, p99 %.1f ms", commas(r.Sequencer.PerSecond), r.Sequencer.Latency.P99), cost}}, nil
}

const rf3Replication = `{'class': 'NetworkTopologyStrategy', 'datacenter1': 3}`

// rf3Modes are the modes the cluster case measures, in the table's order.
var rf3Modes = []string{"trust0", "trust2", "fenced"}

// rf3Store are the cluster case's store flags; H and K stand for the
// cluster's hosts and the keyspace.
func rf3Store(hosts, ks, mode string) []string {
	return []string{"--hosts", hosts, "--keyspace", ks, "--mode", mode}
}

// pausedChart is the charted paused-node run (docs/benchmarks.md, The
// current table): the fenced run with a node paused.
const pausedChart = "rf3-fenced-node-paused"

func rf3Chart(mode string) string { return "rf3-" + mode }

func clusterPlan(c config) []row {
	migrate := shellLine("cqlseq", []string{"migrate", "--hosts", "H", "--keyspace", "K", "--replication", rf3Replication}) + "; "
	var rows []row
	for i, mode := range rf3Modes {
		r := row{what: "CQL RF 3 (3 nodes), " + mode + ", 4 partitions x 16 clients", short: "CQL RF 3 (3 nodes), " + mode + ", 4 x 16 clients",
			command: shellLine("cqlseq", benchArgs(c.duration, rf3Store("H", "K", mode)...))}
		if i == 0 {
			r.command = migrate + r.command
		} else {
			r.what += ", a keyspace migrated as above"
		}
		rows = append(rows, r)
	}
	return append(rows, row{
		what: fmt.Sprintf("the same, fenced, node %d SIGSTOPped %v from %v into the run (charted in docs/figures): commands/s before / during / after the pause",
			pausedNode, pauseFor, pauseAfter),
		short:   fmt.Sprintf("the same, fenced, node %d SIGSTOPped %v mid-run, commands/s before / during / after", pausedNode, pauseFor),
		command: shellLine("cqlseq", append(benchArgs(pausedRun, rf3Store("H", "K", "fenced")...), timelineArgs(c.figures, pausedChart)...)),
	})
}

func clusterMeasure(ctx context.Context, c config) (figs []measured, err error) {
	state := filepath.Join(os.TempDir(), fmt.Sprintf("cqlseq-figures-%d.json", os.Getpid()))
	began := time.Now()
	out, err := command(ctx, c.launcher, "up", "-nodes", "3", "-heap", c.heap, "-timeout", "600s", "-state", state)
	defer func() {
		if _, derr := command(context.WithoutCancel(ctx), c.launcher, "down", "-state", state); derr != nil {
			err = errors.Join(err, derr)
		}
	}()
	if err != nil {
		return nil, err
	}
	hosts := strings.TrimSpace(string(out))
	logf("3 nodes up in %.1f s at %s", time.Since(began).Seconds(), hosts)
	cluster, err := cassandra.ReadClusterState(state)
	if err != nil {
		return nil, err
	}
	var pids []string
	for _, n := range cluster.Nodes {
		pids = append(pids, strconv.Itoa(n.PID))
	}
	nodePIDs := []string{"--node-pids", strings.Join(pids, ",")}
	for _, mode := range rf3Modes {
		ks := fmt.Sprintf("figures_%s_%d", mode, os.Getpid())
		if _, err := command(ctx, c.cqlseq, "migrate", "--hosts", hosts, "--keyspace", ks, "--replication", rf3Replication); err != nil {
			return nil, err
		}
		args := append(append(benchArgs(c.duration, rf3Store(hosts, ks, mode)...), timelineArgs(c.figures, rf3Chart(mode))...), nodePIDs...)
		r, err := runBench(ctx, c, args)
		if err != nil {
			return nil, err
		}
		cost, err := r.costText()
		if err != nil {
			return nil, err
		}
		if err := draw(ctx, c, drawArgs(c.figures, rf3Chart(mode), "CQL RF 3 (3 nodes), "+mode+", 4 partitions x 16 clients")); err != nil {
			return nil, err
		}
		figs = append(figs, measured{fmt.Sprintf("%s commands/s, p99 %.0f ms", commas(r.Sequencer.PerSecond), r.Sequencer.Latency.P99), cost})
	}
	paused, err := pausedMeasure(ctx, c, cluster, hosts)
	if err != nil {
		return nil, err
	}
	return append(figs, paused), nil
}

// pausedMeasure runs the fenced bench of pausedRun on a fresh keyspace,
// SIGSTOPs node pausedNode pauseAfter after the bench started for
// pauseFor, draws the chart with the pause shaded, and returns the rates
// before, during and after the pause from the recorded timeline.
func pausedMeasure(ctx context.Context, c config, cluster *cassandra.Cluster, hosts string) (measured, error) {
	ks := fmt.Sprintf("figures_paused_%d", os.Getpid())
	if _, err := command(ctx, c.cqlseq, "migrate", "--hosts", hosts, "--keyspace", ks, "--replication", rf3Replication); err != nil {
		return measured{}, err
	}
	args := append(benchArgs(pausedRun, rf3Store(hosts, ks, "fenced")...), timelineArgs(c.figures, pausedChart)...)
	benchDone := make(chan error, 1)
	go func() {
		_, err := runBench(ctx, c, args)
		benchDone <- err
	}()
	var pause window
	select {
	case err := <-benchDone:
		return measured{}, fmt.Errorf("cqlseq bench ended before the pause: %v", err)
	case <-time.After(pauseAfter):
	}
	pause.began = time.Now()
	logf("SIGSTOP node %d for %v", pausedNode, pauseFor)
	if err := cassandra.PauseNode(cluster, pausedNode); err != nil {
		return measured{}, errors.Join(err, <-benchDone)
	}
	select {
	case <-time.After(pauseFor):
	case <-ctx.Done():
	}
	rerr := cassandra.ResumeNode(cluster, pausedNode)
	pause.ended = time.Now()
	if err := errors.Join(rerr, <-benchDone); err != nil {
		return measured{}, err
	}
	tl, err := timeline.ReadFile(filepath.Join(c.figures, pausedChart+".json"))
	if err != nil {
		return measured{}, err
	}
	from, to := pause.began.Sub(tl.Start), pause.ended.Sub(tl.Start)
	region := fmt.Sprintf("%.1f:%.1f:node %d paused (SIGSTOP)", from.Seconds(), to.Seconds(), pausedNode)
	title := fmt.Sprintf("CQL RF 3 (3 nodes), fenced, 4 x 16: node %d of 3 paused %v", pausedNode, pauseFor)
	if err := draw(ctx, c, drawArgs(c.figures, pausedChart, title, region)); err != nil {
		return measured{}, err
	}
	return measured{figure: pauseRates(tl, from, to)}, nil
}

// window is a span of wall-clock time.
type window struct{ began, ended time.Time }

// pauseRates describes tl's rates before, during and after the pause from
// from to to (since tl's start): commands/s over the intervals that lie
// wholly within each span, and the largest p99 of the intervals during it.
func pauseRates(tl *timeline.Timeline, from, to time.Duration) string {
	var before, during, after struct {
		n uint64
		d time.Duration
	}
	var p99 time.Duration
	for _, iv := range tl.Intervals {
		switch {
		case iv.End() <= from:
			before.n, before.d = before.n+iv.Acked, before.d+iv.Length
		case iv.Start >= from && iv.End() <= to:
			during.n, during.d = during.n+iv.Acked, during.d+iv.Length
			p99 = max(p99, iv.P99)
		case iv.Start >= to:
			after.n, after.d = after.n+iv.Acked, after.d+iv.Length
		}
	}
	rate := func(n uint64, d time.Duration) float64 {
		if d <= 0 {
			return 0
		}
		return float64(n) / d.Seconds()
	}
	b, du, a := rate(before.n, before.d), rate(during.n, during.d), rate(after.n, after.d)
	ratio := "-"
	if b > 0 {
		ratio = fmt.Sprintf("%.2f", du/b)
	}
	return fmt.Sprintf("%s / %s / %s commands/s (during over before %s), p99 up to %.0f ms during", commas(b), commas(du), commas(a), ratio, float64(p99)/1e6)
}

// shellLine is name args as one would type it in a shell.
func shellLine(name string, args []string) string { return shellwords.Line(name, args...) }

// commas formats v rounded, with thousands separators.
func commas(v float64) string {
	s := strconv.FormatInt(int64(v+0.5), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func servicePlan(config) []row {
	return []row{{
		what:    "ID service (`cqlseq serve`, bbolt), vegeta on loopback, HTTP/1.1: galloc, one ID a request, at max rate (x a trivial net/http handler) / 1,000 IDs a request",
		short:   "ID service (`cqlseq serve`, bbolt, HTTP/1.1): galloc, one ID a request (x a trivial handler) / 1,000 IDs a request",
		command: "make bench-service",
	}}
}

// serviceRow matches a row of make bench-service's tables: the target, then
// its columns.
var serviceRow = regexp.MustCompile(`(?m)^\| (galloc POST /v1/sequences/\{name\}/next(?:\?count=\d+)?) +\|(.*)\|$`)

func serviceMeasure(ctx context.Context, _ config) ([]measured, error) {
	out, err := command(ctx, "make", "--no-print-directory", "-s", "bench-service")
	if err != nil {
		return nil, err
	}
	return serviceFigure(out)
}

// serviceFigure reads galloc's max rate, its ratio to the trivial handler
// and its batch IDs/s from make bench-service's tables.
func serviceFigure(out []byte) ([]measured, error) {
	var rate, ratio, batch string
	for _, m := range serviceRow.FindAllSubmatch(out, -1) {
		cols := strings.Split(string(m[2]), "|")
		for i := range cols {
			cols[i] = strings.TrimSpace(cols[i])
		}
		switch {
		case !strings.Contains(string(m[1]), "?count=") && len(cols) == 5 && rate == "":
			rate, ratio = cols[1], cols[3] // workers, req/s, p99, x trivial, target
		case strings.Contains(string(m[1]), "?count=") && len(cols) == 3:
			batch = cols[1] // workers, IDs/s, target
		}
	}
	r, err1 := strconv.ParseFloat(rate, 64)
	b, err2 := strconv.ParseFloat(batch, 64)
	if err := errors.Join(err1, err2); err != nil || ratio == "" {
		return nil, fmt.Errorf("make bench-service: no galloc max rate or batch figure (%q, %q, %q)", rate, ratio, batch)
	}
	return []measured{{figure: fmt.Sprintf("%s req/s (%s x), %.1f M IDs/s (medians of 3)", commas(r), ratio, b/1e6)}}, nil
}
