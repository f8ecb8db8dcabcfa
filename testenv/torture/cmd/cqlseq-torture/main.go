// Command cqlseq-torture is cqlseq's crash and fault campaign: it drives
// real cqlseq processes (bench with --ack-log) and the nodes of a cluster
// started by cassandra-launcher from outside, and after every phase runs
// cqlseq verify --acks, which must find 0 lost acknowledged events, 0
// duplicate and 0 regressed numbers. It prints one table row per phase and
// exits 1 if any check fails.
//
//	cqlseq-torture -cqlseq bin/cqlseq -state .cache/cluster.state.json
//
// Phases (node faults need -state; each can be skipped with its count 0):
//
//   - kills: SIGKILL a child bench at a random instant, -kills times in
//     all, rotating through the modes (one keyspace per mode), each
//     restarted on the same keyspace;
//   - node-kill: SIGKILL one node under load and restart it;
//   - node-pause: SIGSTOP one node longer than the request timeout, then
//     SIGCONT;
//   - quorum-loss: SIGKILL two of three nodes: no command may be
//     acknowledged without a quorum, and commands carry on once they are
//     back;
//   - partition: cut node 3 from nodes 1 and 2 with iptables (its storage
//     port only, so nothing else on loopback is touched), or SIGSTOP it
//     when iptables does not work;
//   - owners: in fenced mode, the owner is paused past the request timeout,
//     a second owner takes the partitions over, the first is resumed and
//     must be refused.
package main

import (
	"bufio"
	"bytes"
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
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gocql/gocql"

	"github.com/cqlseq/cqlseq/testenv/cassandra"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "cqlseq-torture:", err)
		os.Exit(1)
	}
}

type config struct {
	cqlseq     string
	state      string
	hosts      string
	dir        string
	modes      []string
	kills      int
	nodeFaults int
	timeout    time.Duration
	seed       uint64
	heap       string
	keep       bool
}

type torture struct {
	c       config
	rng     *rand.Rand
	cluster *cassandra.Cluster
	opts    cassandra.Options
	rows    []row
	ksBase  string
	kss     []string // keyspaces created
	failed  bool
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
}

