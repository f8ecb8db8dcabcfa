package isequencer

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWSCacheEvictsLeastRecentlyUsed(t *testing.T) {
	c := newWSCache(3, 2)
	for ws := WSID(1); ws <= 3; ws++ {
		nums := c.add(ws, 1, 0)
		nums[0], nums[1] = Number(ws), Number(10*ws)
	}
	_, _, ok := c.get(1) // 1 becomes most recent; 2 is now the oldest
	require.True(t, ok)
	c.add(4, 1, 0)
	_, _, ok = c.get(2)
	assert.False(t, ok, "2 was least recently used")
	for _, ws := range []WSID{1, 3, 4} {
		_, _, ok := c.get(ws)
		assert.True(t, ok, "ws %d", ws)
	}
	nums, kind, ok := c.get(3)
	require.True(t, ok)
	assert.Equal(t, []Number{3, 30}, nums)
	assert.Equal(t, WSKind(1), kind)
	assert.Equal(t, 3, c.len())

	// Re-adding a cached workspace (another kind) reuses its slot, zeroed.
	nums = c.add(3, 2, 0)
	assert.Equal(t, []Number{0, 0}, nums)
	assert.Equal(t, 3, c.len())
	_, kind, _ = c.get(3)
	assert.Equal(t, WSKind(2), kind)

	c.reset()
	assert.Equal(t, 0, c.len())
	_, _, ok = c.get(1)
	assert.False(t, ok)
}

func TestWSCacheRecencyUnderChurn(t *testing.T) {
	const size = 50
	c := newWSCache(size, 1)
	for ws := WSID(1); ws <= 10_000; ws++ {
		c.add(ws, 0, 0)[0] = Number(ws)
		if ws%7 == 0 { // touch an older entry still inside the window
			if old := ws - size/2; old > 0 {
				if nums, _, ok := c.get(old); ok {
					require.Equal(t, Number(old), nums[0])
				}
			}
		}
		require.LessOrEqual(t, c.len(), size)
	}
	for ws := WSID(10_000 - size/2 + 1); ws <= 10_000; ws++ {
		nums, _, ok := c.get(ws)
		require.True(t, ok, "recent ws %d", ws)
		require.Equal(t, Number(ws), nums[0])
	}
}

func TestWSCacheHitDoesNotAllocate(t *testing.T) {
	c := newWSCache(100, 3)
	for ws := WSID(1); ws <= 100; ws++ {
		c.add(ws, 1, 0)
	}
	ws := WSID(1)
	allocs := testing.AllocsPerRun(1000, func() {
		c.get(ws)
		ws = ws%100 + 1
	})
	assert.Zero(t, allocs)
}

// TestWSCacheKeepsRingPositions: a workspace that leaves the cache (evicted
// or removed) while its last values may wait in the ring (position above
// the head passed) keeps its position until added again; one whose values
// are written (position at or below the head) keeps none.
func TestWSCacheKeepsRingPositions(t *testing.T) {
	c := newWSCache(2, 1)
	c.add(1, 1, 0)
	c.markLast(10)
	c.add(2, 1, 0)
	c.markLast(20)
	c.add(3, 1, 15) // evicts 1 (position 10, written: head 15)
	assert.Zero(t, c.pending(1))
	c.add(4, 1, 15) // evicts 2 (position 20, waiting)
	assert.Equal(t, uint64(20), c.pending(2))

	nums := c.add(2, 1, 15) // 2 comes back with its position; evicts 3 (none)
	assert.Equal(t, []Number{0}, nums)
	assert.Zero(t, c.pending(2), "a cached workspace has no kept position")
	assert.Zero(t, c.pending(3))
	c.remove(2, 15)
	assert.Equal(t, uint64(20), c.pending(2), "the position came back with it")

	c.add(5, 1, 15)
	c.markLast(30)
	c.remove(5, 30)
	assert.Zero(t, c.pending(5), "written by the time it left")
	c.reset()
	assert.Zero(t, c.pending(2), "reset forgets positions: the ring restarts")
}

func TestGoneSetPrunesWrittenPositions(t *testing.T) {
	var g goneSet
	for ws := WSID(1); ws <= 5000; ws++ {
		g.keep(ws, uint64(ws), uint64(ws)-1) // each waits when kept
	}
	// Each prune drops what the head (ws-1 at the time) has passed.
	assert.Less(t, len(g.pos), 1100, "the set stays near its prune threshold")
	assert.Equal(t, uint64(5000), g.take(5000))
	assert.Zero(t, g.take(5000))
	g.keep(7, 3, 3)
	assert.Zero(t, g.pos[7], "a written position is not kept")
}
