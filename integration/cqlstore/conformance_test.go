package cqlstore

import (
	"testing"
	"time"

	"github.com/cqlseq/cqlseq/integration/itest"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/storagetest"
)

// harness opens Stores on the run's keyspace; a real cluster's clock only
// moves by sleeping.
func harness() storagetest.Harness {
	return storagetest.Harness{
		New:     func(t testing.TB) storage.Storage { return open(t, itest.Keyspace()) },
		Advance: func(_ testing.TB, d time.Duration) { time.Sleep(d) },
	}
}

func TestConformance(t *testing.T) { storagetest.Run(t, harness()) }

func BenchmarkCQL(b *testing.B) { storagetest.RunBenchmarks(b, harness()) }
