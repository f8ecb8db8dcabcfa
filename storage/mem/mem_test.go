package mem_test

import (
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/mem"
	"github.com/cqlseq/cqlseq/storage/storagetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is a settable clock shared by the stores of one harness.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) advance(_ testing.TB, d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func harness() storagetest.Harness {
	c := &clock{now: time.Unix(1_700_000_000, 0)}
	return storagetest.Harness{
		New:     func(testing.TB) storage.Storage { return mem.New(mem.Options{Now: c.Now}) },
		Advance: c.advance,
	}
}

func TestConformance(t *testing.T) { storagetest.Run(t, harness()) }

func BenchmarkMem(b *testing.B) { storagetest.RunBenchmarks(b, harness()) }
