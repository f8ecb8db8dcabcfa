// Command cqlseq-torture is cqlseq's crash and fault campaign: it drives
// real cqlseq processes (bench with --ack-log) and the nodes of a cluster
// started by cassandra-launcher from outside, and after every phase runs
// cqlseq verify --acks, which must find 0 lost acknowledged events, 0
// duplicate and 0 regressed numbers. It prints one table row per phase (and
// mode) and exits 1 if any check fails.
//
//	cqlseq-torture -cqlseq bin/cqlseq -state .cache/cluster.state.json
//	cqlseq-torture -cqlseq bin/cqlseq -state ... -gray      # the CI gray-failure check
//	cqlseq-torture -state ... -cleanup                      # remove its iptables rules, resume paused nodes
//
// Phases (-phases; node faults need -state; each can also be skipped with
// its count 0):
//
//   - kills: SIGKILL a child bench at a random instant, -kills times in
//     all, rotating through the modes (one keyspace per mode), each
//     restarted on the same keyspace;
//   - node_kill: SIGKILL one node under load and restart it;
//   - node_pause: SIGSTOP one node for -pause, then SIGCONT;
//   - quorum_loss: SIGKILL two of three nodes: no command may be
//     acknowledged without a quorum, and commands carry on once they are
//     back;
//   - partition: cut node 3 from nodes 1 and 2 with iptables (its storage
//     port only, so nothing else on loopback is touched), or SIGSTOP it
//     when iptables does not work;
//   - owners: in fenced mode, owner A is paused past the request timeout,
//     owner B takes the partitions over, A is resumed; no event of A may be
//     durable, and no command acknowledged by A, at or above B's first
//     offset of a partition (A's and B's events are told apart by their
//     payload sizes). -owners-mode trust2 runs both owners without fencing:
//     the check must then fail;
//   - gray (not in the default set; -gray runs it alone): the CI check of
//     issue 22: one node SIGSTOPped for 10 s under load; it fails if an
//     acknowledged command is lost or fewer than -gray-min of the rate
//     before is acknowledged during the pause.
//
// node_kill, node_pause and partition run in every -fault-modes mode at
// -fault-partitions x -fault-concurrency and measure the acknowledged
// commands per second (sampling the ack log's line count every 250 ms) in
// the 10 s before each fault, over the whole fault, and from 2 s after it
// began. Their targets (issue 22) are reported in the table; a missed
// target fails the run only with -rate-targets.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/plog/plogcheck"
	"github.com/cqlseq/cqlseq/storage/cql"
	"github.com/cqlseq/cqlseq/testenv/cassandra"
	"github.com/cqlseq/cqlseq/testenv/torture"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "cqlseq-torture:", err)
		os.Exit(1)
	}
}

type config struct {
	cqlseq      string
	state       string
	hosts       string
	dir         string
	modes       []string
	phases      []string
	kills       int
	nodeFaults  int
	timeout     time.Duration
	seed        uint64
	heap        string
	keep        bool
	benchArgs   []string
	faultModes  []string
	faultLoad   load
	pause       time.Duration
	cut         time.Duration
	warmup      time.Duration
	rateTargets bool
	ownersMode  string
	cleanup     bool
	gray        grayConfig
}

// grayConfig is the gray-failure check's.
type grayConfig struct {
	modes []string
	node  int
	pause time.Duration
	after time.Duration
	min   float64
}

// load is the shape of a child bench's load.
type load struct {
	partitions, concurrency, workspaces int
}

// smallLoad is the load of the kills, quorum-loss and owners phases.
var smallLoad = load{partitions: 2, concurrency: 4, workspaces: 40}

// measure is how rates are taken around a fault: the 10 s before it, and
// from 2 s after it began (issue 22).
var measure = torture.Measure{Lead: 10 * time.Second, Settle: 2 * time.Second}

// Targets of issue 22, as ratios to the rate before the fault.
var (
	degradedTargets = torture.Targets{During: 0.5, Late: 0.8} // node pause, partition
	killTargets     = torture.Targets{During: 0.8, Late: 0.8} // node kill
)

const allPhases = "kills,node_kill,node_pause,quorum_loss,partition,owners"

type tort struct {
	c       config
	rng     *rand.Rand
	cluster *cassandra.Cluster
	opts    cassandra.Options
	rows    []row
	ksBase  string
	kss     []string // keyspaces created
	failed  bool     // a check failed
	missed  bool     // a rate target was missed
	out     io.Writer
}

// row is one phase's line of the report.
type row struct {
	phase      string
	faults     int
	acked      int
	failed     string // busy or failed commands, as the children reported them
	lost       uint64
	dups       uint64
	regs       uint64
	recovery   time.Duration // the slowest recovery: from the fault's end to the next acknowledged command
	note       string
	verifyFail bool
	// Phases that measure rates: one entry per fault, and the targets.
	rates   []faultRates
	targets torture.Targets
}

// faultRates are one fault's measured windows.
type faultRates struct {
	what  string // "node 2", "node 3 cut"
	r     torture.FaultRates
	err   error // the samples did not cover the windows
	met   bool
	fault torture.Fault
}

