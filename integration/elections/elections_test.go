package elections

import (
	"testing"
	"time"

	"github.com/cqlseq/cqlseq/elections/electionstest"
	"github.com/cqlseq/cqlseq/storage"
)

// TestSuiteCQL runs the elections suite on storage/cql. Time is real: a
// 6 s lease with a 3 s skew is held 3 s after each write began and renewed
// every second. The margins are for a busy 2-core machine: a renewal may
// take 2 s before the lease is lost, and a lost lease stays taken in the
// store for 2 s more (CQL counts TTLs from the whole second, 1 s of the
// skew) while the suite checks that nobody else gets it.
func TestSuiteCQL(t *testing.T) {
	electionstest.Run(t, electionstest.Harness{
		New:     func(t testing.TB) storage.Storage { return open(t) },
		Advance: func(_ testing.TB, d time.Duration) { time.Sleep(d) },
		Lease:   6 * time.Second,
		Skew:    3 * time.Second,
	})
}
