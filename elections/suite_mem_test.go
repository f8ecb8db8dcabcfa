package elections_test

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cqlseq/cqlseq/elections/electionstest"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/mem"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// memHarness runs the suite on storage/mem with one fake clock for the
// store's TTLs and the elections.
func memHarness() (electionstest.Harness, *electionstest.FakeClock) {
	clock := electionstest.NewFakeClock(time.Unix(1_750_000_000, 0))
	return electionstest.Harness{
		New:     func(testing.TB) storage.Storage { return mem.New(mem.Options{Now: clock.Now}) },
		Advance: func(_ testing.TB, d time.Duration) { clock.Advance(d) },
		Clock:   clock,
	}, clock
}

func TestSuiteMem(t *testing.T) {
	h, _ := memHarness()
	electionstest.Run(t, h)
}