func run(args []string) error {
	fs := flag.NewFlagSet("cqlseq-torture", flag.ContinueOnError)
	var c config
	var modes, phases, benchArgs, faultModes, grayModes string
	fs.StringVar(&c.cqlseq, "cqlseq", "bin/cqlseq", "the cqlseq binary")
	fs.StringVar(&c.state, "state", "", "cassandra-launcher cluster state file (node faults need it)")
	fs.StringVar(&c.hosts, "hosts", "", "CQL hosts (default: the cluster's)")
	fs.StringVar(&c.dir, "dir", "", "directory for ack logs and child output (default: a temporary one, kept)")
	fs.StringVar(&modes, "modes", "trust0,trust1,trust2,fenced", "modes of the kills phase")
	fs.StringVar(&phases, "phases", allPhases, "phases to run, in this order: "+allPhases+",gray")
	fs.IntVar(&c.kills, "kills", 100, "client SIGKILLs in the kills phase")
	fs.IntVar(&c.nodeFaults, "node-faults", 5, "repetitions of each node fault")
	fs.DurationVar(&c.timeout, "timeout", 5*time.Second, "the children's CQL request timeout (bench --timeout)")
	fs.Uint64Var(&c.seed, "seed", uint64(time.Now().UnixNano()), "seed of the random kill instants and nodes")
	fs.StringVar(&c.heap, "heap", "512m", "heap of a restarted node")
	fs.BoolVar(&c.keep, "keep", false, "keep the keyspaces when every check passed (they are always kept after a failure)")
	fs.StringVar(&benchArgs, "bench-args", "", "extra arguments of every child bench, after the campaign's (so they override), e.g. '--cql-health-policy=false'")
	fs.StringVar(&faultModes, "fault-modes", "fenced,trust2", "modes of the node_kill, node_pause and partition phases (each its own run)")
	fs.IntVar(&c.faultLoad.partitions, "fault-partitions", 4, "partitions of the rate-measuring phases' bench (and gray)")
	fs.IntVar(&c.faultLoad.concurrency, "fault-concurrency", 16, "clients per partition of the rate-measuring phases' bench (and gray)")
	fs.IntVar(&c.faultLoad.workspaces, "fault-workspaces", 5000, "workspaces of the rate-measuring phases' bench (and gray)")
	fs.DurationVar(&c.warmup, "warmup", 5*time.Second, "load after a rate-measuring bench's first ack before its 10 s lead to the first fault begins (partitions still actualizing)")
	fs.DurationVar(&c.pause, "pause", 15*time.Second, "node_pause: how long a node stays SIGSTOPped")
	fs.DurationVar(&c.cut, "cut", 15*time.Second, "partition: how long node 3 stays cut off")
	fs.BoolVar(&c.rateTargets, "rate-targets", false, "exit non-zero when a rate target of node_kill, node_pause or partition is missed (always reported)")
	fs.StringVar(&c.ownersMode, "owners-mode", "fenced", "owners: the mode of both owners (trust2 disables fencing: the check must then fail)")
	fs.BoolVar(&c.cleanup, "cleanup", false, "only remove the iptables rules this campaign adds for the cluster of -state and resume its nodes (SIGCONT), then exit")
	gray := fs.Bool("gray", false, "run only the gray-failure check (-phases gray)")
	fs.StringVar(&grayModes, "gray-modes", "trust2,fenced", "gray: modes checked (each its own keyspace and bench)")
	fs.IntVar(&c.gray.node, "gray-node", 2, "gray: the node paused")
	fs.DurationVar(&c.gray.pause, "gray-pause", 10*time.Second, "gray: how long the node is paused")
	fs.DurationVar(&c.gray.after, "gray-after", 5*time.Second, "gray: load after the node is resumed, before verify")
	fs.Float64Var(&c.gray.min, "gray-min", 0.2, "gray: the least ratio of the rate during the pause to the rate in the 10 s before")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	c.modes = splitList(modes)
	c.phases = splitList(phases)
	if *gray {
		c.phases = []string{"gray"}
	}
	c.benchArgs = strings.Fields(benchArgs)
	c.faultModes = splitList(faultModes)
	c.gray.modes = splitList(grayModes)
	if err := c.validate(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	t := &tort{c: c, rng: rand.New(rand.NewPCG(c.seed, 1)), out: os.Stdout}
	if c.state != "" {
		cl, err := cassandra.ReadClusterState(c.state)
		if err != nil {
			return err
		}
		t.cluster = cl
		t.opts = cassandra.Options{Version: cl.Nodes[0].Version, Heap: c.heap, StartTimeout: 10 * time.Minute,
			Log: func(f string, a ...any) { t.logf("launcher: "+f, a...) }}
		if t.c.hosts == "" {
			t.c.hosts = strings.Join(cl.Hosts(), ",")
		}
	}
	if c.cleanup {
		return t.cleanupCluster()
	}
	if t.c.hosts == "" {
		t.c.hosts = os.Getenv("CQLSEQ_CQL_HOSTS")
	}
	if t.c.hosts == "" {
		return errors.New("no cluster: give -state or -hosts (or CQLSEQ_CQL_HOSTS)")
	}
	if t.c.dir == "" {
		d, err := os.MkdirTemp("", "cqlseq-torture-")
		if err != nil {
			return err
		}
		t.c.dir = d
	} else if err := os.MkdirAll(t.c.dir, 0o755); err != nil {
		return err
	}
	if t.cluster != nil {
		// Rules left by a run that was killed outright (SIGKILL) would cut
		// this run's node 3.
		if n, err := removeTaggedRules(t.ruleTag()); err != nil {
			t.logf("removing rules left by an earlier run: %v", err)
		} else if n > 0 {
			t.logf("removed %d iptables rules an earlier run left (%s)", n, t.ruleTag())
		}
	}
	t.ksBase = fmt.Sprintf("torture_%x", t.rng.Uint32())
	t.logf("seed %d, hosts %s, files in %s, keyspaces %s_*, phases %s, bench args %q", c.seed, t.c.hosts, t.c.dir, t.ksBase,
		strings.Join(c.phases, ","), c.benchArgs)
	err := t.runPhases(ctx)
	t.printTable()
	if err != nil {
		return fmt.Errorf("%w (keyspaces %s_* and %s kept)", err, t.ksBase, t.c.dir)
	}
	switch {
	case t.failed:
		return fmt.Errorf("a check failed (see the table; keyspaces %s_* and %s kept)", t.ksBase, t.c.dir)
	case t.missed && t.c.rateTargets:
		return fmt.Errorf("a rate target was missed (see the table; -rate-targets); files in %s", t.c.dir)
	}
	if !t.c.keep {
		// Every check passed; a keyspace left behind (a cluster still
		// settling its schema after the node faults) is only reported.
		if err := t.dropKeyspaces(ctx); err != nil {
			t.logf("%v (keyspaces %s_* may be left)", err, t.ksBase)
		}
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// validate reports every bad flag at once.
func (c *config) validate() error {
	var errs []error
	bad := func(f string, a ...any) { errs = append(errs, fmt.Errorf(f, a...)) }
	known := strings.Split(allPhases+",gray", ",")
	for _, p := range c.phases {
		if !slices.Contains(known, p) {
			bad("-phases: unknown phase %q (want some of %s)", p, strings.Join(known, ","))
		}
	}
	for _, list := range [][]string{c.modes, c.faultModes, c.gray.modes, {c.ownersMode}} {
		for _, m := range list {
			if _, err := plog.ParseMode(m); err != nil {
				bad("%v", err)
			}
		}
	}
	if len(c.faultModes) == 0 {
		bad("-fault-modes: none given")
	}
	if len(c.gray.modes) == 0 {
		bad("-gray-modes: none given")
	}
	if c.faultLoad.partitions < 1 || c.faultLoad.concurrency < 1 || c.faultLoad.workspaces < c.faultLoad.partitions {
		bad("-fault-partitions %d, -fault-concurrency %d, -fault-workspaces %d: want >= 1, >= 1 and >= the partitions",
			c.faultLoad.partitions, c.faultLoad.concurrency, c.faultLoad.workspaces)
	}
	if c.gray.node < 1 || c.gray.node > 3 {
		bad("-gray-node %d: want 1..3", c.gray.node)
	}
	if c.pause <= 0 || c.cut <= 0 || c.gray.pause <= measure.Settle || c.gray.after < 0 {
		bad("-pause %v, -cut %v, -gray-pause %v, -gray-after %v: want > 0, > 0, > %v, >= 0", c.pause, c.cut, c.gray.pause, c.gray.after, measure.Settle)
	}
	if !(c.gray.min >= 0 && c.gray.min <= 1) {
		bad("-gray-min %v: want 0..1", c.gray.min)
	}
	if c.warmup < 0 {
		bad("-warmup %v: want >= 0", c.warmup)
	}
	if c.kills < 0 || c.nodeFaults < 0 {
		bad("-kills %d, -node-faults %d: want >= 0", c.kills, c.nodeFaults)
	}
	return errors.Join(errs...)
}

// dropKeyspaces drops the keyspaces the run created.
func (t *tort) dropKeyspaces(ctx context.Context) error {
	hosts := strings.Split(t.c.hosts, ",")
	c, err := cql.ClusterConfig(cql.Options{Hosts: hosts, Timeout: time.Minute, DisableInitialHostLookup: len(hosts) == 1})
	if err != nil {
		return fmt.Errorf("dropping the keyspaces: %w", err)
	}
	// Dropping is best effort: after the node faults a node can lag on the
	// schema for minutes, and gocql would wait a minute per DROP.
	c.MaxWaitSchemaAgreement = 10 * time.Second
	s, err := c.CreateSession()
	if err != nil {
		return fmt.Errorf("dropping the keyspaces: %w", err)
	}
	defer s.Close()
	for _, ks := range t.kss {
		// ks is ksBase (hex) + a phase name: a valid identifier.
		if err := s.Query("DROP KEYSPACE IF EXISTS " + ks).WithContext(ctx).Exec(); err != nil {
			return fmt.Errorf("dropping keyspace %s: %w", ks, err)
		}
	}
	return nil
}

func (t *tort) logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "%s torture: "+format+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
}

func (t *tort) rf() int {
	if t.cluster == nil {
		return 1
	}
	return min(3, len(t.cluster.Nodes))
}

func (t *tort) runPhases(ctx context.Context) error {
	for _, p := range t.c.phases {
		if p == "kills" {
			if t.c.kills == 0 {
				continue
			}
			if err := t.kills(ctx); err != nil {
				return err
			}
			continue
		}
		if p != "gray" && t.c.nodeFaults == 0 {
			continue
		}
		if t.cluster == nil {
			t.logf("%s: skipped (node faults need -state)", p)
			continue
		}
		if len(t.cluster.Nodes) < 3 {
			return fmt.Errorf("%s needs 3 nodes, the cluster has %d", p, len(t.cluster.Nodes))
		}
		if p == "gray" {
			if err := t.grayCheck(ctx); err != nil {
				return err
			}
			continue
		}
		var err error
		switch p {
		case "node_kill":
			err = t.forFaultModes(ctx, t.nodeKill)
		case "node_pause":
			err = t.forFaultModes(ctx, t.nodePause)
		case "partition":
			err = t.forFaultModes(ctx, t.partition)
		case "quorum_loss":
			err = t.quorumLoss(ctx)
		case "owners":
			err = t.owners(ctx)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (t *tort) forFaultModes(ctx context.Context, phase func(ctx context.Context, mode string) error) error {
	for _, m := range t.c.faultModes {
		if err := phase(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

// keyspace returns (creating it on first use) the keyspace of name.
func (t *tort) keyspace(ctx context.Context, name string) (string, error) {
	ks := t.ksBase + "_" + name
	repl := fmt.Sprintf("{'class': 'SimpleStrategy', 'replication_factor': %d}", t.rf())
	out, err := t.cqlseqOut(ctx, "migrate", "--hosts", t.c.hosts, "--keyspace", ks, "--replication", repl, "--timeout", "30s")
	if err != nil {
		return "", fmt.Errorf("migrate %s: %w\n%s", ks, err, out)
	}
	t.kss = append(t.kss, ks)
	return ks, nil
}

func (t *tort) cqlseqOut(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, t.c.cqlseq, args...)
	b, err := cmd.CombinedOutput()
	return string(b), err
}

// child is a running cqlseq bench.
type child struct {
	cmd    *exec.Cmd
	done   chan struct{}
	err    error
	ackLog string
	json   string
	out    string
}

// startBench starts cqlseq bench on ks in mode with load ld, appending to
// ackLog, for an hour (it is killed or interrupted long before). extra
// come before -bench-args.
func (t *tort) startBench(ks, mode string, ld load, ackLog, tag string, extra ...string) (*child, error) {
	c := &child{ackLog: ackLog, json: filepath.Join(t.c.dir, tag+".json"), out: filepath.Join(t.c.dir, tag+".out"), done: make(chan struct{})}
	_ = os.Remove(c.json)
	f, err := os.Create(c.out)
	if err != nil {
		return nil, err
	}
	c.cmd = exec.Command(t.c.cqlseq, t.benchArgs(ks, mode, ld, ackLog, c.json, extra)...)
	c.cmd.Stdout, c.cmd.Stderr = f, f
	// A child outlives no campaign: killed if the driver dies.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		_ = f.Close()
		return nil, err
	}
	go func() {
		c.err = c.cmd.Wait()
		_ = f.Close()
		close(c.done)
	}()
	return c, nil
}

// benchArgs are the arguments of a child bench: the campaign's, then
// extra, then -bench-args (a repeated flag's last value wins, so they
// override).
func (t *tort) benchArgs(ks, mode string, ld load, ackLog, jsonFile string, extra []string) []string {
	args := []string{"bench", "--store", "cql", "--hosts", t.c.hosts, "--keyspace", ks, "--mode", mode,
		"--partitions", strconv.Itoa(ld.partitions), "--workspaces", strconv.Itoa(ld.workspaces),
		"--concurrency", strconv.Itoa(ld.concurrency), "--duration", "1h",
		"--timeout", t.c.timeout.String(), "--ack-log", ackLog, "--json", jsonFile, "--ready-timeout", "5m"}
	return append(append(args, extra...), t.c.benchArgs...)
}

func (c *child) kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
}

// stop kills the child unless it has ended.
func (c *child) stop() {
	select {
	case <-c.done:
	default:
		c.kill()
	}
}

// interrupt stops the child as Ctrl-C would (it writes its report) and
// returns its busy and failed counts.
func (c *child) interrupt() string {
	_ = c.cmd.Process.Signal(syscall.SIGCONT)
	_ = c.cmd.Process.Signal(os.Interrupt)
	select {
	case <-c.done:
	case <-time.After(2 * time.Minute):
		c.kill()
		return "? (killed: did not stop)"
	}
	b, err := os.ReadFile(c.json)
	if err != nil {
		return "? (no report)"
	}
	return busyFailed(b)
}

// busyFailed reads "busy/failed" from bench's JSON report.
func busyFailed(b []byte) string {
	num := func(key string) string {
		i := bytes.Index(b, []byte(`"`+key+`": `))
		if i < 0 {
			return "?"
		}
		rest := b[i+len(key)+4:]
		j := bytes.IndexAny(rest, ",\n}")
		if j < 0 {
			return "?"
		}
		return string(rest[:j])
	}
	return num("rejections") + "/" + num("errors")
}

// countAcks counts the complete acknowledgement lines of path (0 if it
// cannot be read).
func countAcks(path string) int {
	n, err := plogcheck.NewAckCounter(path).Count()
	if err != nil {
		return 0
	}
	return n
}

// waitAcks waits until path has more than n acknowledgements and returns
// how long that took, or an error after limit.
func waitAcks(ctx context.Context, path string, n int, limit time.Duration) (time.Duration, error) {
	began := time.Now()
	c := plogcheck.NewAckCounter(path)
	for {
		got, err := c.Count()
		if err != nil {
			return 0, err
		}
		if got > n {
			return time.Since(began), nil
		}
		if time.Since(began) > limit {
			return 0, fmt.Errorf("no acknowledged command within %v (%s has %d)", limit, path, got)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return 0, err
		}
	}
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// verify runs cqlseq verify --acks on ks (partitions 0..parts-1) and fills
// r's counts from its JSON report.
func (t *tort) verify(ctx context.Context, ks, ackLog string, parts int, r *row) error {
	ps := make([]string, parts)
	for i := range ps {
		ps[i] = strconv.Itoa(i)
	}
	jf := filepath.Join(t.c.dir, "verify-"+ks+".json")
	_ = os.Remove(jf)
	out, err := t.cqlseqOut(ctx, "verify", "--store", "cql", "--hosts", t.c.hosts, "--keyspace", ks, "--timeout", "30s",
		"--partition", strings.Join(ps, ","), "--acks", ackLog, "--json", jf)
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return fmt.Errorf("verify %s: %w\n%s", ks, err, out)
	}
	b, jerr := os.ReadFile(jf)
	if jerr != nil {
		return fmt.Errorf("verify %s wrote no report (%v): %v\n%s", ks, err, jerr, out)
	}
	v, perr := torture.ParseVerdict(b)
	if perr != nil {
		return fmt.Errorf("verify %s: %w", ks, perr)
	}
	r.lost += v.Lost
	r.dups += v.Duplicates
	r.regs += v.Regressions
	if err != nil || !v.OK {
		r.verifyFail = true
		t.failed = true
		t.logf("verify %s FAILED:\n%s", ks, out)
	} else {
		t.logf("verify %s: OK (%s)", ks, lastLine(out))
	}
	return nil
}

func lastLine(s string) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	return ls[len(ls)-1]
}

// kills SIGKILLs child benches at random instants, rotating through the
// modes, then verifies each mode's keyspace.
func (t *tort) kills(ctx context.Context) error {
	r := row{phase: "client SIGKILL", failed: "n/a (killed)"}
	kss := map[string]string{}
	for _, m := range t.c.modes {
		ks, err := t.keyspace(ctx, m)
		if err != nil {
			return err
		}
		kss[m] = ks
	}
	for i := range t.c.kills {
		m := t.c.modes[i%len(t.c.modes)]
		ack := filepath.Join(t.c.dir, "acks-"+m+".log")
		c, err := t.startBench(kss[m], m, smallLoad, ack, fmt.Sprintf("kill-%03d-%s", i, m))
		if err != nil {
			return err
		}
		// A random instant: during the connect and actualization, or
		// later under load.
		d := time.Duration(300+t.rng.IntN(4700)) * time.Millisecond
		select {
		case <-time.After(d):
		case <-c.done:
			b, _ := os.ReadFile(c.out)
			return fmt.Errorf("bench %s ended before it was killed: %v\n%s", m, c.err, b)
		case <-ctx.Done():
			c.kill()
			return ctx.Err()
		}
		c.kill()
		r.faults++
		if (i+1)%10 == 0 {
			t.logf("kills: %d of %d", i+1, t.c.kills)
		}
	}
	// Recovery: a fresh child on each keyspace acknowledges again; then
	// every acknowledgement of the phase is verified.
	for _, m := range t.c.modes {
		ack := filepath.Join(t.c.dir, "acks-"+m+".log")
		n := countAcks(ack)
		began := time.Now()
		c, err := t.startBench(kss[m], m, smallLoad, ack, "kill-recovery-"+m)
		if err != nil {
			return err
		}
		_, werr := waitAcks(ctx, ack, n, 3*time.Minute)
		r.recovery = max(r.recovery, time.Since(began))
		c.kill()
		if werr != nil {
			return fmt.Errorf("mode %s after the kills: %w", m, werr)
		}
		r.acked += countAcks(ack)
		if err := t.verify(ctx, kss[m], ack, smallLoad.partitions, &r); err != nil {
			return err
		}
	}
	r.note = fmt.Sprintf("%d modes, kill after 0.3-5 s; recovery = a new process's first ack", len(t.c.modes))
	t.rows = append(t.rows, r)
	return nil
}

// underLoad runs fault n times while a child bench in mode runs on the
// phase's own keyspace, then interrupts the child and verifies.
func (t *tort) underLoad(ctx context.Context, name, mode string, n int, fault func(ctx context.Context, i int, ack string, r *row) error) error {
	ks, err := t.keyspace(ctx, name)
	if err != nil {
		return err
	}
	ack := filepath.Join(t.c.dir, "acks-"+name+".log")
	c, err := t.startBench(ks, mode, smallLoad, ack, name)
	if err != nil {
		return err
	}
	defer c.stop()
	r := row{phase: name}
	if _, err := waitAcks(ctx, ack, 0, 5*time.Minute); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	for i := range n {
		if err := fault(ctx, i, ack, &r); err != nil {
			return fmt.Errorf("%s #%d: %w", name, i+1, err)
		}
		r.faults++
		select {
		case <-c.done:
			b, _ := os.ReadFile(c.out)
			return fmt.Errorf("%s: the bench ended under the fault: %v\n%s", name, c.err, b)
		default:
		}
	}
	r.failed = c.interrupt()
	r.acked = countAcks(ack)
	if err := t.verify(ctx, ks, ack, smallLoad.partitions, &r); err != nil {
		return err
	}
	t.rows = append(t.rows, r)
	return nil
}

// injector injects fault number i and returns when it began and ended and
// what it hit ("node 2"). It undoes the fault before returning, also on
// an error.
type injector func(ctx context.Context, i int) (torture.Fault, string, error)

// rated runs a rate-measuring phase in mode: a bench at -fault-partitions x
// -fault-concurrency on the phase's own keyspace, its ack log sampled
// every 250 ms; n faults, each after at least measure.Lead of load since
// the bench's first ack (plus -warmup) or the previous fault's recovery; then the bench
// is interrupted and its acks verified.
func (t *tort) rated(ctx context.Context, name, mode string, n int, targets torture.Targets, inject injector) (*row, error) {
	tag := name + "_" + mode
	ks, err := t.keyspace(ctx, tag)
	if err != nil {
		return nil, err
	}
	ack := filepath.Join(t.c.dir, "acks-"+tag+".log")
	ld := t.c.faultLoad
	c, err := t.startBench(ks, mode, ld, ack, tag)
	if err != nil {
		return nil, err
	}
	defer c.stop()
	smp, err := torture.StartSampler(ctx, ack, torture.DefaultSampleInterval)
	if err != nil {
		return nil, err
	}
	defer smp.Stop()
	r := &row{phase: fmt.Sprintf("%s (%s, %dx%d)", name, mode, ld.partitions, ld.concurrency), targets: targets}
	steady, err := t.firstAck(ctx, c, smp, 5*time.Minute)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tag, err)
	}
	steady = steady.Add(t.c.warmup)
	for i := range n {
		if err := sleep(ctx, time.Until(steady.Add(measure.Lead))); err != nil {
			return nil, err
		}
		f, what, err := inject(ctx, i)
		if err != nil {
			return nil, fmt.Errorf("%s #%d: %w", tag, i+1, err)
		}
		r.faults++
		// Recovery: the first ack after the fault ended.
		if steady, err = t.ackAfter(ctx, c, smp, f.Ended, 3*time.Minute); err != nil {
			return nil, fmt.Errorf("%s #%d: %w", tag, i+1, err)
		}
		r.recovery = max(r.recovery, steady.Sub(f.Ended))
		fr := t.rates(smp, f, what, targets)
		r.rates = append(r.rates, fr)
		t.logf("%s #%d (%s): %s", tag, i+1, what, fr.describe())
	}
	r.failed = c.interrupt()
	smp.Stop()
	r.acked = countAcks(ack)
	if err := t.verify(ctx, ks, ack, ld.partitions, r); err != nil {
		return nil, err
	}
	t.rows = append(t.rows, *r)
	if !r.targetsMet() {
		t.missed = true
	}
	return &t.rows[len(t.rows)-1], nil
}

// rates measures the windows around f from smp's samples.
func (t *tort) rates(smp *torture.Sampler, f torture.Fault, what string, targets torture.Targets) faultRates {
	samples, serr := smp.Samples()
	fr := faultRates{what: what, fault: f}
	fr.r, fr.err = measure.Rates(samples, f)
	if fr.err == nil && serr != nil {
		fr.err = serr
	}
	fr.met = fr.err == nil && targets.Met(fr.r)
	return fr
}

func (fr faultRates) describe() string {
	if fr.err != nil {
		return "rates not measured: " + fr.err.Error()
	}
	met := "targets met"
	if !fr.met {
		met = "TARGET MISSED"
	}
	return fmt.Sprintf("%.0f acks/s before, %.0f during %.1f s (ratio %.2f), %.0f from +%v (ratio %.2f): %s",
		fr.r.Before.Rate(), fr.r.During.Rate(), fr.r.During.Span.Seconds(), fr.r.RatioDuring(),
		fr.r.Late.Rate(), measure.Settle, fr.r.RatioLate(), met)
}

// firstAck waits for the child's first ack and returns when the sampler saw it.
func (t *tort) firstAck(ctx context.Context, c *child, smp *torture.Sampler, limit time.Duration) (time.Time, error) {
	return t.ackAfter(ctx, c, smp, time.Time{}, limit)
}

// ackAfter waits until a sample taken after `after` counts more acks than
// the last sample at or before it, and returns that sample's time.
func (t *tort) ackAfter(ctx context.Context, c *child, smp *torture.Sampler, after time.Time, limit time.Duration) (time.Time, error) {
	began := time.Now()
	for {
		samples, err := smp.Samples()
		if err != nil {
			return time.Time{}, err
		}
		base := -1
		for _, s := range samples {
			if !s.At.After(after) {
				base = s.Acks
				continue
			}
			if base < 0 {
				base = 0
			}
			if s.Acks > base {
				return s.At, nil
			}
		}
		if time.Since(began) > limit {
			return time.Time{}, fmt.Errorf("no acknowledged command within %v (%s)", limit, c.ackLog)
		}
		select {
		case <-c.done:
			b, _ := os.ReadFile(c.out)
			return time.Time{}, fmt.Errorf("the bench ended: %v\n%s", c.err, b)
		default:
		}
		if err := sleep(ctx, torture.DefaultSampleInterval); err != nil {
			return time.Time{}, err
		}
	}
}

// recovered waits for the next acknowledgement after a fault ended and
// records how long it took.
func recovered(ctx context.Context, ack string, r *row) error {
	d, err := waitAcks(ctx, ack, countAcks(ack), 3*time.Minute)
	if err != nil {
		return err
	}
	r.recovery = max(r.recovery, d)
	return nil
}

func (t *tort) nodeKill(ctx context.Context, mode string) error {
	_, err := t.rated(ctx, "node_kill", mode, t.c.nodeFaults, killTargets, func(ctx context.Context, i int) (torture.Fault, string, error) {
		node := 1 + t.rng.IntN(3)
		t.logf("node_kill %s #%d: SIGKILL node %d, down 5 s, restart", mode, i+1, node)
		f := torture.Fault{Began: time.Now()}
		if err := t.restartNode(ctx, node, 5*time.Second); err != nil {
			return f, "", err
		}
		f.Ended = time.Now()
		return f, fmt.Sprintf("node %d", node), nil
	})
	return err
}

// restartNode SIGKILLs node i and starts it again after down, saving the
// state file at once (so that cluster-down stops the new process even if
// waiting for the ring then fails or is interrupted), then waits until
// every node is up and normal.
func (t *tort) restartNode(ctx context.Context, i int, down time.Duration) error {
	inst, err := t.cluster.Node(i)
	if err != nil {
		return err
	}
	err = cassandra.Restart(ctx, inst, t.opts, down)
	t.saveState()
	if err != nil {
		return err
	}
	return cassandra.WaitRing(ctx, t.cluster, t.opts.StartTimeout)
}

// pauseNode SIGSTOPs node for d (or until ctx is done) and always resumes
// it before returning.
func (t *tort) pauseNode(ctx context.Context, node int, d time.Duration) (torture.Fault, error) {
	f := torture.Fault{Began: time.Now()}
	if err := cassandra.PauseNode(t.cluster, node); err != nil {
		return f, err
	}
	serr := sleep(ctx, d)
	rerr := cassandra.ResumeNode(t.cluster, node)
	f.Ended = time.Now()
	return f, errors.Join(serr, rerr)
}

func (t *tort) nodePause(ctx context.Context, mode string) error {
	_, err := t.rated(ctx, "node_pause", mode, t.c.nodeFaults, degradedTargets, func(ctx context.Context, i int) (torture.Fault, string, error) {
		node := 1 + t.rng.IntN(3)
		t.logf("node_pause %s #%d: SIGSTOP node %d for %v", mode, i+1, node, t.c.pause)
		f, err := t.pauseNode(ctx, node, t.c.pause)
		return f, fmt.Sprintf("node %d", node), err
	})
	return err
}

// quorumLoss kills two of the three nodes: after the commands in flight
// have ended (the request timeout), no command may be acknowledged until
// they are back.
func (t *tort) quorumLoss(ctx context.Context) error {
	err := t.underLoad(ctx, "quorum_loss", "trust2", t.c.nodeFaults, func(ctx context.Context, i int, ack string, r *row) error {
		keep := 1 + t.rng.IntN(3)
		var down []int
		for n := 1; n <= 3; n++ {
			if n != keep {
				down = append(down, n)
			}
		}
		t.logf("quorum_loss #%d: SIGKILL nodes %v", i+1, down)
		for _, n := range down {
			if err := cassandra.KillNode(t.cluster, n); err != nil {
				return err
			}
		}
		if err := sleep(ctx, t.c.timeout+2*time.Second); err != nil { // commands in flight end
			return err
		}
		before := countAcks(ack)
		if err := sleep(ctx, 10*time.Second); err != nil {
			return err
		}
		if got := countAcks(ack) - before; got > 0 {
			t.failed = true
			r.note = fmt.Sprintf("%d commands acknowledged without a quorum", got)
			t.logf("quorum_loss: FAILED: %s", r.note)
		}
		for _, n := range down {
			err := cassandra.Restart(ctx, t.cluster.Nodes[n-1], t.opts, 0)
			t.saveState()
			if err != nil {
				return err
			}
		}
		if err := cassandra.WaitRing(ctx, t.cluster, t.opts.StartTimeout); err != nil {
			return err
		}
		return recovered(ctx, ack, r)
	})
	if err == nil && len(t.rows) > 0 && t.rows[len(t.rows)-1].note == "" {
		t.rows[len(t.rows)-1].note = "0 acks in the 10 s without quorum (after the request timeout)"
	}
	return err
}

// saveState rewrites the launcher's state file after a restart changed a
// node's pid, so that cluster-down stops the new processes.
func (t *tort) saveState() {
	if t.c.state == "" {
		return
	}
	if err := cassandra.WriteClusterState(t.c.state, t.cluster); err != nil {
		t.logf("saving %s: %v", t.c.state, err)
	}
}

// partition cuts node 3 from nodes 1 and 2 on the cluster's storage port
// with iptables, or pauses it when iptables does not work.
func (t *tort) partition(ctx context.Context, mode string) error {
	port := storagePort(t.cluster.Nodes[2].Dir)
	rules := partitionRules(port, t.ruleTag())
	useIPT := port > 0 && iptablesWorks()
	if !useIPT {
		t.logf("partition: iptables does not work here; SIGSTOP of node 3 stands in for the partition")
	}
	r, err := t.rated(ctx, "partition", mode, t.c.nodeFaults, degradedTargets, func(ctx context.Context, i int) (torture.Fault, string, error) {
		if !useIPT {
			f, err := t.pauseNode(ctx, 3, t.c.cut)
			return f, "node 3 paused", err
		}
		t.logf("partition %s #%d: node 3 cut from nodes 1 and 2 (storage port %d) for %v", mode, i+1, port, t.c.cut)
		f := torture.Fault{Began: time.Now()}
		added, err := addRules(rules)
		if err == nil {
			err = sleep(ctx, t.c.cut)
		}
		if derr := deleteRules(added); derr != nil {
			t.logf("partition: REMOVING RULES FAILED: %v", derr)
			err = errors.Join(err, derr)
		}
		f.Ended = time.Now()
		return f, "node 3 cut", err
	})
	if err == nil {
		if useIPT {
			r.note = fmt.Sprintf("iptables DROP between node 3 and nodes 1, 2 (storage port), %v", t.c.cut)
		} else {
			r.note = fmt.Sprintf("iptables unusable: node 3 SIGSTOPped %v instead", t.c.cut)
		}
	}
	return err
}

// ruleTag is the comment of this cluster's iptables rules: the campaign's
// name and node 3's storage port, so that a cleanup removes these rules
// and never another cluster's.
func (t *tort) ruleTag() string {
	return fmt.Sprintf("cqlseq-torture:%d", storagePort(t.cluster.Nodes[2].Dir))
}

func storagePort(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, "cassandra.yaml"))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "storage_port:"); ok {
			p, _ := strconv.Atoi(strings.TrimSpace(v))
			return p
		}
	}
	return 0
}

