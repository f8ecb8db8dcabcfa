package fencing

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/integration/itest"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog/plogtest"
	"github.com/cqlseq/cqlseq/seqstorage"
	"github.com/cqlseq/cqlseq/storage/cql"
)

// nextPart hands out partition IDs: each test (and each -count
// repetition, which reuses the run's keyspace) gets fresh partitions.
var nextPart atomic.Uint32

func init() { nextPart.Store(100) }

// parts returns n fresh partition IDs.
func parts(n int) []isequencer.PartitionID {
	last := nextPart.Add(uint32(n))
	out := make([]isequencer.PartitionID, n)
	for i := range out {
		out[i] = isequencer.PartitionID(last - uint32(n) + uint32(i))
	}
	return out
}

func part() isequencer.PartitionID { return parts(1)[0] }

const raceRounds = 5

func TestBlockBoundary(t *testing.T) {
	itest.NoLeaks(t)
	plogtest.BlockBoundary(t, open(t), part())
}

func TestGroupCaps(t *testing.T) {
	itest.NoLeaks(t)
	plogtest.GroupCaps(t, open(t), part())
}

func TestLargeGroups(t *testing.T) {
	itest.NoLeaks(t)
	plogtest.LargeGroups(t, open(t), part())
}

func TestSecondOwner(t *testing.T) {
	itest.NoLeaks(t)
	plogtest.SecondOwner(t, open(t), part())
}

func TestPlantedConflict(t *testing.T) {
	itest.NoLeaks(t)
	plogtest.PlantedConflict(t, open(t), part())
}

// TestSplitGroupTakeover: a sweep between two chunks of one group; the
// writer reports the stored prefix.
func TestSplitGroupTakeover(t *testing.T) {
	itest.NoLeaks(t)
	plogtest.SplitGroupTakeover(t, open(t), part())
}

func TestRecordsAfterEvents(t *testing.T) {
	itest.NoLeaks(t)
	plogtest.RecordsAfterEvents(t, open(t), part())
}

func TestFenceNotReadAsEvent(t *testing.T) {
	itest.NoLeaks(t)
	plogtest.FenceNotReadAsEvent(t, open(t), part())
}

// TestRaceFreshBlock: two writers and a sweep, each on its own session,
// race for a fresh partition's first block.
func TestRaceFreshBlock(t *testing.T) {
	itest.NoLeaks(t)
	a, b, s := open(t), open(t), open(t)
	for _, p := range parts(raceRounds) {
		plogtest.RaceFreshBlock(t, a, b, s, p)
	}
}

// TestRaceTakeover: owner A writes on its session while B takes over on
// another.
func TestRaceTakeover(t *testing.T) {
	itest.NoLeaks(t)
	a, b := open(t), open(t)
	for _, p := range parts(raceRounds) {
		plogtest.RaceTakeover(t, a, b, p, 10)
	}
}

// TestLateNumbersCannotLower: on the cluster, a deposed owner's late flush
// of smaller numbers does not lower what the next owner reads.
func TestLateNumbersCannotLower(t *testing.T) {
	itest.NoLeaks(t)
	stA, stB := open(t), open(t)
	p := part()
	newStorage := func(st *cql.Store) *seqstorage.Storage {
		own, err := seqstorage.TakeOver(context.Background(), seqstorage.TakeOverOptions{Storage: st, App: plogtest.App, Partition: p})
		require.NoError(t, err)
		s, err := seqstorage.New(seqstorage.Options{Storage: st, App: plogtest.App, Partition: p, Owner: own.Owner})
		require.NoError(t, err)
		return s
	}
	a, b := newStorage(stA), newStorage(stB)
	key := isequencer.NumberKey{WSID: 1, SeqID: 1}
	require.NoError(t, a.WriteValuesAndNextPLogOffset([]isequencer.SeqValue{{Key: key, Value: 100}}, 10))
	require.NoError(t, b.WriteValuesAndNextPLogOffset([]isequencer.SeqValue{{Key: key, Value: 150}}, 20))
	require.NoError(t, a.WriteValuesAndNextPLogOffset([]isequencer.SeqValue{{Key: key, Value: 90}}, 5))
	nums, err := b.ReadNumbers(1, []isequencer.SeqID{1})
	require.NoError(t, err)
	assert.Equal(t, []isequencer.Number{150}, nums)
	off, err := b.ReadNextPLogOffset()
	require.NoError(t, err)
	assert.Equal(t, isequencer.PLogOffset(20), off, "the deposed owner's late offset write replaced the next owner's")
}
