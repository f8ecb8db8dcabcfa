package cassandra

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gocql/gocql"
)

// MaxNodes bounds a cluster's size: node i listens on 127.0.0.i.
const MaxNodes = 9

// Cluster is a multi-node Cassandra started by StartCluster: node i
// (1-based) listens on 127.0.0.i with the same native and storage ports as
// the others, as ccm runs its clusters, and keeps its files in
// Dir/cqlseq-cassandra-node<i>. Node 1 is the seed.
type Cluster struct {
	Dir   string      `json:"dir"`
	Nodes []*Instance `json:"nodes"`
	// Datacenters is Options.Datacenters at StartCluster: nodes per data
	// centre, in node order. Empty: one data centre, datacenter1.
	Datacenters []int `json:"datacenters,omitempty"`
}

// Datacenter returns node i's (1-based) data centre: dc1, dc2, ... by
// Datacenters, or datacenter1 (SimpleSnitch's) without them; "" for a node
// the cluster does not have.
func (c *Cluster) Datacenter(i int) string {
	if i < 1 || i > len(c.Nodes) {
		return ""
	}
	return nodeDatacenter(c.Datacenters, i-1)
}

// nodeDatacenter is node i's (0-based) data centre by dcs (nodes per data
// centre, in node order): dc1, dc2, ..., or datacenter1 when dcs is empty.
func nodeDatacenter(dcs []int, i int) string {
	if len(dcs) == 0 {
		return "datacenter1"
	}
	for d, n := range dcs {
		if i < n {
			return fmt.Sprintf("dc%d", d+1)
		}
		i -= n
	}
	return ""
}

// Hosts returns the nodes' native transport addresses (host:port).
func (c *Cluster) Hosts() []string {
	hs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		hs[i] = n.Host
	}
	return hs
}

// Node returns node i (1-based) or an error naming the valid range.
func (c *Cluster) Node(i int) (*Instance, error) {
	if i < 1 || i > len(c.Nodes) {
		return nil, fmt.Errorf("%w: node %d: the cluster has nodes 1..%d", ErrInvalidInstance, i, len(c.Nodes))
	}
	return c.Nodes[i-1], nil
}

// InitialToken is node i's (0-based) token in an n-node cluster with one
// token per node, by ccm's formula for Murmur3Partitioner:
// (2^64 / n) * i - 2^63.
func InitialToken(i, n int) string {
	step := new(big.Int).Div(new(big.Int).Lsh(big.NewInt(1), 64), big.NewInt(int64(n)))
	t := new(big.Int).Mul(step, big.NewInt(int64(i)))
	return t.Sub(t, new(big.Int).Lsh(big.NewInt(1), 63)).String()
}

// nodeAddr is node i's (1-based) address.
func nodeAddr(i int) string { return fmt.Sprintf("127.0.0.%d", i) }

// clusterConfigs returns the cassandra.yaml settings of an n-node cluster
// in dir, its nodes in the data centres dcs names (Options.Datacenters;
// empty: SimpleSnitch).
func clusterConfigs(dir string, n, nativePort, storagePort int, crashSafe bool, dcs []int) []nodeConfig {
	cs := make([]nodeConfig, n)
	for i := range cs {
		dc := ""
		if len(dcs) > 0 {
			dc = nodeDatacenter(dcs, i)
		}
		cs[i] = nodeConfig{
			dir:                  filepath.Join(dir, fmt.Sprintf("cqlseq-cassandra-node%d", i+1)),
			listen:               nodeAddr(i + 1),
			seed:                 nodeAddr(1),
			token:                InitialToken(i, n),
			nativePort:           nativePort,
			storagePort:          storagePort,
			crashSafe:            crashSafe,
			joinWithoutBootstrap: true,
			dc:                   dc,
		}
	}
	return cs
}

