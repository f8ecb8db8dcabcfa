package ksuuid_test

import (
	"testing"

	"github.com/cqlseq/cqlseq/ksuuid"
)

func BenchmarkNew(b *testing.B) {
	for range b.N {
		if _, err := ksuuid.New(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "IDs/s")
}
