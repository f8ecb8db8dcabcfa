// Package fencing runs the fenced write mode (plog.FencedWriter, plog.Sweep,
// vvmadapter epochs and per-epoch numbers) on the real test cluster, with
// the scenarios of plog/plogtest; the races use one session per party.
package fencing

import (
	"os"
	"testing"

	"github.com/cqlseq/cqlseq/integration/itest"
	"github.com/cqlseq/cqlseq/storage/cql"
)

func TestMain(m *testing.M) { os.Exit(itest.Main(m)) }

// open opens a Store (its own session) on the run's keyspace, closed at
// cleanup. Tests sharing the keyspace use partitions of their own.
func open(tb testing.TB) *cql.Store { return itest.OpenStore(tb) }
