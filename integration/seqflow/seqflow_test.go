package seqflow

import (
	"testing"

	"github.com/cqlseq/cqlseq/apppart/appparttest"
	"github.com/cqlseq/cqlseq/integration/itest"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
)

// Partition IDs: each test its own range in the shared keyspace.
const (
	partRestart  = 100
	partFailed   = 200
	partConflict = 300
	partCorrupt  = 400
	partModes    = 500
	partBench    = 1000
)

// TestRestartReplaysOnlyTail: 100,000 events across 1,000 workspaces at
// trust level 2 (about 2.5 min on one local node; -short: 10,000); the
// replay after a restart reads only the tail; numbers keep growing. Trust
// level 0 costs two lightweight transactions per event (about 3 ms on one
// node), which the other tests exercise.
func TestRestartReplaysOnlyTail(t *testing.T) {
	itest.NoLeaks(t)
	n := 100_000
	if testing.Short() {
		n = 10_000
	}
	appparttest.RestartReplaysOnlyTail(t, open(t), partRestart, plog.ModeTrust2, n, 1000)
}

func TestFailedWritesReuseNoNumber(t *testing.T) {
	itest.NoLeaks(t)
	st := open(t)
	for i, mode := range []plog.Mode{plog.ModeTrust0, plog.ModeTrust1, plog.ModeTrust2, plog.ModeFenced} {
		t.Run(mode.String(), func(t *testing.T) {
			appparttest.FailedWritesReuseNoNumber(t, st, partFailed+isequencer.PartitionID(i), mode, 1500)
		})
	}
}

func TestTrustLevelConflicts(t *testing.T) {
	itest.NoLeaks(t)
	appparttest.TrustLevelConflicts(t, open(t), partConflict)
}

func TestCorruptTailKeepsRetrying(t *testing.T) {
	itest.NoLeaks(t)
	appparttest.CorruptTailKeepsRetrying(t, open(t), partCorrupt)
}

// TestModeChangesReissueNoNumber: the partition opened in every order of
// modes on the real cluster never hands out a number twice.
func TestModeChangesReissueNoNumber(t *testing.T) {
	itest.NoLeaks(t)
	appparttest.ModeChangesReissueNoNumber(t, open(t), partModes)
}

// BenchmarkFlowCQL: the command flow at trust levels 0, 1, 2 on one and on
// four partitions, and the raw PLog insert loop, on the real cluster.
func BenchmarkFlowCQL(b *testing.B) {
	appparttest.SetBenchPartitionBase(partBench)
	appparttest.RunFlowBenchmarks(b, open(b))
}
