package timeshard_test

import (
	"context"
	"testing"

	"github.com/cqlseq/cqlseq/storage/mem"
	"github.com/cqlseq/cqlseq/timeshard"
)

// BenchmarkNext drives one node of the default layout (4,096 IDs per
// millisecond) on the real clock as fast as it goes, so the counter runs
// out every millisecond. It checks that every ID is larger than the one
// before (hence no duplicate) and reports IDs/ms and the largest number of
// IDs made in one millisecond.
func BenchmarkNext(b *testing.B) {
	g, err := timeshard.Open(context.Background(), mem.New(mem.Options{}), "bench", timeshard.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	l := g.Layout()
	ctx := context.Background()
	prev, err := g.Next(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var maxPerMs uint64
	b.ResetTimer()
	for range b.N {
		id, err := g.Next(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if id <= prev {
			b.Fatalf("ID %d after %d: not increasing", id, prev)
		}
		maxPerMs = max(maxPerMs, l.Counter(id)+1)
		prev = id
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/float64(b.Elapsed().Milliseconds()+1), "IDs/ms")
	b.ReportMetric(float64(maxPerMs), "max-IDs/ms")
}

// BenchmarkNextWideCounter is BenchmarkNext with 2^20 IDs per millisecond:
// the generator's own cost, without counter waits.
func BenchmarkNextWideCounter(b *testing.B) {
	l := timeshard.DefaultLayout()
	l.TimeBits, l.NodeBits, l.CounterBits = 41, 2, 20
	g, err := timeshard.Open(context.Background(), mem.New(mem.Options{}), "bench", timeshard.Options{Layout: l})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	ctx := context.Background()
	if _, err := g.Next(ctx); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := g.Next(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/float64(b.Elapsed().Milliseconds()+1), "IDs/ms")
}

// BenchmarkNextN is BenchmarkNext in batches of 1,000 IDs (the ID
// service's largest common request): one lock, clock read and lease check
// per millisecond's run instead of per ID. The 4,096 IDs a millisecond of
// the default layout bound it at 4.1 M IDs/s per node.
func BenchmarkNextN(b *testing.B) {
	g, err := timeshard.Open(context.Background(), mem.New(mem.Options{}), "bench", timeshard.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	ctx := context.Background()
	buf := make([]int64, 0, 1000)
	prev, err := g.Next(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		ids, err := g.NextN(ctx, buf[:0], 1000)
		if err != nil {
			b.Fatal(err)
		}
		for _, id := range ids {
			if id <= prev {
				b.Fatalf("ID %d after %d: not increasing", id, prev)
			}
			prev = id
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)*1000/float64(b.Elapsed().Milliseconds()+1), "IDs/ms")
}
