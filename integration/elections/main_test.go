// Package elections runs the elections suite and the orchestration host
// against the real test cluster, in real time (leases of a few seconds).
package elections

import (
	"os"
	"testing"

	"github.com/cqlseq/cqlseq/integration/itest"
	"github.com/cqlseq/cqlseq/storage/cql"
)

func TestMain(m *testing.M) { os.Exit(itest.Main(m)) }

// open opens a Store on the run's keyspace, closed at the test's cleanup.
func open(t testing.TB) *cql.Store { return itest.OpenStore(t) }
