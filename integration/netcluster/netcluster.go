// Package netcluster runs a replicated Cassandra in containers on one
// Docker network, with what a loopback cluster lacks: a one-way network
// delay per node, and faults through the Docker API (pause, a real
// partition by disconnecting a node from the network, kill and restart).
//
// Start makes a network with a subnet of its own and starts the nodes one
// after another from cqlseq's Cassandra image (built if missing), each at a
// fixed address, seeded from node 1, with its own initial token, crash-safe
// (batch commit log, flushed schema), and waits until every node sees the
// whole ring. The host reaches the nodes at their addresses (the bridge is
// local), so clients see the real topology. Every container and the
// network carry dockertest's labels and a watchdog; Terminate removes them.
//
// A node's delay applies to every packet it sends on its network
// interface: a client on the host waits for node i's answers d(i) longer,
// and a round trip between nodes i and j takes d(i) + d(j). It is set with
// tc netem where the kernel has it, else with cqlseq-netdelay (netfilter
// queue; see cmd/cqlseq-netdelay), which Start copies into each container.
package netcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tcexec "github.com/testcontainers/testcontainers-go/exec"
	tcnetwork "github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/cqlseq/cqlseq/integration/dockertest"
	"github.com/cqlseq/cqlseq/storage/cql"
	"github.com/cqlseq/cqlseq/testenv/cassandra"
)

// Options configures Start.
type Options struct {
	// Nodes in the cluster. Default 3.
	Nodes int
	// Image of the nodes. Default cassandra.ImageName(DefaultVersion),
	// built if missing.
	Image string
	// Heap of each node's JVM. Default 512m.
	Heap string
	// Delays are the nodes' one-way delays once the ring is up (missing
	// entries: none).
	Delays []time.Duration
	// NetDelay is the cqlseq-netdelay binary (linux, static). Default:
	// built from this module's source with go build.
	NetDelay string
	// CrashSafe starts the nodes crash-safe (cassandra.Options.CrashSafe:
	// batch commit log, flushed schema), so that a killed node restarts
	// with every acknowledged write and every keyspace.
	CrashSafe bool
	// StartTimeout bounds each node's start and the ring's. Default 5 min.
	StartTimeout time.Duration
	// Log receives progress lines. Default: discarded.
	Log func(format string, args ...any)
}

