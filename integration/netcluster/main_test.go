package netcluster_test

import (
	"os"
	"testing"

	"github.com/cqlseq/cqlseq/integration/itest"
)

// TestMain removes the CLI binary the faults test builds; the package starts
// its own containers, not the shared test cluster.
func TestMain(m *testing.M) { os.Exit(itest.MainLocal(m)) }