// StartCluster starts an n-node cluster in a fresh run directory, one node
// after another (each answers CQL before the next starts), then waits until
// every node sees every node up and in the ring. With o.Datacenters, whose
// sum must be n, the nodes are in those data centres (node 1, the seed, in
// dc1). save, if not nil, is
// called after each node has started, so that a state file names every
// process even if the caller is killed during the start. On failure
// StartCluster stops every node it started and removes the directory.
func StartCluster(ctx context.Context, o Options, n int, save func(*Cluster) error) (*Cluster, error) {
	var invalid error
	if n < 1 || n > MaxNodes {
		invalid = fmt.Errorf("%w: %d nodes: want 1..%d", ErrInvalidOptions, n, MaxNodes)
	}
	if o.Secure {
		invalid = errors.Join(invalid, fmt.Errorf("%w: Secure is for Start (one node)", ErrInvalidOptions))
	}
	if sum := sumOf(o.Datacenters); len(o.Datacenters) > 0 && sum != n {
		invalid = errors.Join(invalid, fmt.Errorf("%w: Datacenters %v hold %d nodes, the cluster %d", ErrInvalidOptions, o.Datacenters, sum, n))
	}
	lib, dir, err := setUp(ctx, &o, invalid, "cqlseq-cluster-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, Datacenters: o.Datacenters}
	fail := func(err error) (*Cluster, error) {
		_, _ = StopCluster(c)
		return nil, err
	}
	ports, err := freePortsOn(n, 2)
	if err != nil {
		return fail(err)
	}
	for i, cfg := range clusterConfigs(dir, n, ports[0], ports[1], o.CrashSafe, o.Datacenters) {
		if err := writeNodeFiles(cfg); err != nil {
			return fail(err)
		}
		inst := &Instance{Dir: cfg.dir, Host: net.JoinHostPort(cfg.listen, strconv.Itoa(cfg.nativePort)),
			Listen: cfg.listen, Version: o.Version, CrashSafe: o.CrashSafe}
		o.Log("starting node %d of %d on %s (%s)", i+1, n, cfg.listen, nodeDatacenter(o.Datacenters, i))
		if err := launch(ctx, o, lib, inst); err != nil {
			return fail(fmt.Errorf("node %d: %w", i+1, err))
		}
		c.Nodes = append(c.Nodes, inst)
		if save != nil {
			if err := save(c); err != nil {
				return fail(err)
			}
		}
	}
	if err := WaitRing(ctx, c, o.StartTimeout); err != nil {
		return fail(err)
	}
	return c, nil
}

func writeNodeFiles(cfg nodeConfig) error {
	for _, d := range []string{"data", "commitlog", "saved_caches", "hints", "cdc_raw", "logs", "tmp"} {
		if err := os.MkdirAll(filepath.Join(cfg.dir, d), 0o755); err != nil {
			return fmt.Errorf("cassandra: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(cfg.dir, "cassandra.yaml"), []byte(nodeYAML(cfg)), 0o644); err != nil {
		return fmt.Errorf("cassandra: %w", err)
	}
	if err := os.WriteFile(filepath.Join(cfg.dir, "logback.xml"), []byte(logbackXML), 0o644); err != nil {
		return fmt.Errorf("cassandra: %w", err)
	}
	if cfg.dc != "" {
		if err := os.WriteFile(filepath.Join(cfg.dir, rackdcFile), []byte(rackdcProperties(cfg.dc)), 0o644); err != nil {
			return fmt.Errorf("cassandra: %w", err)
		}
	}
	return nil
}

func sumOf(xs []int) int {
	s := 0
	for _, x := range xs {
		s += x
	}
	return s
}

// freePortsOn returns k ports free on each of 127.0.0.1..127.0.0.n.
func freePortsOn(n, k int) ([]int, error) {
	for range 50 {
		ports, err := freePorts(k)
		if err != nil {
			return nil, err
		}
		if portsFreeOn(n, ports) {
			return ports, nil
		}
	}
	return nil, fmt.Errorf("cassandra: found no %d ports free on 127.0.0.1..%d", k, n)
}

func portsFreeOn(n int, ports []int) bool {
	for i := 2; i <= n; i++ {
		for _, p := range ports {
			l, err := net.Listen("tcp", net.JoinHostPort(nodeAddr(i), strconv.Itoa(p)))
			if err != nil {
				return false
			}
			_ = l.Close()
		}
	}
	return true
}

// WaitRing waits, up to limit, until every node of c answers CQL and sees
// every node Up and Normal (nodetool status's "UN", read without JMX):
// its gossip state (system_views.gossip_info) lists all the nodes with
// STATUS NORMAL, and a range read at consistency ALL of a keyspace
// replicated on every node (allReadTable) succeeds with it as the
// coordinator, which its failure detector refuses while it holds a node
// down.
func WaitRing(ctx context.Context, c *Cluster, limit time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		err := ringErr(wctx, c)
		if err == nil {
			return nil
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("cassandra: the ring is not all up and normal within %v: %w", limit, err)
		case <-time.After(time.Second):
		}
	}
}

// RingError is WaitRing's error about one node (1-based) that does not see
// the ring whole.
type RingError struct {
	Node int
	Host string
	Err  error
}

func (e *RingError) Error() string { return fmt.Sprintf("node %d (%s): %v", e.Node, e.Host, e.Err) }

func (e *RingError) Unwrap() error { return e.Err }

// HoldsPeersDown reports whether the node sees every node NORMAL in gossip
// but refuses a read at ALL as unavailable: its failure detector holds
// peers down that answer the others (seen after a one-way network cut).
func (e *RingError) HoldsPeersDown() bool {
	var ue *gocql.RequestErrUnavailable
	return errors.Is(e.Err, errReadAtAll) && errors.As(e.Err, &ue)
}

var errReadAtAll = errors.New("a read at consistency ALL")

func ringErr(ctx context.Context, c *Cluster) error {
	for i, n := range c.Nodes {
		if err := nodeSeesRing(ctx, n.Host, len(c.Nodes)); err != nil {
			return &RingError{Node: i + 1, Host: n.Host, Err: err}
		}
	}
	return nil
}

func nodeSeesRing(ctx context.Context, host string, n int) error {
	s, err := connect(ctx, &Instance{Host: host}, 10*time.Second)
	if err != nil {
		return err
	}
	defer s.Close()
	normal := 0
	// Between nodes of 4.0 and later only STATUS_WITH_PORT is gossiped;
	// STATUS is filled for the node itself.
	it := s.Query("SELECT address, status, status_with_port FROM system_views.gossip_info").WithContext(ctx).Iter()
	var addr net.IP
	var status, withPort string
	var seen []string
	for it.Scan(&addr, &status, &withPort) {
		if withPort != "" {
			status = withPort
		}
		seen = append(seen, addr.String()+" "+status)
		if strings.HasPrefix(status, "NORMAL") {
			normal++
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("reading gossip state: %w", err)
	}
	if normal != n {
		return fmt.Errorf("%d of %d nodes NORMAL in gossip: %v", normal, n, seen)
	}
	table := allReadTable(n)
	if table == "" {
		return nil
	}
	q := s.Query("SELECT * FROM " + table + " LIMIT 1").WithContext(ctx).Consistency(gocql.All)
	if err := q.Exec(); err != nil {
		return fmt.Errorf("%w: %w", errReadAtAll, err)
	}
	return nil
}

// allReadTable is the table WaitRing reads at consistency ALL in an
// n-node cluster: one of a system keyspace of SimpleStrategy whose
// replication factor is at most n (ALL waits for that many replicas alive,
// however few nodes there are) and at least 2, so that the range read
// needs every node (system_distributed's is 3, system_traces' 2). ""
// for one node: it has no peer to hold down.
func allReadTable(n int) string {
	switch {
	case n >= 3:
		return "system_distributed.repair_history"
	case n == 2:
		return "system_traces.sessions"
	}
	return ""
}

// StopCluster stops every node of c (as Stop does) and removes c.Dir. It
// returns the peak resident set of each node it stopped (0 for a node that
// was not running) and every error met; it always tries every node.
func StopCluster(c *Cluster) (peakRSSKiB []int64, err error) {
	var errs []error
	peakRSSKiB = make([]int64, len(c.Nodes))
	for i := len(c.Nodes) - 1; i >= 0; i-- {
		rss, err := Stop(c.Nodes[i])
		peakRSSKiB[i] = rss
		if err != nil {
			errs = append(errs, fmt.Errorf("node %d: %w", i+1, err))
		}
	}
	if c.Dir != "" && strings.Contains(filepath.Base(c.Dir), "cqlseq-cluster-") {
		if err := os.RemoveAll(c.Dir); err != nil {
			errs = append(errs, fmt.Errorf("cassandra: removing %s: %w", c.Dir, err))
		}
	}
	return peakRSSKiB, errors.Join(errs...)
}

// KillNode crashes node i (SIGKILL to its process group); it stays down
// until RestartNode.
func KillNode(c *Cluster, i int) error {
	inst, err := c.Node(i)
	if err != nil {
		return err
	}
	if !inst.Running() {
		return nil
	}
	return crash(inst.PID, 10*time.Second)
}

// PauseNode stops node i's processes (SIGSTOP), as a long GC pause would:
// its sockets stay open and nothing answers.
func PauseNode(c *Cluster, i int) error { return signalNode(c, i, syscall.SIGSTOP) }

// ResumeNode continues node i's processes (SIGCONT) after PauseNode.
func ResumeNode(c *Cluster, i int) error { return signalNode(c, i, syscall.SIGCONT) }

func signalNode(c *Cluster, i int, sig syscall.Signal) error {
	inst, err := c.Node(i)
	if err != nil {
		return err
	}
	if !inst.Running() {
		return fmt.Errorf("%w: node %d (pid %d) is not running", ErrInvalidInstance, i, inst.PID)
	}
	if err := syscall.Kill(-inst.PID, sig); err != nil {
		return fmt.Errorf("cassandra: %v to node %d (process group %d): %w", sig, i, inst.PID, err)
	}
	return nil
}

// RestartNode crashes node i if it runs (as Restart does), keeps it down
// for down, starts it again on its directory and waits until the ring is
// all up and normal again.
func RestartNode(ctx context.Context, c *Cluster, i int, o Options, down time.Duration) error {
	inst, err := c.Node(i)
	if err != nil {
		return err
	}
	o.EnsureDefaults()
	if err := Restart(ctx, inst, o, down); err != nil {
		return err
	}
	return WaitRing(ctx, c, o.StartTimeout)
}

// WriteClusterState saves c to path as JSON.
func WriteClusterState(path string, c *Cluster) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("cassandra: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("cassandra: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("cassandra: %w", err)
	}
	return nil
}

// ErrNotCluster reports a state file that describes a single instance.
var ErrNotCluster = errors.New("cassandra: not a cluster state file")

// ReadClusterState loads a Cluster saved by WriteClusterState; a state
// file of a single instance (WriteState) gives an error wrapping
// ErrNotCluster.
func ReadClusterState(path string) (*Cluster, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cassandra: %w", err)
	}
	var c Cluster
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("cassandra: state file %s: %w", path, err)
	}
	if c.Dir == "" || len(c.Nodes) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNotCluster, path)
	}
	return &c, nil
}