// partitionRules are the iptables rule specs (after -A/-D INPUT) that cut
// 127.0.0.3 from 127.0.0.1 and 127.0.0.2 on the storage port, both ways,
// each carrying the comment tag (no spaces).
func partitionRules(port int, tag string) [][]string {
	var rs [][]string
	for _, other := range []string{"127.0.0.1", "127.0.0.2"} {
		for _, dir := range [][2]string{{"127.0.0.3", other}, {other, "127.0.0.3"}} {
			rs = append(rs, []string{"-s", dir[0], "-d", dir[1], "-p", "tcp", "--dport", strconv.Itoa(port),
				"-m", "comment", "--comment", tag, "-j", "DROP"})
		}
	}
	return rs
}

func iptablesWorks() bool {
	return exec.Command("iptables", "-w", "-L", "INPUT", "-n").Run() == nil
}

// addRules appends each rule to INPUT and returns those it added.
func addRules(rules [][]string) ([][]string, error) {
	var added [][]string
	for _, r := range rules {
		out, err := exec.Command("iptables", append([]string{"-w", "-A", "INPUT"}, r...)...).CombinedOutput()
		if err != nil {
			return added, fmt.Errorf("iptables -A INPUT %s: %v: %s", strings.Join(r, " "), err, out)
		}
		added = append(added, r)
	}
	return added, nil
}