func run(args []string) error {
	fs := flag.NewFlagSet("cqlseq-torture", flag.ContinueOnError)
	var c config
	var modes string
	fs.StringVar(&c.cqlseq, "cqlseq", "bin/cqlseq", "the cqlseq binary")
	fs.StringVar(&c.state, "state", "", "cassandra-launcher cluster state file (node faults need it)")
	fs.StringVar(&c.hosts, "hosts", "", "CQL hosts (default: the cluster's)")
	fs.StringVar(&c.dir, "dir", "", "directory for ack logs and child output (default: a temporary one, kept)")
	fs.StringVar(&modes, "modes", "trust0,trust1,trust2,fenced", "modes of the kills phase")
	fs.IntVar(&c.kills, "kills", 100, "client SIGKILLs in the kills phase")
	fs.IntVar(&c.nodeFaults, "node-faults", 5, "repetitions of each node fault")
	fs.DurationVar(&c.timeout, "timeout", 5*time.Second, "the children's CQL request timeout")
	fs.Uint64Var(&c.seed, "seed", uint64(time.Now().UnixNano()), "seed of the random kill instants and nodes")
	fs.StringVar(&c.heap, "heap", "512m", "heap of a restarted node")
	fs.BoolVar(&c.keep, "keep", false, "keep the keyspaces when every check passed (they are always kept after a failure)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c.modes = strings.Split(modes, ",")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	t := &torture{c: c, rng: rand.New(rand.NewPCG(c.seed, 1)), out: os.Stdout}
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
	t.ksBase = fmt.Sprintf("torture_%x", t.rng.Uint32())
	t.logf("seed %d, hosts %s, files in %s, keyspaces %s_*", c.seed, t.c.hosts, t.c.dir, t.ksBase)
	err := t.phases(ctx)
	t.printTable()
	if err != nil {
		return err
	}
	if t.failed {
		return fmt.Errorf("a check failed (see the table; keyspaces %s_* and %s kept)", t.ksBase, t.c.dir)
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

// dropKeyspaces drops the keyspaces the run created.
func (t *torture) dropKeyspaces(ctx context.Context) error {
	c := gocql.NewCluster(strings.Split(t.c.hosts, ",")...)
	c.Timeout = time.Minute
	c.DisableInitialHostLookup = len(strings.Split(t.c.hosts, ",")) == 1
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

func (t *torture) logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "%s torture: "+format+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
}

func (t *torture) rf() int {
	if t.cluster == nil {
		return 1
	}
	return min(3, len(t.cluster.Nodes))
}

func (t *torture) phases(ctx context.Context) error {
	if t.c.kills > 0 {
		if err := t.kills(ctx); err != nil {
			return err
		}
	}
	if t.cluster == nil || t.c.nodeFaults == 0 {
		return nil
	}
	if len(t.cluster.Nodes) < 3 {
		return fmt.Errorf("node faults need 3 nodes, the cluster has %d", len(t.cluster.Nodes))
	}
	for _, p := range []func(context.Context) error{t.nodeKill, t.nodePause, t.quorumLoss, t.partition, t.owners} {
		if err := p(ctx); err != nil {
			return err
		}
	}
	return nil
}

// keyspace returns (creating it on first use) the keyspace of name.
func (t *torture) keyspace(ctx context.Context, name string) (string, error) {
	ks := t.ksBase + "_" + name
	repl := fmt.Sprintf("{'class': 'SimpleStrategy', 'replication_factor': %d}", t.rf())
	out, err := t.cqlseqOut(ctx, "migrate", "--hosts", t.c.hosts, "--keyspace", ks, "--replication", repl, "--timeout", "30s")
	if err != nil {
		return "", fmt.Errorf("migrate %s: %w\n%s", ks, err, out)
	}
	t.kss = append(t.kss, ks)
	return ks, nil
}

func (t *torture) cqlseqOut(ctx context.Context, args ...string) (string, error) {
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

const partitions = 2

// startBench starts cqlseq bench on ks in mode, appending to ackLog, for an
// hour (it is killed or interrupted long before).
func (t *torture) startBench(ks, mode, ackLog, tag string) (*child, error) {
	c := &child{ackLog: ackLog, json: filepath.Join(t.c.dir, tag+".json"), out: filepath.Join(t.c.dir, tag+".out"), done: make(chan struct{})}
	_ = os.Remove(c.json)
	f, err := os.Create(c.out)
	if err != nil {
		return nil, err
	}
	c.cmd = exec.Command(t.c.cqlseq, "bench", "--store", "cql", "--hosts", t.c.hosts, "--keyspace", ks, "--mode", mode,
		"--partitions", strconv.Itoa(partitions), "--workspaces", "40", "--concurrency", "4", "--duration", "1h",
		"--timeout", t.c.timeout.String(), "--ack-log", ackLog, "--json", c.json, "--ready-timeout", "5m")
	c.cmd.Stdout, c.cmd.Stderr = f, f
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

func (c *child) kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
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

// countAcks counts the complete acknowledgement lines of path.
func countAcks(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := sc.Text(); l != "" && l[0] != '#' {
			n++
		}
	}
	return n
}

// waitAcks waits until path has more than n acknowledgements and returns
// how long that took, or an error after limit.
func waitAcks(ctx context.Context, path string, n int, limit time.Duration) (time.Duration, error) {
	began := time.Now()
	for countAcks(path) <= n {
		if time.Since(began) > limit {
			return 0, fmt.Errorf("no acknowledged command within %v (%s has %d)", limit, path, countAcks(path))
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return time.Since(began), nil
}

// verify runs cqlseq verify --acks on ks and fills r's counts.
func (t *torture) verify(ctx context.Context, ks, ackLog string, r *row) error {
	parts := make([]string, partitions)
	for i := range parts {
		parts[i] = strconv.Itoa(i)
	}
	jf := filepath.Join(t.c.dir, "verify-"+ks+".json")
	out, err := t.cqlseqOut(ctx, "verify", "--store", "cql", "--hosts", t.c.hosts, "--keyspace", ks, "--timeout", "30s",
		"--partition", strings.Join(parts, ","), "--acks", ackLog, "--json", jf)
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return fmt.Errorf("verify %s: %w\n%s", ks, err, out)
	}
	lost, dups, regs, ok := verdict(out)
	r.lost += lost
	r.dups += dups
	r.regs += regs
	if err != nil || !ok {
		r.verifyFail = true
		t.failed = true
		t.logf("verify %s FAILED:\n%s", ks, out)
	} else {
		t.logf("verify %s: OK (%s)", ks, lastLine(out))
	}
	return nil
}

// verdict reads verify's ack line: "..., N lost, N duplicates, N
// regressions" and the scan's duplicate/backwards/regression findings.
func verdict(out string) (lost, dups, regs uint64, ok bool) {
	ok = strings.Contains(out, "OK, 0 lost, 0 duplicates, 0 regressions") && !strings.Contains(out, "FAILED")
	for _, l := range strings.Split(out, "\n") {
		if i := strings.Index(l, ": FAILED, "); i >= 0 && strings.Contains(l, " lost, ") {
			var a, b, c uint64
			if _, err := fmt.Sscanf(l[i+len(": FAILED, "):], "%d lost, %d duplicates, %d regressions", &a, &b, &c); err == nil {
				lost, dups, regs = lost+a, dups+b, regs+c
			}
		}
		// The scan's findings (numbers in the PLog itself).
		if strings.HasPrefix(strings.TrimSpace(l), "duplicate:") || strings.HasPrefix(strings.TrimSpace(l), "backwards:") {
			dups++
		}
		if strings.HasPrefix(strings.TrimSpace(l), "regression:") {
			regs++
		}
	}
	return lost, dups, regs, ok
}

func lastLine(s string) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	return ls[len(ls)-1]
}

// kills SIGKILLs child benches at random instants, rotating through the
// modes, then verifies each mode's keyspace.
func (t *torture) kills(ctx context.Context) error {
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
		c, err := t.startBench(kss[m], m, ack, fmt.Sprintf("kill-%03d-%s", i, m))
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
		c, err := t.startBench(kss[m], m, ack, "kill-recovery-"+m)
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
		if err := t.verify(ctx, kss[m], ack, &r); err != nil {
			return err
		}
	}
	r.note = fmt.Sprintf("%d modes, kill after 0.3-5 s; recovery = a new process's first ack", len(t.c.modes))
	t.rows = append(t.rows, r)
	return nil
}

// underLoad runs fault n times while a child bench in mode runs on the
// phase's own keyspace, then interrupts the child and verifies.
func (t *torture) underLoad(ctx context.Context, name, mode string, n int, fault func(ctx context.Context, i int, ack string, r *row) error) error {
	ks, err := t.keyspace(ctx, name)
	if err != nil {
		return err
	}
	ack := filepath.Join(t.c.dir, "acks-"+name+".log")
	c, err := t.startBench(ks, mode, ack, name)
	if err != nil {
		return err
	}
	defer func() {
		select {
		case <-c.done:
		default:
			c.kill()
		}
	}()
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
	if err := t.verify(ctx, ks, ack, &r); err != nil {
		return err
	}
	t.rows = append(t.rows, r)
	return nil
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

func (t *torture) nodeKill(ctx context.Context) error {
	return t.underLoad(ctx, "node_kill", "trust2", t.c.nodeFaults, func(ctx context.Context, i int, ack string, r *row) error {
		node := 1 + t.rng.IntN(3)
		t.logf("node_kill #%d: SIGKILL node %d, down 5 s, restart", i+1, node)
		if err := cassandra.RestartNode(ctx, t.cluster, node, t.opts, 5*time.Second); err != nil {
			return err
		}
		t.saveState()
		return recovered(ctx, ack, r)
	})
}

func (t *torture) nodePause(ctx context.Context) error {
	pause := t.c.timeout + 3*time.Second
	return t.underLoad(ctx, "node_pause", "trust2", t.c.nodeFaults, func(ctx context.Context, i int, ack string, r *row) error {
		node := 1 + t.rng.IntN(3)
		t.logf("node_pause #%d: SIGSTOP node %d for %v", i+1, node, pause)
		if err := cassandra.PauseNode(t.cluster, node); err != nil {
			return err
		}
		time.Sleep(pause)
		if err := cassandra.ResumeNode(t.cluster, node); err != nil {
			return err
		}
		return recovered(ctx, ack, r)
	})
}

// quorumLoss kills two of the three nodes: after the commands in flight
// have ended (the request timeout), no command may be acknowledged until
// they are back.
func (t *torture) quorumLoss(ctx context.Context) error {
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
		time.Sleep(t.c.timeout + 2*time.Second) // commands in flight end
		before := countAcks(ack)
		time.Sleep(10 * time.Second)
		if got := countAcks(ack) - before; got > 0 {
			t.failed = true
			r.note = fmt.Sprintf("%d commands acknowledged without a quorum", got)
			t.logf("quorum_loss: FAILED: %s", r.note)
		}
		for _, n := range down {
			if err := cassandra.Restart(ctx, t.cluster.Nodes[n-1], t.opts, 0); err != nil {
				return err
			}
			t.saveState()
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
func (t *torture) saveState() {
	if err := cassandra.WriteClusterState(t.c.state, t.cluster); err != nil {
		t.logf("saving %s: %v", t.c.state, err)
	}
}

// partition cuts node 3 from nodes 1 and 2 on the cluster's storage port
// with iptables, or pauses it when iptables does not work.
func (t *torture) partition(ctx context.Context) error {
	port := storagePort(t.cluster.Nodes[2].Dir)
	rules := partitionRules(port)
	useIPT := port > 0 && iptablesWorks()
	if !useIPT {
		t.logf("partition: iptables does not work here; SIGSTOP of node 3 stands in for the partition")
	}
	err := t.underLoad(ctx, "partition", "trust2", t.c.nodeFaults, func(ctx context.Context, i int, ack string, r *row) error {
		if !useIPT {
			if err := cassandra.PauseNode(t.cluster, 3); err != nil {
				return err
			}
			time.Sleep(15 * time.Second)
			if err := cassandra.ResumeNode(t.cluster, 3); err != nil {
				return err
			}
			return recovered(ctx, ack, r)
		}
		t.logf("partition #%d: node 3 cut from nodes 1 and 2 (storage port %d) for 15 s", i+1, port)
		added, err := addRules(rules)
		defer func() {
			if derr := deleteRules(added); derr != nil {
				t.logf("partition: REMOVING RULES FAILED: %v", derr)
			}
		}()
		if err != nil {
			return err
		}
		select {
		case <-time.After(15 * time.Second):
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := deleteRules(added); err != nil {
			return err
		}
		added = nil
		return recovered(ctx, ack, r)
	})
	if err == nil && len(t.rows) > 0 {
		if useIPT {
			t.rows[len(t.rows)-1].note = "iptables DROP between node 3 and nodes 1, 2 (storage port), 15 s"
		} else {
			t.rows[len(t.rows)-1].note = "iptables unusable: node 3 SIGSTOPped 15 s instead"
		}
	}
	return err
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
// 127.0.0.3 from 127.0.0.1 and 127.0.0.2 on the storage port, both ways.
func partitionRules(port int) [][]string {
	var rs [][]string
	for _, other := range []string{"127.0.0.1", "127.0.0.2"} {
		for _, dir := range [][2]string{{"127.0.0.3", other}, {other, "127.0.0.3"}} {
			rs = append(rs, []string{"-s", dir[0], "-d", dir[1], "-p", "tcp", "--dport", strconv.Itoa(port),
				"-m", "comment", "--comment", "cqlseq-torture", "-j", "DROP"})
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

// owners: fenced owner A is paused longer than the request timeout; owner
// B opens the same partitions (a new epoch fences A off) and runs; A is
// resumed and must be refused, never acknowledging over B.
func (t *torture) owners(ctx context.Context) error {
	ks, err := t.keyspace(ctx, "owners")
	if err != nil {
		return err
	}
	r := row{phase: "two owners (fenced)"}
	combined := filepath.Join(t.c.dir, "acks-owners.log")
	var logs []string
	var failed []string
	for i := range t.c.nodeFaults {
		ackA := filepath.Join(t.c.dir, fmt.Sprintf("acks-owners-%d-a.log", i))
		ackB := filepath.Join(t.c.dir, fmt.Sprintf("acks-owners-%d-b.log", i))
		logs = append(logs, ackA, ackB)
		a, err := t.startBench(ks, "fenced", ackA, fmt.Sprintf("owners-%d-a", i))
		if err != nil {
			return err
		}
		if _, err := waitAcks(ctx, ackA, 0, 5*time.Minute); err != nil {
			a.kill()
			return fmt.Errorf("owner A: %w", err)
		}
		t.logf("owners #%d: SIGSTOP owner A (pid %d), owner B takes over", i+1, a.cmd.Process.Pid)
		_ = a.cmd.Process.Signal(syscall.SIGSTOP)
		time.Sleep(t.c.timeout + 2*time.Second)
		b, err := t.startBench(ks, "fenced", ackB, fmt.Sprintf("owners-%d-b", i))
		if err != nil {
			a.kill()
			return err
		}
		if _, err := waitAcks(ctx, ackB, 0, 5*time.Minute); err != nil {
			a.kill()
			b.kill()
			return fmt.Errorf("owner B: %w", err)
		}
		nA := countAcks(ackA)
		_ = a.cmd.Process.Signal(syscall.SIGCONT)
		time.Sleep(5 * time.Second)
		if got := countAcks(ackA) - nA; got > 0 {
			t.failed = true
			r.note = fmt.Sprintf("owner A acknowledged %d commands after B took over", got)
			t.logf("owners: FAILED: %s", r.note)
		}
		failed = append(failed, "A "+a.interrupt(), "B "+b.interrupt())
		r.faults++
	}
	if err := concatAcks(combined, logs); err != nil {
		return err
	}
	r.acked = countAcks(combined)
	r.failed = strings.Join(failed[len(failed)-2:], ", ")
	if r.note == "" {
		r.note = "A paused past the request timeout; B's epoch fences A: 0 acks of A after resuming"
	}
	if err := t.verify(ctx, ks, combined, &r); err != nil {
		return err
	}
	t.rows = append(t.rows, r)
	return nil
}

// concatAcks writes the complete lines of each log to path.
func concatAcks(path string, logs []string) error {
	var buf bytes.Buffer
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			return err
		}
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			buf.Write(b[:i+1])
		}
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

func (t *torture) printTable() {
	w := t.out
	fmt.Fprintln(w, "| phase | faults injected | commands acked | busy/failed | lost | duplicates | regressions | recovery (max) | note |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	for _, r := range t.rows {
		verdict := ""
		if r.verifyFail {
			verdict = " **verify FAILED**"
		}
		fmt.Fprintf(w, "| %s | %d | %d | %s | %d | %d | %d | %.1f s | %s%s |\n", r.phase, r.faults, r.acked, r.failed,
			r.lost, r.dups, r.regs, r.recovery.Seconds(), r.note, verdict)
	}
}