// EnsureDefaults fills zero fields.
func (o *Options) EnsureDefaults() {
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.Image == "" {
		o.Image = cassandra.ImageName(cassandra.DefaultVersion)
	}
	if o.Heap == "" {
		o.Heap = "512m"
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 5 * time.Minute
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
}

// Validate reports every invalid field at once.
func (o *Options) Validate() error {
	var errs []error
	if o.Nodes < 1 || o.Nodes > 9 {
		errs = append(errs, fmt.Errorf("netcluster: %d nodes: want 1..9", o.Nodes))
	}
	if len(o.Delays) > o.Nodes {
		errs = append(errs, fmt.Errorf("netcluster: %d delays for %d nodes", len(o.Delays), o.Nodes))
	}
	for i, d := range o.Delays {
		if d < 0 || d > 10*time.Second {
			errs = append(errs, fmt.Errorf("netcluster: node %d delay %v: want 0..10s", i+1, d))
		}
	}
	if o.StartTimeout < 0 {
		errs = append(errs, fmt.Errorf("netcluster: StartTimeout %v is negative", o.StartTimeout))
	}
	return errors.Join(errs...)
}

// DelayMethod is how node delays are applied.
type DelayMethod string

// The delay methods.
const (
	Netem    DelayMethod = "tc netem"
	NetDelay DelayMethod = "cqlseq-netdelay (netfilter queue)"
)

// Cluster is a running cluster.
type Cluster struct {
	Nodes []*Node

	o       Options
	cli     *testcontainers.DockerClient
	net     *testcontainers.DockerNetwork
	netWD   *dockertest.Watchdog
	subnet  netip.Prefix
	mu      sync.Mutex
	method  DelayMethod // "" until the first delay is set
	netemNo error       // why tc netem could not be used
}

// Node is one container of the cluster.
type Node struct {
	Index int        // 1-based
	Addr  netip.Addr // fixed across restarts and reconnections
	c     *Cluster
	ctr   *testcontainers.DockerContainer
	wd    *dockertest.Watchdog
	delay time.Duration
}

// Start starts a cluster; on failure it removes what it started.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	dockertest.Prepare()
	if err := dockertest.EngineAnswers(ctx); err != nil {
		return nil, err
	}
	if o.Image == cassandra.ImageName(cassandra.DefaultVersion) {
		img, err := cassandra.BuildImage(ctx, cassandra.ImageOptions{Options: cassandra.Options{Log: o.Log}})
		if err != nil {
			return nil, err
		}
		if img.Built {
			o.Log("built image %s in %.1f s (%.0f MB)", img.Name, img.BuildFor.Seconds(), float64(img.Size)/1e6)
		}
	}
	if o.NetDelay == "" {
		bin, err := buildNetDelay(ctx)
		if err != nil {
			return nil, err
		}
		o.NetDelay = bin
	}
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return nil, fmt.Errorf("netcluster: %w", err)
	}
	c := &Cluster{o: o, cli: cli}
	fail := func(err error) (*Cluster, error) {
		if terr := c.Terminate(); terr != nil {
			err = errors.Join(err, terr)
		}
		return nil, err
	}
	if err := c.makeNetwork(ctx); err != nil {
		return fail(err)
	}
	began := time.Now()
	for i := 1; i <= o.Nodes; i++ {
		if err := c.startNode(ctx, i); err != nil {
			return fail(fmt.Errorf("netcluster: node %d: %w", i, err))
		}
	}
	if err := c.WaitRing(ctx); err != nil {
		return fail(err)
	}
	o.Log("%d nodes up and normal in %.1f s: %s", o.Nodes, time.Since(began).Seconds(), strings.Join(c.Hosts(), ","))
	if len(o.Delays) > 0 {
		ds := slices.Clone(o.Delays)
		for len(ds) < o.Nodes {
			ds = append(ds, 0)
		}
		if err := c.SetDelays(ctx, ds); err != nil {
			return fail(err)
		}
	}
	return c, nil
}

// buildNetDelay builds cmd/cqlseq-netdelay (linux, static) into a
// temporary directory; the file stays for the process's life.
func buildNetDelay(ctx context.Context) (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("netcluster: no source path to build cqlseq-netdelay from")
	}
	dir, err := os.MkdirTemp("", "cqlseq-netdelay-")
	if err != nil {
		return "", fmt.Errorf("netcluster: %w", err)
	}
	bin := filepath.Join(dir, "cqlseq-netdelay")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/cqlseq-netdelay")
	cmd.Dir = filepath.Dir(file)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("netcluster: building cqlseq-netdelay: %w: %s", err, out)
	}
	return bin, nil
}

// makeNetwork creates a bridge network on a free 10.213.x.0/24 subnet.
func (c *Cluster) makeNetwork(ctx context.Context) error {
	var lastErr error
	for range 20 {
		subnet := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 213, byte(rand.IntN(256)), 0}), 24)
		gw := subnet.Addr().Next()
		n, err := tcnetwork.New(ctx,
			tcnetwork.WithLabels(dockertest.Labels()),
			tcnetwork.WithIPAM(&network.IPAM{Driver: "default", Config: []network.IPAMConfig{{Subnet: subnet, Gateway: gw}}}),
		)
		if err != nil {
			lastErr = err
			continue
		}
		c.net, c.subnet = n, subnet
		c.netWD = dockertest.Watch("network", n.ID)
		c.o.Log("network %s on %s", n.Name, subnet)
		return nil
	}
	return fmt.Errorf("netcluster: no network created: %w", lastErr)
}

// nodeAddr is node i's address: .10+i of the subnet.
func (c *Cluster) nodeAddr(i int) netip.Addr {
	b := c.subnet.Addr().As4()
	b[3] = byte(10 + i)
	return netip.AddrFrom4(b)
}

