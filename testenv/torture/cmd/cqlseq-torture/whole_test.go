package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/testenv/cassandra"
)

func TestWaitUntilRetriesUntilTheCheckPasses(t *testing.T) {
	calls := 0
	err := waitUntil(context.Background(), time.Minute, time.Millisecond, func(context.Context) error {
		if calls++; calls < 3 {
			return errors.New("node 3 is DOWN")
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 3, calls)
}

// The wait is bounded and says what was still wrong.
func TestWaitUntilFailsAfterTheLimitWithTheLastError(t *testing.T) {
	began := time.Now()
	err := waitUntil(context.Background(), 200*time.Millisecond, 10*time.Millisecond, func(context.Context) error {
		return errors.New("2 of 3 nodes NORMAL in gossip")
	})
	require.ErrorContains(t, err, "not within 200ms: 2 of 3 nodes NORMAL in gossip")
	require.Less(t, time.Since(began), 5*time.Second)
}

func TestWaitUntilEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := waitUntil(ctx, time.Minute, time.Millisecond, func(context.Context) error { return errors.New("down") })
	require.ErrorIs(t, err, context.Canceled)
}

// A node whose process is gone fails the wait at once: nothing restarts it.
func TestNodesRunningNamesTheNodeThatIsNotRunning(t *testing.T) {
	c := &cassandra.Cluster{Nodes: []*cassandra.Instance{{PID: 1 << 30, Host: "127.0.0.1:9042"}}}
	require.ErrorContains(t, nodesRunning(c), "node 1 (127.0.0.1:9042, pid 1073741824) is not running")
}

// verify runs on a whole cluster only: with a node down it fails before it
// runs cqlseq verify (whose LOCAL_QUORUM reads a node still rejoining may
// refuse), and says why.
func TestVerifyWaitsForAWholeCluster(t *testing.T) {
	tr := &tort{
		c:       config{cqlseq: "/nonexistent/cqlseq", dir: t.TempDir(), wholeTimeout: time.Second},
		cluster: &cassandra.Cluster{Nodes: []*cassandra.Instance{{PID: 1 << 30, Host: "127.0.0.3:9042"}}},
	}
	var r row
	err := tr.verify(context.Background(), "ks", "acks.log", 1, &r)
	require.ErrorContains(t, err, "verify ks: the cluster is not whole before the phase: node 1 (127.0.0.3:9042, pid 1073741824) is not running")
}