// deleteRules deletes exactly the given rules (one each), trying all.
func deleteRules(rules [][]string) error {
	var errs []error
	for _, r := range rules {
		out, err := exec.Command("iptables", append([]string{"-w", "-D", "INPUT"}, r...)...).CombinedOutput()
		if err != nil {
			errs = append(errs, fmt.Errorf("iptables -D INPUT %s: %v: %s", strings.Join(r, " "), err, out))
		}
	}
	return errors.Join(errs...)
}

// taggedRules returns the INPUT rules of `iptables -S INPUT` output that
// carry exactly the comment tag, as rule specs for -D.
func taggedRules(listing, tag string) [][]string {
	var rs [][]string
	for _, l := range strings.Split(listing, "\n") {
		f := strings.Fields(l)
		if len(f) < 3 || f[0] != "-A" || f[1] != "INPUT" {
			continue
		}
		for i := 2; i+1 < len(f); i++ {
			if f[i] == "--comment" && strings.Trim(f[i+1], `"`) == tag {
				f[i+1] = tag // -D takes it unquoted
				rs = append(rs, f[2:])
				break
			}
		}
	}
	return rs
}

// removeTaggedRules deletes every INPUT rule carrying tag and returns how
// many it deleted. Without a working iptables there is nothing to remove.
func removeTaggedRules(tag string) (int, error) {
	if !iptablesWorks() {
		return 0, nil
	}
	out, err := exec.Command("iptables", "-w", "-S", "INPUT").CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("iptables -S INPUT: %v: %s", err, out)
	}
	rs := taggedRules(string(out), tag)
	return len(rs), deleteRules(rs)
}