func (c *Cluster) startNode(ctx context.Context, i int) error {
	addr := c.nodeAddr(i)
	n := &Node{Index: i, Addr: addr, c: c}
	began := time.Now()
	netName := c.net.Name
	crashSafe := "0"
	if c.o.CrashSafe {
		crashSafe = "1"
	}
	ctr, err := testcontainers.Run(ctx, c.o.Image,
		testcontainers.WithLabels(dockertest.Labels()),
		testcontainers.WithEnv(map[string]string{
			"CASSANDRA_HEAP":           c.o.Heap,
			"CASSANDRA_SEEDS":          c.nodeAddr(1).String(),
			"CASSANDRA_INITIAL_TOKEN":  cassandra.InitialToken(i-1, c.o.Nodes),
			"CASSANDRA_AUTO_BOOTSTRAP": "false",
			"CASSANDRA_CRASH_SAFE":     crashSafe,
		}),
		testcontainers.WithHostConfigModifier(func(h *container.HostConfig) {
			h.CapAdd = append(h.CapAdd, "NET_ADMIN")
		}),
		testcontainers.CustomizeRequestOption(func(req *testcontainers.GenericContainerRequest) error {
			req.Name = fmt.Sprintf("cqlseq-node%d-%s", i, strings.ReplaceAll(c.subnet.Addr().String(), ".", "-"))
			req.Networks = []string{netName}
			req.NetworkAliases = map[string][]string{netName: {fmt.Sprintf("node%d", i)}}
			req.EndpointSettingsModifier = func(m map[string]*network.EndpointSettings) {
				if m[netName] == nil {
					m[netName] = &network.EndpointSettings{}
				}
				m[netName].IPAMConfig = &network.EndpointIPAMConfig{IPv4Address: addr}
			}
			return nil
		}),
		testcontainers.WithWaitStrategy(wait.ForLog("Startup complete").WithStartupTimeout(c.o.StartTimeout)),
	)
	if ctr != nil {
		n.ctr = ctr
		n.wd = dockertest.Watch("container", ctr.GetContainerID())
		c.Nodes = append(c.Nodes, n)
	}
	if err != nil {
		return err
	}
	if err := ctr.CopyFileToContainer(ctx, c.o.NetDelay, "/usr/local/bin/cqlseq-netdelay", 0o755); err != nil {
		return err
	}
	if err := waitCQL(ctx, n.Host(), c.o.StartTimeout); err != nil {
		return err
	}
	c.o.Log("node %d at %s answered CQL %.1f s after it was created", i, addr, time.Since(began).Seconds())
	return nil
}

// waitCQL waits until a query of system.local succeeds on host (a session
// to that node alone).
func waitCQL(ctx context.Context, host string, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		err := probeCQL(ctx, host)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no CQL answer on %s within %v: %w", host, limit, err)
		case <-time.After(time.Second):
		}
	}
}

func probeCQL(ctx context.Context, host string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := cql.Connect(ctx, cql.Options{Hosts: []string{host}, DisableInitialHostLookup: true,
		Timeout: 5 * time.Second, ConnectTimeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer s.Close()
	var rel string
	return s.Query("SELECT release_version FROM system.local").WithContext(ctx).Scan(&rel)
}

// Hosts returns the nodes' CQL addresses (host:port).
func (c *Cluster) Hosts() []string {
	hs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		hs[i] = n.Host()
	}
	return hs
}

// Host returns the node's CQL address (host:port).
func (n *Node) Host() string { return net.JoinHostPort(n.Addr.String(), "9042") }

// Node returns node i (1-based).
func (c *Cluster) Node(i int) *Node { return c.Nodes[i-1] }

// WaitRing waits until every node sees every node up and normal.
func (c *Cluster) WaitRing(ctx context.Context) error {
	cl := &cassandra.Cluster{}
	for _, n := range c.Nodes {
		cl.Nodes = append(cl.Nodes, &cassandra.Instance{Host: n.Host(), Listen: n.Addr.String()})
	}
	return cassandra.WaitRing(ctx, cl, c.o.StartTimeout)
}

// Terminate removes every container and the network, whatever their state
// (a paused node is unpaused first: a paused container cannot be stopped).
func (c *Cluster) Terminate() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var errs []error
	for _, n := range c.Nodes {
		if st, err := n.ctr.State(ctx); err == nil && st.Paused {
			_, _ = c.cli.ContainerUnpause(ctx, n.ctr.GetContainerID(), client.ContainerUnpauseOptions{})
		}
		if err := testcontainers.TerminateContainer(n.ctr, testcontainers.StopContext(ctx), testcontainers.StopTimeout(0)); err != nil {
			errs = append(errs, fmt.Errorf("netcluster: node %d: %w", n.Index, err))
		}
		n.wd.Stop()
	}
	c.Nodes = nil
	if c.net != nil {
		if err := c.net.Remove(ctx); err != nil {
			errs = append(errs, fmt.Errorf("netcluster: network: %w", err))
		}
		c.netWD.Stop()
		c.net = nil
	}
	if c.cli != nil {
		_ = c.cli.Close()
		c.cli = nil
	}
	return errors.Join(errs...)
}

