// Package orchestration runs orchestration hosts whose service owns the
// slot's partitions in fenced mode, on the real test cluster: the slot and
// its partitions pass from one host to another.
package orchestration

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/cqlseq/cqlseq/apppart/appparttest"
	"github.com/cqlseq/cqlseq/integration/itest"
	"github.com/cqlseq/cqlseq/storage/cql"
)

func TestMain(m *testing.M) { os.Exit(itest.Main(m)) }

// open opens a Store (its own session) on the run's keyspace, closed at
// cleanup.
func open(tb testing.TB) *cql.Store {
	tb.Helper()
	hosts := itest.Hosts()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := cql.Open(ctx, cql.Options{
		Hosts:                    hosts,
		Keyspace:                 itest.Keyspace(),
		DisableInitialHostLookup: len(hosts) == 1,
		Timeout:                  10 * time.Second,
		Logger:                   appparttest.Quiet(),
	})
	if err != nil {
		tb.Fatalf("cql.Open: %v", err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	return st
}
