package fencing

import (
	"testing"

	"github.com/cqlseq/cqlseq/apppart/appparttest"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/storage"
)

// The partitions of the apppart-level fenced scenarios: above plogtest's.
const appPartBase isequencer.PartitionID = 5000

func newStore(t testing.TB) storage.Storage { return open(t) }

// TestFencedGroupCommitCQL: concurrent commands share conditional batches
// on the real cluster; a reopen continues above every number.
func TestFencedGroupCommitCQL(t *testing.T) {
	appparttest.FencedGroupCommit(t, open(t), appPartBase, 8, 40)
}

// TestFencedTakeoverCQL: two owners on separate sessions; the first is
// paused at each dangerous point while the second takes over.
func TestFencedTakeoverCQL(t *testing.T) {
	for i, at := range []string{"after-lease-check", "before-group-write", "after-group-write"} {
		t.Run(at, func(t *testing.T) {
			appparttest.FencedTakeover(t, newStore, appPartBase+1+isequencer.PartitionID(i), at)
		})
	}
}

// TestFencedHandOverCQL: ownership moves between two sessions ten times.
func TestFencedHandOverCQL(t *testing.T) {
	appparttest.FencedHandOver(t, newStore, appPartBase+10)
}

// TestFencedSplitGroupCQL: a takeover between two chunks of one group
// write; the commands of the stored chunk succeed, the rest fail as fenced.
func TestFencedSplitGroupCQL(t *testing.T) {
	appparttest.FencedSplitGroup(t, newStore, appPartBase+11)
}

// TestPlannedHandOverCQL: docs/operations.md's planned hand-over on the
// real cluster, two sessions (processes' stand-ins), 8 clients moving from
// the deposed owner to the new one; nothing acknowledged is lost, the old
// owner's unknown outcomes are settled by the new one. It logs the
// take-over time and the clients' gap.
func TestPlannedHandOverCQL(t *testing.T) {
	h := appparttest.PlannedHandOver(t, newStore, appPartBase+20, 8)
	t.Logf("planned hand-over: %v", h)
}

// BenchmarkFencingCQL: fenced mode against trust levels 0 and 2 under the
// same load (appparttest.FencingClients clients per partition).
func BenchmarkFencingCQL(b *testing.B) {
	appparttest.SetBenchPartitionBase(appPartBase + 100)
	appparttest.RunFencingBenchmarks(b, open(b))
}
