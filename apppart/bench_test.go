package apppart_test

import (
	"path/filepath"
	"testing"

	"github.com/cqlseq/cqlseq/apppart/appparttest"
	"github.com/cqlseq/cqlseq/storage/boltdb"
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
