package cassandra

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestInitialTokenIsCCMsFormula(t *testing.T) {
	// ccm: ((2**64 // n) * i) - 2**63
	require.Equal(t, []string{"-9223372036854775808", "-3074457345618258603", "3074457345618258602"},
		[]string{InitialToken(0, 3), InitialToken(1, 3), InitialToken(2, 3)})
	require.Equal(t, "0", InitialToken(1, 2), "2^64 divides evenly")
	require.Equal(t, strconv.FormatInt(math.MinInt64, 10), InitialToken(0, 1))
	for n := 1; n <= MaxNodes; n++ {
		prev := int64(math.MinInt64)
		for i := range n {
			tok, err := strconv.ParseInt(InitialToken(i, n), 10, 64)
			require.NoError(t, err, "token %d of %d is an int64", i, n)
			if i > 0 {
				require.Greater(t, tok, prev, "tokens ascend")
			}
			prev = tok
		}
	}
}

func TestClusterConfigsPutEachNodeOnItsOwnAddressAndDir(t *testing.T) {
	cs := clusterConfigs("/run/c", 3, 19042, 17000, false, nil)
	require.Len(t, cs, 3)
	dirs := map[string]bool{}
	for i, c := range cs {
		y := nodeYAML(c)
		addr := "127.0.0." + strconv.Itoa(i+1)
		for _, want := range []string{
			"listen_address: " + addr + "\n", "rpc_address: " + addr + "\n",
			`seeds: "127.0.0.1:17000"`, "native_transport_port: 19042", "storage_port: 17000",
			"num_tokens: 1\n", "initial_token: " + InitialToken(i, 3) + "\n",
			"auto_bootstrap: false\n", "commitlog_directory: " + c.dir + "/commitlog",
		} {
			require.Contains(t, y, want, "node %d", i+1)
		}
		require.Contains(t, y, "endpoint_snitch: SimpleSnitch\n", "one data centre by default")
		require.Equal(t, filepath.Join("/run/c", "cqlseq-cassandra-node"+strconv.Itoa(i+1)), c.dir)
		require.False(t, dirs[c.dir])
		dirs[c.dir] = true
	}
	single := cassandraYAML("/run/x", 19042, 17000, false)
	require.Contains(t, single, "initial_token: 0\n")
	require.Contains(t, single, "listen_address: 127.0.0.1\n")
	require.NotContains(t, single, "auto_bootstrap", "a single node keeps the default")
}

func TestClusterConfigsInDatacenters(t *testing.T) {
	cs := clusterConfigs(t.TempDir(), 3, 19042, 17000, false, []int{1, 2})
	wdcs := []string{"dc1", "dc2", "dc2"}
	c := &Cluster{Nodes: make([]*Instance, 3), Datacenters: []int{1, 2}}
	for i, cfg := range cs {
		y := nodeYAML(cfg)
		require.Contains(t, y, "endpoint_snitch: GossipingPropertyFileSnitch\n", "node %d", i+1)
		require.NotContains(t, y, "SimpleSnitch")
		require.Contains(t, y, `seeds: "127.0.0.1:17000"`, "node 1, in dc1, is the only seed")
		require.Contains(t, y, "initial_token: "+InitialToken(i, 3)+"\n", "tokens unique across the cluster")
		require.NoError(t, writeNodeFiles(cfg))
		b, err := os.ReadFile(filepath.Join(cfg.dir, "cassandra-rackdc.properties"))
		require.NoError(t, err)
		require.Equal(t, "dc="+wdcs[i]+"\nrack=rack1\n", string(b), "node %d", i+1)
		args := strings.Join(jvmArgs(Options{Heap: "1g"}, "/lib", "/lib/jamm.jar", cfg.dir), " ")
		require.Contains(t, args, "-Dcassandra-rackdc.properties=file://"+filepath.Join(cfg.dir, "cassandra-rackdc.properties"))
		require.Equal(t, wdcs[i], c.Datacenter(i+1))
	}
	require.Equal(t, "", c.Datacenter(4))
	require.Equal(t, "datacenter1", (&Cluster{Nodes: make([]*Instance, 2)}).Datacenter(2), "SimpleSnitch's")

	single := singleNode(t.TempDir(), 19042, 17000, false)
	require.NoError(t, writeNodeFiles(single))
	_, err := os.Stat(filepath.Join(single.dir, "cassandra-rackdc.properties"))
	require.True(t, errors.Is(err, os.ErrNotExist), "no data centre, no properties file: %v", err)
}

