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
//     port only, so nothing else on loopback is touched); without a
//     working iptables (installed, run as root) the run fails at once,
//     naming it;
//   - owners: in fenced mode, owner A is paused past the request timeout,
//     owner B takes the partitions over, A is resumed; no event of A may be
//     durable, and no command acknowledged by A, at or above B's first
//     offset of a partition (A's and B's events are told apart by their
//     payload sizes). -owners-mode trust2 runs both owners without fencing:
//     the check must then fail;
//   - skew: successive owners of one keyspace (bench processes one after
//     another, each SIGKILLed) whose store clocks (bench --clock-offset)
//     disagree by up to 30 s either way, and one whose clock steps back
//     mid-run, in every -skew-modes mode over 4,000 workspaces; a later
//     owner runs until its clock passes the earlier owners' timestamps;
//   - contested: round after round, two fenced benches take the same
//     partitions over at once with a conditional write's attempt so short
//     (-lwt-attempt-timeout) that some outcomes are unknown, and in the
//     full campaign a node SIGSTOPped during the takeovers; no epoch may
//     be taken by both owners of a round;
//   - modechange: one keyspace in trust0, then trust2, then fenced, each
//     run SIGKILLed under load with conditional writes in flight;
//   - late (issue 49): owners one after another on one keyspace in
//     -late-modes (trust2 between the others: every handover changes the
//     mode); at each handover nodes 2 and 3 are SIGSTOPped under the
//     owner's load (node 1 applies what it coordinates and keeps hints),
//     the owner is SIGKILLed, node 1 SIGSTOPped and nodes 2 and 3 resumed,
//     the next owner acknowledges commands, then node 1 is resumed and its
//     hints and read repairs deliver the dead owner's writes late; verify
//     --acks judges every acknowledgement, and the rows the late writes
//     left past gap markers are counted by owner;
//   - tools (issue 36): per -tools-stores store (a CQL keyspace, a bbolt
//     file) and -tools-modes mode, -tools-rounds owners one after another,
//     each killed: every other one SIGKILLs itself at the kill point
//     (bench --kill-before-offset-write: after a flush wrote its numbers,
//     before the next PLog offset; the first owner of the fresh store at
//     its first offset write), the others at a random instant; after each,
//     cqlseq actualize --write must exit 0 (on CQL, migrate again now and
//     then); in fenced mode on CQL every other round runs the tool while
//     the owner is alive, and no ack of that owner may be at or past the
//     next offset the tool reported (it was fenced off). Then a fresh owner
//     must acknowledge and verify --acks judges every acknowledgement; the
//     report's third table gives the kills, tool runs and verdicts;
//   - restore (issue 40): per -tools-stores store and -restore-modes
//     mode, an owner runs; the store is backed up (a bbolt file copied; a
//     keyspace's rows copied with their write timestamps into a new
//     keyspace); a second owner runs; the backup is restored; cqlseq
//     advance runs, SIGKILLed at a random instant, then again to the end;
//     advance against a live owner must refuse; a last owner runs. No
//     offset or number the second owner acknowledged may be acknowledged
//     again (plogcheck.Restored), and verify --acks judges the rest;
//   - service (issue 37): 3 cqlseq serve instances on one keyspace (one
//     ID space: their node leases compete), each loaded by a vegeta
//     attack (-vegeta, v12.13.0; 150 requests/s each, every response
//     saved) on the galloc (sequences of chunk 100), timeshard (layouts
//     63 and 53) and Leaf paths; one instance SIGTERMed (it must exit 0
//     within its --shutdown-timeout, and its restart take the node IDs it
//     released) and restarted, instances SIGKILLed and restarted (2, or 5
//     in the full campaign), and in the full campaign (not -short, with
//     -state and -node-faults > 0) a node SIGKILLed and restarted and one
//     SIGSTOPped for -pause. Then every body is read: no ID twice per
//     galloc sequence and per layout (Leaf's segment IDs are their
//     sequence's, its snowflake IDs the 63-bit layout's), every non-2xx
//     answer or transport error inside the window of a fault that explains
//     it (counted per fault and class), galloc's waste within 2 chunks per
//     instance start. -short runs about 45 s; its own table gives the
//     counts;
//   - gray (not in the default set; -gray runs it alone): the CI check of
//     issue 22: one node SIGSTOPped for 10 s under load; it fails if an
//     acknowledged command is lost or fewer than -gray-min of the rate
//     before is acknowledged during the pause.
//
// skew, contested, modechange, tools and service need no -state (only
// contested's node pause and service's node faults do) and run with
// -node-faults 0; -short is their CI variant (fewer and shorter runs, no
// node fault). skew, contested, modechange and tools each end with verify
// --acks over every acknowledgement of the phase, and the report's second
// table gives their runs, clock skew, unknown outcomes (as the children
// logged them), takeovers contested and epochs taken twice.
//
// node_kill, node_pause and partition run in every -fault-modes mode at
// -fault-partitions x -fault-concurrency and measure the acknowledged
// commands per second (sampling the ack log's line count every 250 ms) in
// the 10 s before each fault, over the whole fault, and from 2 s after it
// began. Their targets (issue 22) are reported in the table; a missed
// target fails the run only with -rate-targets.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cqlseq/cqlseq/plog"
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
	// wholeTimeout bounds the wait for a whole cluster before each phase.
	wholeTimeout time.Duration
	// The skew, contested and modechange phases; short: the CI's
	// variant (fewer and shorter runs, no node pause).
	short          bool
	skewModes      []string
	lwtTimeout     time.Duration
	contestRounds  int
	contestRound   time.Duration
	contestPause   time.Duration
	modeChangeRuns int
	modeChangeRun  time.Duration
	// The late phase: its owners' modes, how long nodes 2 and 3 are
	// stopped under an owner's load, and how long the next owner runs
	// after node 1 is resumed.
	lateModes  []string
	lateHold   time.Duration
	lateExpire time.Duration
	lateSettle time.Duration
	// The tools phase.
	toolsRounds int
	toolsModes  []string
	// restoreModes are the restore phase's modes (its stores are
	// toolsStores).
	restoreModes []string
	toolsStores  []string
	// The service phase's load generator (vegeta).
	vegeta string
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