// SetDelays sets every node's one-way delay (ds[i] for node i+1).
func (c *Cluster) SetDelays(ctx context.Context, ds []time.Duration) error {
	if len(ds) != len(c.Nodes) {
		return fmt.Errorf("netcluster: %d delays for %d nodes", len(ds), len(c.Nodes))
	}
	for i, d := range ds {
		if err := c.Nodes[i].SetDelay(ctx, d); err != nil {
			return err
		}
	}
	c.o.Log("delays %s (%s)", FormatDelays(ds), c.Method())
	return nil
}

// Method says how delays are applied ("" before the first non-zero one).
func (c *Cluster) Method() DelayMethod {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.method
}

// Delay returns the node's one-way delay.
func (n *Node) Delay() time.Duration { return n.delay }

// SetDelay sets the node's one-way delay (0: none).
func (n *Node) SetDelay(ctx context.Context, d time.Duration) error {
	if err := n.applyDelay(ctx, d); err != nil {
		return fmt.Errorf("netcluster: node %d delay %v: %w", n.Index, d, err)
	}
	n.delay = d
	return nil
}

func (n *Node) applyDelay(ctx context.Context, d time.Duration) error {
	c := n.c
	c.mu.Lock()
	method := c.method
	c.mu.Unlock()
	if d == 0 { // no delay: undo either method (tc netem errors are moot here)
		if method != NetDelay {
			_ = n.netem(ctx, 0)
		}
		if method != Netem {
			return n.netDelay(ctx, 0)
		}
		return nil
	}
	if method == "" || method == Netem {
		err := n.netem(ctx, d)
		if err == nil {
			c.mu.Lock()
			c.method = Netem
			c.mu.Unlock()
			return nil
		}
		if method == Netem {
			return err
		}
		c.mu.Lock()
		c.method, c.netemNo = NetDelay, err
		c.mu.Unlock()
		c.o.Log("tc netem cannot be used (%v): delays by cqlseq-netdelay", err)
	}
	return n.netDelay(ctx, d)
}

// netem sets the delay with tc (root qdisc of eth0).
func (n *Node) netem(ctx context.Context, d time.Duration) error {
	if d == 0 {
		_, _ = n.exec(ctx, "tc", "qdisc", "del", "dev", "eth0", "root")
		return nil
	}
	_, err := n.exec(ctx, "tc", "qdisc", "replace", "dev", "eth0", "root", "netem", "delay", fmt.Sprintf("%dus", d.Microseconds()))
	return err
}

// netDelay stops the node's cqlseq-netdelay, if any, and starts one with
// the new delay (none for 0).
func (n *Node) netDelay(ctx context.Context, d time.Duration) error {
	// The pid file survives a restart of the container, when its number
	// may be another process's, or a thread's (a signal to a thread goes
	// to its whole process: Cassandra): only a cqlseq-netdelay is stopped.
	stop := `p=$(cat /run/cqlseq-netdelay.pid 2>/dev/null) || exit 0; rm -f /run/cqlseq-netdelay.pid
[ "$(cat /proc/$p/comm 2>/dev/null)" = cqlseq-netdelay ] || exit 0
kill "$p" 2>/dev/null; i=0
# Cassandra, PID 1, reaps no child: an ended delayer stays a zombie.
while [ -e /proc/$p ] && ! grep -q '^State:[[:space:]]*Z' /proc/$p/status 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done`
	if _, err := n.exec(ctx, "sh", "-c", stop); err != nil {
		return err
	}
	if d == 0 {
		return nil
	}
	start := fmt.Sprintf(`cqlseq-netdelay -delay %dus </dev/null >>/var/lib/cassandra/logs/netdelay.log 2>&1 &
i=0; while [ ! -s /run/cqlseq-netdelay.pid ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
[ -s /run/cqlseq-netdelay.pid ] || { tail -5 /var/lib/cassandra/logs/netdelay.log; exit 1; }`, d.Microseconds())
	_, err := n.exec(ctx, "sh", "-c", start)
	return err
}

