// Package restart crashes and restarts a Cassandra node under a fenced
// owner and checks what its lease and its partition do. It never touches the
// shared test cluster's node: each test starts a private single-node
// Cassandra with testenv/cassandra (crash-safe: a crash loses no
// acknowledged write and no schema change), crashes it with
// cassandra.Restart and stops it at cleanup. TestMain still goes through itest.Main, which keeps
// the harness's rules (CI=true needs a cluster).
package restart

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cqlseq/cqlseq/integration/itest"
	"github.com/cqlseq/cqlseq/storage/cql"
	"github.com/cqlseq/cqlseq/testenv/cassandra"
)

func TestMain(m *testing.M) { os.Exit(itest.Main(m)) }

// node is a private Cassandra and the keyspace with cqlseq's schema on it.
type node struct {
	inst     *cassandra.Instance
	opts     cassandra.Options
	keyspace string
}

// startNode starts a private Cassandra, stopped at cleanup. Without Java
// (or Maven and no cached jars) it skips, unless CI=true.
func startNode(t *testing.T) *node {
	t.Helper()
	o := cassandra.Options{CrashSafe: true, StartTimeout: 2 * time.Minute}
	inst := itest.StartNode(t, o, 5*time.Minute)
	return &node{inst: inst, opts: o, keyspace: itest.PrivateKeyspace(t, inst, "cqlseq_rs_")}
}

// restart crashes the node, keeps it down for down and starts it again;
// it returns when CQL answers, with the time of the crash (the SIGKILL).
func (n *node) restart(t *testing.T, down time.Duration) (crashed time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	o := n.opts
	o.Log = func(format string, _ ...any) {
		if strings.HasPrefix(format, "crashed ") {
			crashed = time.Now()
		}
	}
	if err := cassandra.Restart(ctx, n.inst, o, down); err != nil {
		t.Fatalf("restarting the private Cassandra: %v", err)
	}
	if crashed.IsZero() {
		t.Fatal("Restart found no running node to crash")
	}
	return crashed
}

// open opens a Store (its own session) on the node's keyspace, closed at
// cleanup.
func (n *node) open(t testing.TB) *cql.Store {
	t.Helper()
	st := itest.OpenPrivate(t, n.inst, n.keyspace, 5*time.Second)
	t.Cleanup(func() { _ = st.Close() })
	return st
}
