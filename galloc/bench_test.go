package galloc_test

import (
	"context"
	"testing"

	"github.com/cqlseq/cqlseq/galloc"
	"github.com/cqlseq/cqlseq/storage/mem"
)

// benchNext measures steady-state Next with chunks of 1<<24 values fetched
// in the background at half use; it reports IDs/s, the chunk fetches and
// how many calls had to wait for a chunk (0 when prefetch keeps up).
func benchNext(b *testing.B, parallel bool) {
	s, err := galloc.Open(context.Background(), mem.New(mem.Options{}), "bench", galloc.Options{ChunkSize: 1 << 24})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Next(ctx); err != nil { // the first chunk
		b.Fatal(err)
	}
	before := s.Stats()
	b.ResetTimer()
	if parallel {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := s.Next(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
	} else {
		for range b.N {
			if _, err := s.Next(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	after := s.Stats()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "IDs/s")
	b.ReportMetric(float64(after.Waits-before.Waits), "waits")
	b.ReportMetric(float64(after.Fetches-before.Fetches), "fetches")
}

func BenchmarkNext(b *testing.B)         { benchNext(b, false) }
func BenchmarkNextParallel(b *testing.B) { benchNext(b, true) }
