package elections

import (
	"testing"
	"time"

	"github.com/cqlseq/cqlseq/elections/electionstest"
	"github.com/cqlseq/cqlseq/storage"
)

// TestSuiteCQL runs the elections suite on storage/cql. Time is real: a
// 3 s lease with a 1.5 s skew (CQL counts TTLs from the whole second) is
// held 1.5 s after each write began and renewed every 0.5 s.
func TestSuiteCQL(t *testing.T) {
	electionstest.Run(t, electionstest.Harness{
		New:     func(t testing.TB) storage.Storage { return open(t) },
		Advance: func(_ testing.TB, d time.Duration) { time.Sleep(d) },
		Lease:   3 * time.Second,
		Skew:    1500 * time.Millisecond,
	})
}
