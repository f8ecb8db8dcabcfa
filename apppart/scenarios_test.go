package apppart_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/apppart/appparttest"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/boltdb"
	"github.com/cqlseq/cqlseq/storage/mem"
)

// drivers runs f on each embedded driver, on a fresh store.
func drivers(t *testing.T, f func(t *testing.T, st storage.Storage, bolt bool)) {
	t.Run("mem", func(t *testing.T) {
		st := mem.New(mem.Options{})
		t.Cleanup(func() { _ = st.Close() })
		f(t, st, false)
	})
	t.Run("bbolt", func(t *testing.T) {
		st, err := boltdb.Open(filepath.Join(t.TempDir(), "part.db"), boltdb.Options{NoSync: true})
		require.NoError(t, err)
		t.Cleanup(func() { _ = st.Close() })
		f(t, st, true)
	})
}

// TestRestartReplaysOnlyTail: 100,000 events across 1,000 workspaces
// (-short, or bbolt under -race: 20,000).
func TestRestartReplaysOnlyTail(t *testing.T) {
	drivers(t, func(t *testing.T, st storage.Storage, bolt bool) {
		n := 100_000
		if testing.Short() || (bolt && raceEnabled) {
			n = 20_000
		}
		appparttest.RestartReplaysOnlyTail(t, st, 2, plog.ModeTrust0, n, 1000)
	})
}

func TestFailedWritesReuseNoNumber(t *testing.T) {
	drivers(t, func(t *testing.T, st storage.Storage, _ bool) {
		for _, mode := range []plog.Mode{plog.ModeTrust0, plog.ModeTrust2} {
			t.Run(mode.String(), func(t *testing.T) {
				appparttest.FailedWritesReuseNoNumber(t, st, 10+isequencer.PartitionID(mode), mode, 3000, false)
			})
			t.Run(mode.String()+"/grouped", func(t *testing.T) {
				appparttest.FailedWritesReuseNoNumber(t, st, 50+isequencer.PartitionID(mode), mode, 3000, true)
			})
		}
	})
}

func TestTrustLevelConflicts(t *testing.T) {
	drivers(t, func(t *testing.T, st storage.Storage, _ bool) {
		appparttest.TrustLevelConflicts(t, st, 20, false)
	})
}

func TestTrustLevelConflictsGrouped(t *testing.T) {
	drivers(t, func(t *testing.T, st storage.Storage, _ bool) {
		appparttest.TrustLevelConflicts(t, st, 60, true)
	})
}

func TestCorruptTailKeepsRetrying(t *testing.T) {
	drivers(t, func(t *testing.T, st storage.Storage, _ bool) {
		appparttest.CorruptTailKeepsRetrying(t, st, 30)
	})
}

// TestModeChangesReissueNoNumber: a partition opened in every order of
// modes never hands out a number twice (issue 14: a trust-mode open after
// fenced use read only the seed cells and issued numbers again).
func TestModeChangesReissueNoNumber(t *testing.T) {
	drivers(t, func(t *testing.T, st storage.Storage, _ bool) {
		appparttest.ModeChangesReissueNoNumber(t, st, 40)
	})
}