// exec runs a command in the node and returns its output; a non-zero exit
// is an error carrying the output.
func (n *Node) exec(ctx context.Context, cmd ...string) (string, error) {
	code, r, err := n.ctr.Exec(ctx, cmd, tcexec.Multiplexed())
	if err != nil {
		return "", err
	}
	var sb strings.Builder
	if r != nil {
		b := make([]byte, 4096)
		for {
			k, err := r.Read(b)
			sb.Write(b[:k])
			if err != nil {
				break
			}
		}
	}
	if code != 0 {
		return sb.String(), fmt.Errorf("%s: exit %d: %s", strings.Join(cmd, " "), code, strings.TrimSpace(sb.String()))
	}
	return sb.String(), nil
}

// CPU returns the CPU time the node's container (every process in its
// cgroup) has used, from the engine's stats.
func (n *Node) CPU(ctx context.Context) (time.Duration, error) {
	res, err := n.c.cli.ContainerStats(ctx, n.ctr.GetContainerID(), client.ContainerStatsOptions{})
	if err != nil {
		return 0, wrap(n, "stats", err)
	}
	defer res.Body.Close()
	var st struct {
		CPUStats struct {
			CPUUsage struct {
				TotalUsage uint64 `json:"total_usage"` // ns on Linux
			} `json:"cpu_usage"`
		} `json:"cpu_stats"`
	}
	if err := json.NewDecoder(res.Body).Decode(&st); err != nil {
		return 0, wrap(n, "stats", err)
	}
	if st.CPUStats.CPUUsage.TotalUsage == 0 {
		return 0, wrap(n, "stats", errors.New("no CPU usage reported (container not running?)"))
	}
	return time.Duration(st.CPUStats.CPUUsage.TotalUsage), nil
}

// CPU returns the CPU time the nodes' containers have used, summed.
func (c *Cluster) CPU(ctx context.Context) (time.Duration, error) {
	var sum time.Duration
	for _, n := range c.Nodes {
		d, err := n.CPU(ctx)
		if err != nil {
			return 0, err
		}
		sum += d
	}
	return sum, nil
}

// Pause freezes the node's processes (docker pause: alive to TCP's
// kernel, silent to requests, like a long GC pause).
func (n *Node) Pause(ctx context.Context) error {
	_, err := n.c.cli.ContainerPause(ctx, n.ctr.GetContainerID(), client.ContainerPauseOptions{})
	return wrap(n, "pause", err)
}

// Unpause resumes a paused node.
func (n *Node) Unpause(ctx context.Context) error {
	_, err := n.c.cli.ContainerUnpause(ctx, n.ctr.GetContainerID(), client.ContainerUnpauseOptions{})
	return wrap(n, "unpause", err)
}

// Disconnect removes the node from the network: nothing reaches it or
// leaves it, the host's clients included (a real partition).
func (n *Node) Disconnect(ctx context.Context) error {
	_, err := n.c.cli.NetworkDisconnect(ctx, n.c.net.ID, client.NetworkDisconnectOptions{Container: n.ctr.GetContainerID(), Force: true})
	return wrap(n, "disconnect", err)
}

// Connect connects the node to the network again at its address and
// applies its delay again (the interface is new).
func (n *Node) Connect(ctx context.Context) error {
	_, err := n.c.cli.NetworkConnect(ctx, n.c.net.ID, client.NetworkConnectOptions{
		Container:      n.ctr.GetContainerID(),
		EndpointConfig: &network.EndpointSettings{IPAMConfig: &network.EndpointIPAMConfig{IPv4Address: n.Addr}, Aliases: []string{fmt.Sprintf("node%d", n.Index)}},
	})
	if err != nil {
		return wrap(n, "connect", err)
	}
	return n.SetDelay(ctx, n.delay)
}

