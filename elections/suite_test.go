package elections_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"go.uber.org/goleak"

	"github.com/cqlseq/cqlseq/elections/electionstest"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/boltdb"
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

// TestSuiteBolt runs the suite on storage/boltdb, one file per storage,
// with the fake clock for the file's TTLs.
func TestSuiteBolt(t *testing.T) {
	clock := electionstest.NewFakeClock(time.Unix(1_750_000_000, 0))
	electionstest.Run(t, electionstest.Harness{
		New: func(t testing.TB) storage.Storage {
			st, err := boltdb.Open(filepath.Join(t.TempDir(), "elections.db"), boltdb.Options{Now: clock.Now, NoSync: true, ReclaimInterval: -1})
			require.NoError(t, err)
			return st
		},
		Advance: func(_ testing.TB, d time.Duration) { clock.Advance(d) },
		Clock:   clock,
	})
}
