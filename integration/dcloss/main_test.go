// Package dcloss loses a data centre under an owner and checks what the
// survivor holds, executing docs/operations.md's "Losing a datacenter" on
// private two-node clusters of testenv/cassandra, one node per data centre
// (dc1 on 127.0.0.1, dc2 on 127.0.0.2; GossipingPropertyFileSnitch) and a
// keyspace replicated once in each (NetworkTopologyStrategy). A data
// centre is "lost" by SIGKILL to its node, never restarted. Each test
// starts its own cluster and stops it at cleanup; TestMain does not start
// the shared test cluster (itest.MainLocal): nothing here uses it. Without
// Java the tests skip, unless CI=true.
package dcloss

import (
	"os"
	"testing"

	"github.com/cqlseq/cqlseq/integration/itest"
)

func TestMain(m *testing.M) { os.Exit(itest.MainLocal(m)) }