// cleanupCluster undoes what an interrupted or killed campaign may have
// left on the cluster of -state: its iptables rules and paused nodes.
func (t *tort) cleanupCluster() error {
	if t.cluster == nil {
		return errors.New("-cleanup needs -state")
	}
	var errs []error
	if len(t.cluster.Nodes) >= 3 {
		n, err := removeTaggedRules(t.ruleTag())
		if err != nil {
			errs = append(errs, err)
		}
		if n > 0 {
			t.logf("cleanup: removed %d iptables rules (%s)", n, t.ruleTag())
		}
	}
	for i := range t.cluster.Nodes {
		if inst := t.cluster.Nodes[i]; inst.Running() {
			if err := cassandra.ResumeNode(t.cluster, i+1); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// ownerPayload is the payload size of round i's owner A (even) and B
// (odd): the PLog's events tell who wrote them.
func ownerPayload(i int, b bool) int {
	if b {
		return 101 + 2*i
	}
	return 100 + 2*i
}

// ownerOf tells round i's owners' events apart by payload size.
func ownerOf(i, payload int) torture.Owner {
	switch payload {
	case ownerPayload(i, false):
		return torture.OwnerA
	case ownerPayload(i, true):
		return torture.OwnerB
	}
	return torture.OwnerOther
}

// owners: owner A is paused longer than the request timeout; owner B opens
// the same partitions (in fenced mode a new epoch fences A off) and runs;
// A is resumed. Then, per round and partition, no event of A may be
// durable, and no command acknowledged by A, at or above B's first offset
// (torture.CheckTakeover). When A wrote its ack lines does not matter: a
// paused A logs, after SIGCONT, acks of events durable before B began.
func (t *tort) owners(ctx context.Context) error {
	mode := t.c.ownersMode
	ks, err := t.keyspace(ctx, "owners")
	if err != nil {
		return err
	}
	r := row{phase: fmt.Sprintf("two owners (%s)", mode)}
	combined := filepath.Join(t.c.dir, "acks-owners.log")
	type round struct{ ackA, ackB string }
	var rounds []round
	var logs, failed []string
	late := 0
	for i := range t.c.nodeFaults {
		rd := round{filepath.Join(t.c.dir, fmt.Sprintf("acks-owners-%d-a.log", i)), filepath.Join(t.c.dir, fmt.Sprintf("acks-owners-%d-b.log", i))}
		rounds = append(rounds, rd)
		logs = append(logs, rd.ackA, rd.ackB)
		a, err := t.startBench(ks, mode, smallLoad, rd.ackA, fmt.Sprintf("owners-%d-a", i), "--payload", strconv.Itoa(ownerPayload(i, false)))
		if err != nil {
			return err
		}
		defer a.stop()
		if _, err := waitAcks(ctx, rd.ackA, 0, 5*time.Minute); err != nil {
			return fmt.Errorf("owner A: %w", err)
		}
		t.logf("owners #%d: SIGSTOP owner A (pid %d), owner B takes over", i+1, a.cmd.Process.Pid)
		_ = a.cmd.Process.Signal(syscall.SIGSTOP)
		if err := sleep(ctx, t.c.timeout+2*time.Second); err != nil {
			return err
		}
		b, err := t.startBench(ks, mode, smallLoad, rd.ackB, fmt.Sprintf("owners-%d-b", i), "--payload", strconv.Itoa(ownerPayload(i, true)))
		if err != nil {
			return err
		}
		defer b.stop()
		if _, err := waitAcks(ctx, rd.ackB, 0, 5*time.Minute); err != nil {
			return fmt.Errorf("owner B: %w", err)
		}
		nA := countAcks(rd.ackA)
		_ = a.cmd.Process.Signal(syscall.SIGCONT)
		if err := sleep(ctx, 5*time.Second); err != nil {
			return err
		}
		late += countAcks(rd.ackA) - nA
		failed = append(failed, "A "+a.interrupt(), "B "+b.interrupt())
		r.faults++
	}
	if err := concatAcks(combined, logs); err != nil {
		return err
	}
	r.acked = countAcks(combined)
	r.failed = strings.Join(failed[len(failed)-2:], ", ")

	events, err := t.readEvents(ctx, ks, smallLoad.partitions)
	if err != nil {
		return fmt.Errorf("owners: reading the PLog: %w", err)
	}
	var violations []string
	for i, rd := range rounds {
		in := torture.Takeover{}
		a, err := plogcheck.ReadAckLog(rd.ackA)
		if err != nil {
			return err
		}
		b, err := plogcheck.ReadAckLog(rd.ackB)
		if err != nil {
			return err
		}
		in.AAcks, in.BAcks = torture.AckOffsets(a.Acks), torture.AckOffsets(b.Acks)
		for _, e := range events {
			if o := ownerOf(i, e.payload); o != torture.OwnerOther {
				in.Events = append(in.Events, torture.OwnedEvent{Partition: e.part, Offset: e.off, Owner: o})
			}
		}
		rep := torture.CheckTakeover(in)
		t.logf("owners #%d: %s", i+1, rep.Summary())
		if len(rep.Unjudged) > 0 {
			t.logf("owners #%d: B wrote nothing in partitions %v: not judged there", i+1, rep.Unjudged)
		}
		for _, v := range rep.Violations {
			violations = append(violations, fmt.Sprintf("round %d: %s", i+1, v))
		}
	}
	if len(violations) > 0 {
		t.failed = true
		r.note = fmt.Sprintf("FENCING FAILED: %d events or acks of A at or above B's first offset, first: %s", len(violations), violations[0])
		for _, v := range violations[:min(len(violations), 20)] {
			t.logf("owners: FAILED: %s", v)
		}
	} else {
		r.note = fmt.Sprintf("A paused past the request timeout, B took over: no event or ack of A at or above B's first offset (%d A acks logged after SIGCONT, all below)", late)
	}
	if err := t.verify(ctx, ks, combined, smallLoad.partitions, &r); err != nil {
		return err
	}
	t.rows = append(t.rows, r)
	return nil
}

// ownedEvent is what the owners check keeps of a PLog event.
type ownedEvent struct {
	part    uint16
	off     uint64
	payload int
}

// readEvents reads partitions 0..parts-1 of ks's PLog (from offset 1 to
// the first missing offset).
func (t *tort) readEvents(ctx context.Context, ks string, parts int) ([]ownedEvent, error) {
	st, err := cql.Open(ctx, cql.Options{Hosts: strings.Split(t.c.hosts, ","), Keyspace: ks, Timeout: 30 * time.Second, ConnectTimeout: 30 * time.Second})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	rd, err := plog.NewReader(st, plog.ReaderOptions{PageTimeout: time.Minute})
	if err != nil {
		return nil, err
	}
	var out []ownedEvent
	for p := range parts {
		err := rd.ReadEvents(ctx, isequencer.PartitionID(p), 1, func(e *plog.Event) error {
			out = append(out, ownedEvent{part: uint16(p), off: uint64(e.Offset), payload: len(e.Payload)})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// concatAcks writes the complete lines of each log to path.
func concatAcks(path string, logs []string) error {
	var buf bytes.Buffer
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			return err
		}
		complete, _ := plogcheck.CompleteLines(b)
		buf.Write(complete)
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// grayCheck is the CI gray-failure check (issue 22): per -gray-modes mode,
// a bench at -fault-partitions x -fault-concurrency on a keyspace of
// replication factor 3, -warmup and measure.Lead of load, node -gray-node SIGSTOPped
// for -gray-pause, -gray-after more load, then verify --acks. It fails if
// an acknowledged command is lost (or any verify finding), or if the rate
// during the pause is below -gray-min of the rate before.
func (t *tort) grayCheck(ctx context.Context) error {
	targets := torture.Targets{During: t.c.gray.min}
	for _, mode := range t.c.gray.modes {
		tag := "gray_" + mode
		ks, err := t.keyspace(ctx, tag)
		if err != nil {
			return err
		}
		ack := filepath.Join(t.c.dir, "acks-"+tag+".log")
		ld := t.c.faultLoad
		c, err := t.startBench(ks, mode, ld, ack, tag)
		if err != nil {
			return err
		}
		r, err := t.grayRun(ctx, c, mode, ld, targets)
		c.stop()
		if err != nil {
			return fmt.Errorf("gray %s: %w", mode, err)
		}
		if err := t.verify(ctx, ks, ack, ld.partitions, r); err != nil {
			return err
		}
		fr := r.rates[0]
		verdict := "ok"
		if !fr.met {
			verdict = "FAILED"
			t.failed = true
		}
		if r.verifyFail {
			verdict += ", VERIFY FAILED"
		}
		r.note = fmt.Sprintf("node %d SIGSTOPped %v: ratio %.2f %s", t.c.gray.node, t.c.gray.pause, fr.r.RatioDuring(), verdict)
		fmt.Fprintf(t.out, "gray-check %s: %.1f acks/s in the %v before, %.1f acks/s during the %.1f s pause of node %d: ratio %.2f (need >= %.2g): %s; verify: %d lost, %d duplicates, %d regressions\n",
			mode, fr.r.Before.Rate(), measure.Lead, fr.r.During.Rate(), fr.r.During.Span.Seconds(), t.c.gray.node, fr.r.RatioDuring(), t.c.gray.min, verdict, r.lost, r.dups, r.regs)
		t.rows = append(t.rows, *r)
	}
	return nil
}

// grayRun runs the load and the pause of one gray check and interrupts the
// bench; the caller verifies.
func (t *tort) grayRun(ctx context.Context, c *child, mode string, ld load, targets torture.Targets) (*row, error) {
	smp, err := torture.StartSampler(ctx, c.ackLog, torture.DefaultSampleInterval)
	if err != nil {
		return nil, err
	}
	defer smp.Stop()
	r := &row{phase: fmt.Sprintf("gray check (%s, %dx%d)", mode, ld.partitions, ld.concurrency), targets: targets}
	first, err := t.firstAck(ctx, c, smp, 5*time.Minute)
	if err != nil {
		return nil, err
	}
	if err := sleep(ctx, time.Until(first.Add(t.c.warmup+measure.Lead))); err != nil {
		return nil, err
	}
	t.logf("gray %s: SIGSTOP node %d for %v", mode, t.c.gray.node, t.c.gray.pause)
	f, err := t.pauseNode(ctx, t.c.gray.node, t.c.gray.pause)
	if err != nil {
		return nil, err
	}
	r.faults++
	if err := sleep(ctx, t.c.gray.after); err != nil {
		return nil, err
	}
	if after, err := t.ackAfter(ctx, c, smp, f.Ended, time.Millisecond); err == nil {
		r.recovery = after.Sub(f.Ended)
	}
	fr := t.rates(smp, f, fmt.Sprintf("node %d", t.c.gray.node), targets)
	r.rates = append(r.rates, fr)
	t.logf("gray %s: %s", mode, fr.describe())
	r.failed = c.interrupt()
	smp.Stop()
	r.acked = countAcks(c.ackLog)
	if fr.err != nil {
		return nil, fr.err
	}
	return r, nil
}

// targetsMet reports whether every fault of a rate-measuring row met its
// targets (true for rows that measure none).
func (r *row) targetsMet() bool {
	for _, fr := range r.rates {
		if !fr.met {
			return false
		}
	}
	return true
}

// total sums the row's measured windows (faults whose rates could not be
// measured are left out).
func (r *row) total() (torture.FaultRates, int) {
	var s torture.FaultRates
	n := 0
	for _, fr := range r.rates {
		if fr.err == nil {
			s = s.Add(fr.r)
			n++
		}
	}
	return s, n
}

func fmtRate(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf("%.1f", v)
}

func fmtRatio(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", v)
}

func (t *tort) printTable() {
	w := t.out
	fmt.Fprintln(w, "| phase | faults injected | commands acked | busy/failed | lost | duplicates | regressions | recovery (max) | acks/s before | acks/s during | acks/s from +2 s | ratio during | ratio from +2 s | target met | note |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range t.rows {
		verdict := ""
		if r.verifyFail {
			verdict = " **verify FAILED**"
		}
		rates := "- | - | - | - | - | -"
		if len(r.rates) > 0 {
			s, n := r.total()
			met := 0
			for _, fr := range r.rates {
				if fr.met {
					met++
				}
			}
			yes := "yes"
			if met < len(r.rates) {
				yes = "**no**"
			}
			rates = fmt.Sprintf("%s | %s | %s | %s | %s | %s (%d of %d faults; %s)", fmtRate(s.Before.Rate()), fmtRate(s.During.Rate()), fmtRate(s.Late.Rate()),
				fmtRatio(s.RatioDuring()), fmtRatio(s.RatioLate()), yes, met, len(r.rates), r.targets.String(measure.Settle))
			if n < len(r.rates) {
				rates += fmt.Sprintf(", %d not measured", len(r.rates)-n)
			}
		}
		fmt.Fprintf(w, "| %s | %d | %d | %s | %d | %d | %d | %.1f s | %s | %s%s |\n", r.phase, r.faults, r.acked, r.failed,
			r.lost, r.dups, r.regs, r.recovery.Seconds(), rates, r.note, verdict)
	}
	measured := false
	for _, r := range t.rows {
		measured = measured || len(r.rates) > 0
	}
	if !measured {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| phase | # | fault | length | acks/s before (10 s) | acks/s during | acks/s from +2 s | ratio during | ratio from +2 s | target met |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range t.rows {
		for i, fr := range r.rates {
			if fr.err != nil {
				fmt.Fprintf(w, "| %s | %d | %s | %.1f s | not measured: %v | | | | | **no** |\n", r.phase, i+1, fr.what, fr.fault.Ended.Sub(fr.fault.Began).Seconds(), fr.err)
				continue
			}
			yes := "yes"
			if !fr.met {
				yes = "**no**"
			}
			fmt.Fprintf(w, "| %s | %d | %s | %.1f s | %s | %s | %s | %s | %s | %s |\n", r.phase, i+1, fr.what, fr.r.During.Span.Seconds(),
				fmtRate(fr.r.Before.Rate()), fmtRate(fr.r.During.Rate()), fmtRate(fr.r.Late.Rate()), fmtRatio(fr.r.RatioDuring()), fmtRatio(fr.r.RatioLate()), yes)
		}
	}
}
