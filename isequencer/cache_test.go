package isequencer

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWSCacheEvictsLeastRecentlyUsed(t *testing.T) {
	c := newWSCache(3, 2)
	for ws := WSID(1); ws <= 3; ws++ {
		nums := c.add(ws, 1)
		nums[0], nums[1] = Number(ws), Number(10*ws)
	}
	_, _, ok := c.get(1) // 1 becomes most recent; 2 is now the oldest
	require.True(t, ok)
	c.add(4, 1)
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
	nums = c.add(3, 2)
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
		c.add(ws, 0)[0] = Number(ws)
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
		c.add(ws, 1)
	}
	ws := WSID(1)
	allocs := testing.AllocsPerRun(1000, func() {
		c.get(ws)
		ws = ws%100 + 1
	})
	assert.Zero(t, allocs)
}
