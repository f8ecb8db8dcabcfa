// Package seqflow runs the application partition's command flow (apppart
// over seqstorage and plog) on the real test cluster: restart with tail
// replay, failed event writes, trust-level conflicts, a corrupt PLog tail,
// and the flow benchmarks against the raw PLog insert loop.
package seqflow

import (
	"os"
	"testing"

	"github.com/cqlseq/cqlseq/integration/itest"
	"github.com/cqlseq/cqlseq/storage/cql"
)

func TestMain(m *testing.M) { os.Exit(itest.Main(m)) }

// open opens a Store on the run's keyspace, closed at cleanup. Tests that
// share it use partitions of their own (appparttest derives workspaces
// from the partition).
func open(tb testing.TB) *cql.Store { return itest.OpenStore(tb) }
