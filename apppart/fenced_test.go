package apppart_test

import (
	"testing"

	"github.com/cqlseq/cqlseq/apppart/appparttest"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/storage"
)

// The two owners of a partition share the embedded store (one process per
// bbolt file); integration/fencing runs them on separate CQL sessions.

func TestFencedGroupCommit(t *testing.T) {
	drivers(t, func(t *testing.T, st storage.Storage, _ bool) {
		appparttest.FencedGroupCommit(t, st, 40, 8, 50)
	})
}

func TestFencedTakeover(t *testing.T) {
	drivers(t, func(t *testing.T, st storage.Storage, _ bool) {
		same := func(testing.TB) storage.Storage { return st }
		for i, at := range []string{"after-lease-check", "before-group-write", "after-group-write"} {
			t.Run(at, func(t *testing.T) { appparttest.FencedTakeover(t, same, 41+isequencer.PartitionID(i), at) })
		}
	})
}

func TestFencedHandOver(t *testing.T) {
	drivers(t, func(t *testing.T, st storage.Storage, _ bool) {
		appparttest.FencedHandOver(t, func(testing.TB) storage.Storage { return st }, 45)
	})
}

// TestPlannedHandOver: the procedure of docs/operations.md on each
// embedded driver (two owners on one store): nothing acknowledged is lost.
func TestPlannedHandOver(t *testing.T) {
	drivers(t, func(t *testing.T, st storage.Storage, _ bool) {
		h := appparttest.PlannedHandOver(t, func(testing.TB) storage.Storage { return st }, 300, 8)
		t.Log(h)
	})
}

func TestFencedLeaseExpired(t *testing.T) {
	drivers(t, func(t *testing.T, st storage.Storage, _ bool) {
		appparttest.FencedLeaseExpired(t, st, 46)
	})
}

func TestFencedSplitGroup(t *testing.T) {
	drivers(t, func(t *testing.T, st storage.Storage, _ bool) {
		appparttest.FencedSplitGroup(t, func(testing.TB) storage.Storage { return st }, 47)
	})
}

func TestGroupedRecordConflict(t *testing.T) {
	drivers(t, func(t *testing.T, st storage.Storage, _ bool) {
		appparttest.GroupedRecordConflict(t, st, 48)
	})
}