// Kill SIGKILLs the node's Cassandra (the container stops).
func (n *Node) Kill(ctx context.Context) error {
	_, err := n.c.cli.ContainerKill(ctx, n.ctr.GetContainerID(), client.ContainerKillOptions{Signal: "KILL"})
	return wrap(n, "kill", err)
}

// Restart starts a killed node again on its data and address, waits until
// it answers CQL and the ring is whole, and applies its delay again.
func (n *Node) Restart(ctx context.Context) error {
	if _, err := n.c.cli.ContainerStart(ctx, n.ctr.GetContainerID(), client.ContainerStartOptions{}); err != nil {
		return wrap(n, "start", err)
	}
	if err := waitCQL(ctx, n.Host(), n.c.o.StartTimeout); err != nil {
		return wrap(n, "restart", err)
	}
	if err := n.SetDelay(ctx, n.delay); err != nil {
		return err
	}
	return wrap(n, "restart", n.c.WaitRing(ctx))
}

func wrap(n *Node, op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("netcluster: node %d %s: %w", n.Index, op, err)
}

// FormatDelays is "0 / 0.5 / 5 ms" style.
func FormatDelays(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', -1, 64)
	}
	return strings.Join(parts, " / ") + " ms"
}

// RTT is the measured round trips of a cluster (medians of TCP connects,
// in ms): from the host to each node, and between nodes.
type RTT struct {
	Host  []float64   // Host[i]: host to node i+1
	Nodes [][]float64 // Nodes[i][j]: node i+1 to node j+1 (0 on the diagonal)
}

// MeasureRTT measures the round trips to and between the nodes (storage
// port 7000 between nodes, 9042 from the host).
func (c *Cluster) MeasureRTT(ctx context.Context) (RTT, error) {
	var r RTT
	for _, n := range c.Nodes {
		ts := make([]float64, 0, 20)
		for range 20 {
			began := time.Now()
			conn, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", n.Host())
			if err != nil {
				return RTT{}, fmt.Errorf("netcluster: node %d: %w", n.Index, err)
			}
			ts = append(ts, float64(time.Since(began))/float64(time.Millisecond))
			_ = conn.Close()
			time.Sleep(10 * time.Millisecond)
		}
		slices.Sort(ts)
		r.Host = append(r.Host, ts[len(ts)/2])
	}
	for _, a := range c.Nodes {
		row := make([]float64, len(c.Nodes))
		for j, b := range c.Nodes {
			if a == b {
				continue
			}
			out, err := a.exec(ctx, "cqlseq-netdelay", "-probe", net.JoinHostPort(b.Addr.String(), "7000"), "-n", "20")
			if err != nil {
				return RTT{}, fmt.Errorf("netcluster: node %d to %d: %w", a.Index, b.Index, err)
			}
			// Multiplexed output may carry stray bytes before the figure.
			f := strings.Fields(out)
			if len(f) == 0 {
				return RTT{}, fmt.Errorf("netcluster: node %d to %d: no figure", a.Index, b.Index)
			}
			if row[j], err = strconv.ParseFloat(f[len(f)-1], 64); err != nil {
				return RTT{}, fmt.Errorf("netcluster: node %d to %d: %q: %w", a.Index, b.Index, out, err)
			}
		}
		r.Nodes = append(r.Nodes, row)
	}
	return r, nil
}

// String is "host->n1 0.03, ...; n1<->n2 0.6, ..." in ms.
func (r RTT) String() string {
	var parts []string
	for i, h := range r.Host {
		parts = append(parts, fmt.Sprintf("host-n%d %.2f", i+1, h))
	}
	var pairs []string
	for i := range r.Nodes {
		for j := i + 1; j < len(r.Nodes[i]); j++ {
			pairs = append(pairs, fmt.Sprintf("n%d-n%d %.2f", i+1, j+1, r.Nodes[i][j]))
		}
	}
	return strings.Join(parts, ", ") + "; " + strings.Join(pairs, ", ") + " ms"
}
