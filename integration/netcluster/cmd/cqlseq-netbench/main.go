// Command cqlseq-netbench runs cqlseq bench on a 3-node cluster in
// containers (package netcluster) at replication factor 3 under network
// delay profiles, and prints commands/s, p50/p99 and each mode's time per
// command relative to trust2's (make bench-latency).
//
//	cqlseq-netbench [-hosts H1,H2,H3 -label loopback] [-profiles '0;0.5ms;5ms;0,0.5ms,5ms'] [-modes trust0,trust2,fenced]
//	                [-partitions 1,4] [-clients 16] [-duration 20s] [-repeat 3] [-json FILE]
//
// A profile is one one-way delay for every node, or one per node
// (comma-separated). Each run gets a fresh keyspace (cqlseq migrate,
// SimpleStrategy RF 3), runs cqlseq bench --store cql on all three nodes at
// LOCAL_QUORUM / LOCAL_SERIAL and drops the keyspace. Runs of one profile
// are interleaved (repeat r of every case before repeat r+1), and the table
// shows medians. The cluster is removed at the end, also on failure and
// Ctrl-C.
package main

import (
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
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/cqlseq/cqlseq/integration/netcluster"
	"github.com/cqlseq/cqlseq/storage/cql"
)

type config struct {
	profiles   [][]time.Duration
	modes      []string
	partitions []int
	clients    int
	duration   time.Duration
	repeat     int
	cqlseq     string
	jsonOut    string
	heap       string
	crashSafe  bool
	warmup     time.Duration
	workspaces int
	hosts      string // an existing cluster instead of containers
	label      string // -hosts: the table's name for it
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "cqlseq-netbench:", err)
		os.Exit(1)
	}
}

