package apppart_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/cqlseq/cqlseq/apppart/appparttest"
	"github.com/cqlseq/cqlseq/storage/boltdb"
	"github.com/cqlseq/cqlseq/storage/mem"
)

// BenchmarkFlowBBolt runs the flow benchmarks on one bbolt file with
// fsync on (the embedded mode as deployed).
func BenchmarkFlowBBolt(b *testing.B) {
	st, err := boltdb.Open(filepath.Join(b.TempDir(), "bench.db"), boltdb.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	appparttest.RunFlowBenchmarks(b, st)
}

// BenchmarkGroupCommitBBolt runs every mode writing in groups on one bbolt
// file with fsync on, 4 partitions x 16 clients, and the raw grouped
// commit ceiling of the same bytes.
func BenchmarkGroupCommitBBolt(b *testing.B) {
	st, err := boltdb.Open(filepath.Join(b.TempDir(), "bench.db"), boltdb.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	appparttest.RunGroupCommitBenchmarks(b, st)
}

// BenchmarkFlowDelayed runs the flow over an in-memory store whose every
// call takes 5 ms and which offers no optional capability (a remote
// store's round trip, as CQL's), 1 partition x 16 clients (and 64, 128,
// 256: .../<clients>), every mode, with a warm and a cold cache
// (appparttest.RunDelayedFlowBenchmarks).
func BenchmarkFlowDelayed(b *testing.B) {
	appparttest.RunDelayedFlowBenchmarks(b, mem.New(mem.Options{}), 5*time.Millisecond)
}