// Targets of issue 22, as ratios to the rate before the fault.
var (
	degradedTargets = torture.Targets{During: 0.5, Late: 0.8} // node pause, partition
	killTargets     = torture.Targets{During: 0.8, Late: 0.8} // node kill
)

// measure is how rates are taken around a fault: the 10 s before it, and
// from 2 s after it began (issue 22).
var measure = torture.Measure{Lead: 10 * time.Second, Settle: 2 * time.Second}

type tort struct {
	c       config
	rng     *rand.Rand
	cluster *cassandra.Cluster
	opts    cassandra.Options
	rows    []row
	// repairs are the cluster repairs waitWhole made (a node restarted).
	repairs []string
	ksBase  string
	kss     []string // keyspaces created
	failed  bool     // a check failed
	missed  bool     // a rate target was missed
	out     io.Writer
	// records are the phases' records (plots, report), cur the running one's.
	records []*phaseRecord
	cur     *phaseRecord
}

func run(args []string) error {
	fs := flag.NewFlagSet("cqlseq-torture", flag.ContinueOnError)
	var c config
	var lateModes string
	var modes, phases, benchArgs, faultModes, grayModes, skewModes, toolsModes, toolsStores, restoreModes string
	fs.StringVar(&c.cqlseq, "cqlseq", "bin/cqlseq", "the cqlseq binary")
	fs.StringVar(&c.state, "state", "", "cassandra-launcher cluster state file (node faults need it)")
	fs.StringVar(&c.hosts, "hosts", "", "CQL hosts (default: the cluster's)")
	fs.StringVar(&c.dir, "dir", "", "directory for ack logs and child output (default: a temporary one, kept)")
	fs.StringVar(&modes, "modes", "trust0,trust1,trust2,fenced", "modes of the kills phase")
	fs.StringVar(&phases, "phases", defaultPhases, "phases to run, in this order: "+knownPhases)
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
	fs.DurationVar(&c.wholeTimeout, "whole-timeout", 5*time.Minute, "how long a phase waits, before it begins, for every node to be up and answer")
	fs.StringVar(&c.ownersMode, "owners-mode", "fenced", "owners: the mode of both owners (trust2 disables fencing: the check must then fail)")
	fs.BoolVar(&c.cleanup, "cleanup", false, "only remove the iptables rules this campaign adds for the cluster of -state and resume its nodes (SIGCONT), then exit")
	fs.BoolVar(&c.short, "short", false, "the CI variant of skew, contested, modechange and tools: fewer and shorter runs, no node pause (flags given explicitly still win)")
	fs.StringVar(&skewModes, "skew-modes", "trust0,trust2,fenced", "skew: modes (each scenario on its own keyspace per mode); empty skips the phase")
	fs.DurationVar(&c.lwtTimeout, "lwt-attempt-timeout", 0, "contested, modechange: the children's --cql-lwt-attempt-timeout, short enough that some conditional writes' outcomes are unknown (default 2ms at replication factor 1, 20ms at 3)")
	fs.IntVar(&c.contestRounds, "contest-rounds", 8, "contested: rounds of two owners taking the partitions over at once (-short: 5)")
	fs.DurationVar(&c.contestRound, "contest-round", 8*time.Second, "contested: each owner's load after its first ack (-short: 4s)")
	fs.DurationVar(&c.contestPause, "contest-pause", 4*time.Second, "contested (3 nodes, not -short): how long a node stays SIGSTOPped at each round's takeover")
	fs.IntVar(&c.modeChangeRuns, "modechange-runs", 2, "modechange: runs per mode, each SIGKILLed (-short: 1)")
	fs.DurationVar(&c.modeChangeRun, "modechange-run", 8*time.Second, "modechange: each run's load after its first ack (-short: 4s)")
	fs.StringVar(&lateModes, "late-modes", "trust2,trust0,trust2,trust1,trust2,fenced,trust2", "late: the owners' modes, one after another (fewer than 2 skips the phase)")
	fs.DurationVar(&c.lateHold, "late-hold", 5*time.Second, "late: how long nodes 2 and 3 are stopped under an owner's load before it is killed")
	fs.DurationVar(&c.lateExpire, "late-expire", 4*time.Second, "late: how long after the writer's kill node 1 is stopped and nodes 2 and 3 resumed (past write_request_timeout, 2 s, so that they drop what node 1 sent them)")
	fs.DurationVar(&c.lateSettle, "late-settle", 20*time.Second, "late: how long the next owner runs after node 1, holding the late writes, is resumed")
	fs.IntVar(&c.toolsRounds, "tools-rounds", 6, "tools: owners killed per store and mode, each followed by cqlseq actualize --write, before the last owner and verify (-short: 2)")
	fs.StringVar(&toolsModes, "tools-modes", "trust0,trust1,trust2,fenced", "tools: modes (each its own keyspace and bbolt file)")
	fs.StringVar(&toolsStores, "tools-stores", "cql,bbolt", "tools, restore: stores (cql: a keyspace of -hosts; bbolt: a file in -dir)")
	fs.StringVar(&restoreModes, "restore-modes", "trust0,trust2,fenced", "restore: modes (each its own keyspace and bbolt file; -short: trust0,fenced); empty skips the phase")
	fs.StringVar(&c.vegeta, "vegeta", "", "service: the vegeta binary (v12.13.0; make torture installs it in .cache/tools; default: vegeta on PATH)")
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
	c.restoreModes = splitList(restoreModes)
	c.lateModes = splitList(lateModes)
	if c.short {
		shortDefaults(fs, &c)
	}
	c.skewModes = splitList(skewModes)
	c.toolsModes = splitList(toolsModes)
	c.toolsStores = splitList(toolsStores)
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
	if !c.cleanup && slices.Contains(c.phases, servicePhase{}.name()) {
		// The service phase's load generator, before any phase runs.
		if c.vegeta == "" {
			c.vegeta = "vegeta"
		}
		p, err := exec.LookPath(c.vegeta)
		if err != nil {
			return fmt.Errorf("the service phase needs vegeta (github.com/tsenart/vegeta v12.13.0; -vegeta, or -phases without service): %w", err)
		}
		c.vegeta = p
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
	if t.cluster != nil && len(t.cluster.Nodes) >= 3 && c.nodeFaults > 0 && slices.Contains(c.phases, partitionPhase{}.name()) {
		// The partition phase's own check, before the first phase: a
		// machine without iptables fails in seconds, not after the
		// phases before it.
		if err := t.partitionReady(); err != nil {
			return err
		}
	}
	t.ksBase = fmt.Sprintf("torture_%x", t.rng.Uint32())
	t.logf("seed %d, hosts %s, files in %s, keyspaces %s_*, phases %s, bench args %q", c.seed, t.c.hosts, t.c.dir, t.ksBase,
		strings.Join(c.phases, ","), c.benchArgs)
	err := t.runPhases(ctx)
	t.printTable()
	if rerr := t.writeReport(err); rerr != nil {
		t.logf("report: %v", rerr)
	} else {
		t.logf("report: %s", filepath.Join(t.c.dir, reportFile))
	}
	for _, r := range t.repairs {
		fmt.Fprintf(t.out, "cluster repair: %s\n", r)
	}
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

// shortDefaults sets -short's values of the flags not given explicitly.
func shortDefaults(fs *flag.FlagSet, c *config) {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	set := func(name string, apply func()) {
		if !given[name] {
			apply()
		}
	}
	set("contest-rounds", func() { c.contestRounds = 5 })
	set("contest-round", func() { c.contestRound = 4 * time.Second })
	set("modechange-runs", func() { c.modeChangeRuns = 1 })
	set("modechange-run", func() { c.modeChangeRun = 4 * time.Second })
	set("tools-rounds", func() { c.toolsRounds = 2 })
	set("restore-modes", func() { c.restoreModes = []string{"trust0", "fenced"} })
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
	known := strings.Split(knownPhases, ",")
	for _, p := range c.phases {
		if !slices.Contains(known, p) {
			bad("-phases: unknown phase %q (want some of %s)", p, strings.Join(known, ","))
		}
	}
	for _, list := range [][]string{c.modes, c.faultModes, c.gray.modes, {c.ownersMode}, c.skewModes, c.toolsModes, c.restoreModes, c.lateModes} {
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
	if c.lwtTimeout < 0 || c.contestRounds < 0 || c.contestRound <= 0 || c.contestPause <= 0 || c.modeChangeRuns < 0 || c.modeChangeRun <= 0 {
		bad("-lwt-attempt-timeout %v, -contest-rounds %d, -contest-round %v, -contest-pause %v, -modechange-runs %d, -modechange-run %v: want >= 0, >= 0, > 0, > 0, >= 0, > 0",
			c.lwtTimeout, c.contestRounds, c.contestRound, c.contestPause, c.modeChangeRuns, c.modeChangeRun)
	}
	for _, s := range c.toolsStores {
		if !validToolsStore(s) {
			bad("-tools-stores: unknown store %q (want some of %s)", s, strings.Join(toolsStoresKnown, ","))
		}
	}
	if c.lateHold <= 0 || c.lateExpire <= 0 || c.lateSettle <= 0 {
		bad("-late-hold %v, -late-expire %v, -late-settle %v: want > 0", c.lateHold, c.lateExpire, c.lateSettle)
	}
	if c.toolsRounds < 0 {
		bad("-tools-rounds %d: want >= 0", c.toolsRounds)
	}
	if c.wholeTimeout <= 0 {
		bad("-whole-timeout %v: want > 0", c.wholeTimeout)
	}
	if c.warmup < 0 {
		bad("-warmup %v: want >= 0", c.warmup)
	}
	if c.kills < 0 || c.nodeFaults < 0 {
		bad("-kills %d, -node-faults %d: want >= 0", c.kills, c.nodeFaults)
	}
	return errors.Join(errs...)
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