func TestDatacentersRefused(t *testing.T) {
	o := fakeOptions(t)
	o.Datacenters = []int{1, 1}
	_, err := StartCluster(t.Context(), o, 3, nil)
	require.ErrorIs(t, err, ErrInvalidOptions)
	require.Contains(t, err.Error(), "Datacenters [1 1] hold 2 nodes, the cluster 3")
	o.Datacenters = []int{2, 0}
	_, err = StartCluster(t.Context(), o, 2, nil)
	require.ErrorIs(t, err, ErrInvalidOptions)
	require.Contains(t, err.Error(), "Datacenters[1] (dc2) has 0 nodes")
	o.Datacenters = []int{1}
	_, err = Start(t.Context(), o)
	require.ErrorIs(t, err, ErrInvalidOptions)
	require.Contains(t, err.Error(), "Datacenters is for StartCluster")
}

func TestIsOursMatchesTheWholeDirectory(t *testing.T) {
	// node1's directory is a prefix of node10's: only a path match tells
	// them apart.
	inst := &Instance{PID: 1, Dir: "/run/c/cqlseq-cassandra-node1"}
	cmd := "java -Dcassandra.config=file:///run/c/cqlseq-cassandra-node10/cassandra.yaml CassandraDaemon"
	require.False(t, strings.Contains(cmd, filepath.Clean(inst.Dir)+"/"))
	require.True(t, strings.Contains(cmd, "/run/c/cqlseq-cassandra-node10/"))
}

func TestClusterStateRoundTripAndSingleInstanceRefused(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "c.json")
	c := &Cluster{Dir: "/run/cqlseq-cluster-1", Nodes: []*Instance{
		{PID: 11, Dir: "/run/cqlseq-cluster-1/cqlseq-cassandra-node1", Host: "127.0.0.1:19042", Listen: "127.0.0.1"},
		{PID: 12, Dir: "/run/cqlseq-cluster-1/cqlseq-cassandra-node2", Host: "127.0.0.2:19042", Listen: "127.0.0.2"},
	}}
	require.NoError(t, WriteClusterState(p, c))
	got, err := ReadClusterState(p)
	require.NoError(t, err)
	require.Equal(t, c, got)
	require.Equal(t, []string{"127.0.0.1:19042", "127.0.0.2:19042"}, got.Hosts())
	_, err = got.Node(3)
	require.ErrorIs(t, err, ErrInvalidInstance)
	n2, err := got.Node(2)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.2", n2.listen())

	single := filepath.Join(dir, "s.json")
	require.NoError(t, WriteState(single, &Instance{PID: 1, Dir: "/run/cqlseq-cassandra-1", Host: "127.0.0.1:9042"}))
	_, err = ReadClusterState(single)
	require.True(t, errors.Is(err, ErrNotCluster), "%v", err)
}

func TestStartClusterRefusesBadSizes(t *testing.T) {
	o := fakeOptions(t)
	for _, n := range []int{0, MaxNodes + 1} {
		_, err := StartCluster(t.Context(), o, n, nil)
		require.ErrorIs(t, err, ErrInvalidOptions, "%d nodes", n)
	}
}

func TestStartClusterStopsWhatItStartedOnFailure(t *testing.T) {
	o := fakeOptions(t) // a JVM that dies at once
	o.RunDir = t.TempDir()
	var saved []*Cluster
	_, err := StartCluster(t.Context(), o, 3, func(c *Cluster) error { saved = append(saved, c); return nil })
	require.Error(t, err)
	require.Contains(t, err.Error(), "node 1")
	require.Empty(t, saved, "no node started")
	left, _ := filepath.Glob(filepath.Join(o.RunDir, "cqlseq-cluster-*"))
	require.Empty(t, left, "the run directory is removed")
}

func TestPortsFreeOnEveryAddress(t *testing.T) {
	ports, err := freePortsOn(3, 2)
	require.NoError(t, err)
	require.Len(t, ports, 2)
	require.True(t, portsFreeOn(3, ports))
}
