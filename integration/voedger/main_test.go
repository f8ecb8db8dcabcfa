// Package voedger runs the Voedger PLog golden suite (plog/voedger/
// voedgertest) on the real test cluster: Voedger's own PLog rows in one
// keyspace, the sequence rows in another, as in a Voedger deployment (the
// application's keyspace and the VVM's).
package voedger

import (
	"os"
	"testing"

	"github.com/cqlseq/cqlseq/integration/itest"
)

func TestMain(m *testing.M) { os.Exit(itest.Main(m)) }