func run() error {
	var c config
	profiles := flag.String("profiles", "0;0.5ms;5ms;0,0.5ms,5ms", "delay profiles, ';'-separated: one delay for all nodes, or one per node (',')")
	modes := flag.String("modes", "trust0,trust2,fenced", "modes")
	parts := flag.String("partitions", "1,4", "partition counts")
	flag.IntVar(&c.clients, "clients", 16, "clients (goroutines) per partition")
	flag.DurationVar(&c.duration, "duration", 20*time.Second, "each bench run's --duration")
	flag.IntVar(&c.repeat, "repeat", 3, "runs per case (the table shows medians)")
	flag.StringVar(&c.cqlseq, "cqlseq", "", "the cqlseq binary (default: built from this checkout)")
	flag.StringVar(&c.jsonOut, "json", "", "write every run's figures as JSON to this file")
	flag.StringVar(&c.heap, "heap", "512m", "JVM heap per node")
	flag.BoolVar(&c.crashSafe, "crash-safe", false, "crash-safe nodes (batch commit log, flushed schema)")
	flag.IntVar(&c.workspaces, "workspaces", 5000, "cqlseq bench --workspaces (a command on a workspace not cached yet first reads its numbers)")
	flag.DurationVar(&c.warmup, "warmup", 90*time.Second, "load before the measured runs, discarded (fresh JVMs run several times slower until their hot code is compiled)")
	flag.StringVar(&c.hosts, "hosts", "", "run on this cluster (host:port,...) instead of containers; -profiles is ignored")
	flag.StringVar(&c.label, "label", "loopback", "-hosts: the name of its row in the table")
	flag.Parse()
	var err error
	if c.profiles, err = parseProfiles(*profiles, 3); err != nil {
		return err
	}
	c.modes = strings.Split(*modes, ",")
	for _, p := range strings.Split(*parts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 1 {
			return fmt.Errorf("-partitions %q: want positive integers", *parts)
		}
		c.partitions = append(c.partitions, n)
	}
	if c.repeat < 1 || c.clients < 1 || c.duration <= 0 {
		return errors.New("-repeat, -clients and -duration must be positive")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if c.cqlseq == "" {
		if c.cqlseq, err = buildCLI(ctx); err != nil {
			return err
		}
	}
	logf := func(f string, a ...any) {
		fmt.Fprintf(os.Stderr, "%s netbench: "+f+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
	}
	began := time.Now()
	var all []result
	var rtts []profileRTT
	if c.hosts != "" {
		hosts := strings.Split(c.hosts, ",")
		if err := warmUp(ctx, c, hosts, logf); err != nil {
			return err
		}
		for r := range c.repeat {
			rs, err := benchCases(ctx, c, hosts, nil, c.label, fmt.Sprintf("lat_h_%d", r), r, logf) // given hosts: no node processes to read
			if err != nil {
				return err
			}
			all = append(all, rs...)
		}
	} else {
		cl, err := netcluster.Start(ctx, netcluster.Options{Nodes: 3, Heap: c.heap, CrashSafe: c.crashSafe, Log: logf})
		if err != nil {
			return err
		}
		defer func() {
			if err := cl.Terminate(); err != nil {
				logf("terminating the cluster: %v", err)
			} else {
				logf("cluster removed")
			}
		}()
		logf("cluster up in %.1f s", time.Since(began).Seconds())
		if err := warmUp(ctx, c, cl.Hosts(), logf); err != nil {
			return err
		}
		for pi, prof := range c.profiles {
			if err := cl.SetDelays(ctx, prof); err != nil {
				return err
			}
			rtt, err := cl.MeasureRTT(ctx)
			if err != nil {
				return err
			}
			name := netcluster.FormatDelays(prof)
			rtts = append(rtts, profileRTT{Delays: name, Method: string(cl.Method()), RTT: rtt})
			logf("profile %s: measured round trips %s", name, rtt)
			for r := range c.repeat {
				rs, err := benchCases(ctx, c, cl.Hosts(), cl.CPU, name, fmt.Sprintf("lat_%d_%d", pi, r), r, logf)
				if err != nil {
					return err
				}
				all = append(all, rs...)
			}
		}
	}
	printTable(os.Stdout, c, all, rtts)
	if c.jsonOut != "" {
		b, _ := json.MarshalIndent(struct {
			Profiles []profileRTT `json:"profiles"`
			Runs     []result     `json:"runs"`
		}{rtts, all}, "", "  ")
		if err := os.WriteFile(c.jsonOut, b, 0o644); err != nil {
			return err
		}
	}
	logf("done in %.1f min", time.Since(began).Minutes())
	return nil
}

// warmUp runs every mode at the largest partition count for a share of
// c.warmup each, and discards the figures.
func warmUp(ctx context.Context, c config, hosts []string, logf func(string, ...any)) error {
	if c.warmup <= 0 {
		return nil
	}
	w := c
	w.duration = c.warmup / time.Duration(len(c.modes))
	p := slices.Max(c.partitions)
	for _, m := range c.modes {
		res, err := benchOnce(ctx, w, hosts, nil, m, p, "lat_warmup_"+m)
		if err != nil {
			return err
		}
		logf("warm-up %s %dx%d: %.0f cmds/s (discarded)", m, p, c.clients, res.PerSecond)
	}
	return nil
}

// benchCases runs every partition count and mode once on hosts.
func benchCases(ctx context.Context, c config, hosts []string, nodeCPU cpuFunc, profile, ksPrefix string, r int, logf func(string, ...any)) ([]result, error) {
	var out []result
	for _, p := range c.partitions {
		for _, m := range c.modes {
			res, err := benchOnce(ctx, c, hosts, nodeCPU, m, p, fmt.Sprintf("%s_%d_%s", ksPrefix, p, m))
			if err != nil {
				return nil, err
			}
			res.Profile = profile
			first := ""
			if res.FirstError != "" {
				first = " (first: " + res.FirstError + ")"
			}
			logf("%s %s %dx%d run %d: %.0f cmds/s, p50 %.1f ms, p99 %.1f ms, %d errors%s; %s",
				res.Profile, m, p, c.clients, r+1, res.PerSecond, res.P50, res.P99, res.Errors, first, res.cost())
			out = append(out, res)
		}
	}
	return out, nil
}

// cost is r's cost per command as the log says it.
func (r result) cost() string {
	s := "nodes' CPU not measured"
	switch {
	case r.NodeCPUMs != nil:
		s = fmt.Sprintf("nodes %.2f core-ms per command", *r.NodeCPUMs)
	case r.CPUError != "":
		s += ": " + r.CPUError
	}
	if r.Statements != nil {
		s += fmt.Sprintf(", %.2f CQL statements per command", *r.Statements)
	}
	return s
}

type profileRTT struct {
	Delays string         `json:"delays"`
	Method string         `json:"method"`
	RTT    netcluster.RTT `json:"rtt_ms"`
}

type result struct {
	Profile    string  `json:"profile"`
	Mode       string  `json:"mode"`
	Partitions int     `json:"partitions"`
	PerSecond  float64 `json:"per_second"`
	P50        float64 `json:"p50_ms"`
	P99        float64 `json:"p99_ms"`
	Errors     uint64  `json:"errors"`
	FirstError string  `json:"first_error,omitempty"`
	Busy       uint64  `json:"busy"`
	// NodeCPUMs is the nodes' CPU time (their containers') during the
	// bench per acknowledged command, in ms; nil when not measured
	// (CPUError says why). Statements is CQL statements per command.
	NodeCPUMs  *float64 `json:"node_cpu_ms_per_command,omitempty"`
	CPUError   string   `json:"node_cpu_error,omitempty"`
	Statements *float64 `json:"cql_statements_per_command,omitempty"`
}

// parseProfiles reads "0;0.5ms;5ms;0,0.5ms,5ms".
func parseProfiles(s string, nodes int) ([][]time.Duration, error) {
	var out [][]time.Duration
	for _, p := range strings.Split(s, ";") {
		var ds []time.Duration
		for _, f := range strings.Split(p, ",") {
			f = strings.TrimSpace(f)
			if f == "0" {
				f = "0s"
			}
			d, err := time.ParseDuration(f)
			if err != nil || d < 0 {
				return nil, fmt.Errorf("-profiles %q: %q is not a delay", s, f)
			}
			ds = append(ds, d)
		}
		switch len(ds) {
		case 1:
			ds = slices.Repeat(ds, nodes)
		case nodes:
		default:
			return nil, fmt.Errorf("-profiles: %q has %d delays: want 1 or %d", p, len(ds), nodes)
		}
		out = append(out, ds)
	}
	return out, nil
}

// cpuFunc returns the CPU time the cluster's nodes have used.
type cpuFunc func(context.Context) (time.Duration, error)

// benchOnce runs cqlseq bench once on a fresh keyspace; with nodeCPU, it
// reads the nodes' CPU time before and after the bench and reports it per
// acknowledged command.
func benchOnce(ctx context.Context, c config, hostList []string, nodeCPU cpuFunc, mode string, partitions int, ks string) (result, error) {
	hosts := strings.Join(hostList, ",")
	if out, err := exec.CommandContext(ctx, c.cqlseq, "migrate", "--hosts", hosts, "--keyspace", ks, "--timeout", "30s",
		"--replication", "{'class': 'SimpleStrategy', 'replication_factor': 3}").CombinedOutput(); err != nil {
		return result{}, fmt.Errorf("migrate %s: %w: %s", ks, err, out)
	}
	defer dropKeyspace(hostList, ks)
	dir, err := os.MkdirTemp("", "cqlseq-netbench-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	jf := filepath.Join(dir, "bench.json")
	cmd := exec.CommandContext(ctx, c.cqlseq, "bench", "--store", "cql", "--hosts", hosts, "--keyspace", ks,
		"--mode", mode, "--partitions", strconv.Itoa(partitions), "--concurrency", strconv.Itoa(c.clients),
		"--workspaces", strconv.Itoa(c.workspaces), "--duration", c.duration.String(), "--json", jf)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // it ends with this process
	var cpuBefore time.Duration
	var cpuErr error
	if nodeCPU != nil {
		cpuBefore, cpuErr = nodeCPU(ctx)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return result{}, fmt.Errorf("bench %s: %w: %s", ks, err, out)
	}
	var cpuUsed time.Duration
	if nodeCPU != nil && cpuErr == nil {
		var after time.Duration
		if after, cpuErr = nodeCPU(ctx); cpuErr == nil {
			cpuUsed = after - cpuBefore
		}
	}
	b, err := os.ReadFile(jf)
	if err != nil {
		return result{}, err
	}
	var rep struct {
		Sequencer struct {
			PerSecond  float64 `json:"per_second"`
			Errors     uint64  `json:"errors"`
			FirstError string  `json:"first_error"`
			Latency    struct {
				P50 float64 `json:"p50"`
				P99 float64 `json:"p99"`
			} `json:"latency_ms"`
		} `json:"sequencer"`
		Busy struct {
			Rejections uint64 `json:"rejections"`
		} `json:"busy"`
		Cost *struct {
			Commands   uint64   `json:"commands"`
			Statements *float64 `json:"cql_statements_per_command"`
		} `json:"cost"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		return result{}, fmt.Errorf("bench %s report: %w", ks, err)
	}
	res := result{Mode: mode, Partitions: partitions, PerSecond: rep.Sequencer.PerSecond, P50: rep.Sequencer.Latency.P50,
		P99: rep.Sequencer.Latency.P99, Errors: rep.Sequencer.Errors, FirstError: rep.Sequencer.FirstError, Busy: rep.Busy.Rejections}
	if rep.Cost != nil && rep.Cost.Commands > 0 {
		res.Statements = rep.Cost.Statements
		if nodeCPU != nil && cpuErr == nil {
			ms := float64(cpuUsed) / 1e6 / float64(rep.Cost.Commands)
			res.NodeCPUMs = &ms
		}
	}
	if cpuErr != nil {
		res.CPUError = cpuErr.Error()
	}
	return res, nil
}

func dropKeyspace(hosts []string, ks string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := cql.Connect(ctx, cql.Options{Hosts: hosts, Timeout: 30 * time.Second})
	if err != nil {
		return
	}
	defer s.Close()
	if cql.ValidName(ks) {
		_ = s.Query("DROP KEYSPACE IF EXISTS " + ks).WithContext(ctx).Exec()
	}
}

// printTable prints, per profile and partition count, each mode's median
// commands/s, p50 and p99, and its time per command relative to trust2's
// (trust2's commands/s over the mode's: at the same number of clients the
// time per command is clients / throughput).
func printTable(w io.Writer, c config, all []result, rtts []profileRTT) {
	fmt.Fprintf(w, "\nRF 3, LOCAL_QUORUM / LOCAL_SERIAL, %d clients per partition, %d workspaces, %v per run after a %v warm-up, medians of %d runs\n", c.clients, c.workspaces, c.duration, c.warmup, c.repeat)
	for _, r := range rtts {
		fmt.Fprintf(w, "delays %s (%s): round trips %s\n", r.Delays, r.Method, r.RTT)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "| delays (one-way, n1 / n2 / n3) | partitions | mode | cmds/s | p50 ms | p99 ms | time per command vs trust2 | nodes' core-ms per command |")
	fmt.Fprintln(tw, "|---|---|---|---|---|---|---|---|")
	type key struct {
		prof string
		p    int
		mode string
	}
	med := map[key]result{}
	var order []key
	for _, r := range all {
		k := key{r.Profile, r.Partitions, r.Mode}
		if _, ok := med[k]; ok {
			continue
		}
		var ps, p50, p99, cpu []float64
		var errs uint64
		for _, x := range all {
			if x.Profile == r.Profile && x.Partitions == r.Partitions && x.Mode == r.Mode {
				ps, p50, p99 = append(ps, x.PerSecond), append(p50, x.P50), append(p99, x.P99)
				errs += x.Errors
				if x.NodeCPUMs != nil {
					cpu = append(cpu, *x.NodeCPUMs)
				}
			}
		}
		m := result{Profile: r.Profile, Mode: r.Mode, Partitions: r.Partitions, PerSecond: stats.Median(ps), P50: stats.Median(p50), P99: stats.Median(p99), Errors: errs}
		if len(cpu) > 0 {
			v := stats.Median(cpu)
			m.NodeCPUMs = &v
		}
		med[k] = m
		order = append(order, k)
	}
	for _, k := range order {
		m := med[k]
		ratio := "n/a"
		if t2, ok := med[key{k.prof, k.p, "trust2"}]; ok && m.PerSecond > 0 {
			ratio = fmt.Sprintf("%.2fx", t2.PerSecond/m.PerSecond)
		}
		errs := ""
		if m.Errors > 0 {
			errs = fmt.Sprintf(" (%d errors)", m.Errors)
		}
		cpu := "n/a"
		if m.NodeCPUMs != nil {
			cpu = fmt.Sprintf("%.2f", *m.NodeCPUMs)
		}
		fmt.Fprintf(tw, "| %s | %d | %s | %.0f%s | %.1f | %.1f | %s | %s |\n", k.prof, k.p, k.mode, m.PerSecond, errs, m.P50, m.P99, ratio, cpu)
	}
	_ = tw.Flush()
}

// buildCLI builds cmd/cqlseq of this checkout into a temporary directory.
func buildCLI(ctx context.Context) (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("no source path to build cqlseq from")
	}
	root := filepath.Join(filepath.Dir(file), "..", "..", "..", "..")
	dir, err := os.MkdirTemp("", "cqlseq-netbench-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "cqlseq")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/cqlseq")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/cqlseq: %w: %s", err, out)
	}
	return bin, nil
}
