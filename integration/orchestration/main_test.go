// Package orchestration runs orchestration hosts whose service owns the
// slot's partitions in fenced mode, on the real test cluster: the slot and
// its partitions pass from one host to another.
package orchestration

import (
	"os"
	"testing"

	"github.com/cqlseq/cqlseq/apppart/appparttest"
	"github.com/cqlseq/cqlseq/integration/itest"
	"github.com/cqlseq/cqlseq/storage/cql"
)

func TestMain(m *testing.M) { os.Exit(itest.Main(m)) }

// open opens a Store (its own session) on the run's keyspace, closed at
// cleanup.
func open(tb testing.TB) *cql.Store {
	return itest.OpenStore(tb, func(o *cql.Options) { o.Logger = appparttest.Quiet() })
}
