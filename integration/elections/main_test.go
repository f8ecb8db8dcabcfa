// Package elections runs the elections suite and the orchestration host
// against the real test cluster, in real time (leases of a few seconds).
package elections

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/cqlseq/cqlseq/integration/itest"
	"github.com/cqlseq/cqlseq/storage/cql"
)

func TestMain(m *testing.M) { os.Exit(itest.Main(m)) }

// open opens a Store on the run's keyspace, closed at the test's cleanup.
func open(t testing.TB) *cql.Store {
	t.Helper()
	hosts := itest.Hosts()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := cql.Open(ctx, cql.Options{
		Hosts:                    hosts,
		Keyspace:                 itest.Keyspace(),
		DisableInitialHostLookup: len(hosts) == 1,
		Timeout:                  10 * time.Second,
	})
	if err != nil {
		t.Fatalf("cql.Open: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}
