// Package grayfailure runs cqlseq's storage and elections against a
// replicated cluster with one node paused (SIGSTOP: alive to TCP, silent to
// requests, like a long GC pause). It needs a cluster started by
// cassandra-launcher up -nodes 3 (its state file in CQLSEQ_CLUSTER_STATE,
// its hosts in CQLSEQ_CQL_HOSTS) and CQLSEQ_CQL_RF=3; make gray-check runs
// it. Without a cluster state file every test skips.
package grayfailure

import (
	"os"
	"testing"
	"time"

	"github.com/cqlseq/cqlseq/integration/itest"
	"github.com/cqlseq/cqlseq/testenv/cassandra"
)

// TestMain finds no cluster of its own without CQLSEQ_CLUSTER_STATE: every
// test skips then, and starting one (a container, a node) would be wasted.
func TestMain(m *testing.M) {
	if os.Getenv("CQLSEQ_CLUSTER_STATE") == "" {
		os.Exit(m.Run())
	}
	os.Exit(itest.Main(m))
}

// cluster returns the test cluster's nodes, or skips t.
func cluster(t *testing.T) *cassandra.Cluster {
	t.Helper()
	path := os.Getenv("CQLSEQ_CLUSTER_STATE")
	if path == "" {
		t.Skip("needs a 3-node cluster: CQLSEQ_CLUSTER_STATE (make gray-check)")
	}
	c, err := cassandra.ReadClusterState(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Nodes) < 3 {
		t.Fatalf("cluster %s has %d nodes: want 3", path, len(c.Nodes))
	}
	return c
}

// pause SIGSTOPs node i (1-based) of c; it is resumed at t's cleanup, also
// when the test fails, or by the returned func (once).
func pause(t *testing.T, c *cassandra.Cluster, i int) (resume func()) {
	t.Helper()
	if err := cassandra.PauseNode(c, i); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	done := false
	resume = func() {
		if done {
			return
		}
		done = true
		if err := cassandra.ResumeNode(c, i); err != nil {
			t.Errorf("resuming node %d: %v", i, err)
		}
		t.Logf("node %d paused for %.1f s", i, time.Since(paused).Seconds())
	}
	t.Cleanup(resume)
	return resume
}
