//go:build cqlseq_lru_hashicorp

package isequencer

import "github.com/hashicorp/golang-lru/v2/simplelru"

// wsCache, built with the tag cqlseq_lru_hashicorp, is the cache of
// cache.go over github.com/hashicorp/golang-lru/v2's simplelru.LRU, with
// one entry per workspace holding its numbers. It exists for the
// side-by-side measurement in cache.go's doc comment (run the isequencer
// benchmarks with -tags cqlseq_lru_hashicorp); the default build uses the
// index-linked wsCache. One goroutine owns it.
type wsCache struct {
	lru   *simplelru.LRU[WSID, lruEntry]
	width int
	free  [][]Number // numbers of evicted entries, reused by add
}

type lruEntry struct {
	nums []Number
	kind WSKind
}

// newWSCache returns a cache for maxWS workspaces of at most width sequences.
func newWSCache(maxWS, width int) *wsCache {
	c := &wsCache{width: max(width, 1)}
	// NewLRU fails only for a size < 1, which max excludes.
	c.lru, _ = simplelru.NewLRU(max(maxWS, 1), func(_ WSID, e lruEntry) { c.free = append(c.free, e.nums) })
	return c
}

// len returns the number of cached workspaces.
func (c *wsCache) len() int { return c.lru.Len() }

// get returns the numbers of ws and marks it most recently used. The slice
// stays valid until the next add or reset.
func (c *wsCache) get(ws WSID) (nums []Number, kind WSKind, ok bool) {
	e, ok := c.lru.Get(ws)
	return e.nums, e.kind, ok
}

// add makes ws the most recently used entry with the given kind, evicting
// the least recently used workspace when full, and returns its numbers,
// zeroed.
func (c *wsCache) add(ws WSID, kind WSKind) []Number {
	var nums []Number
	if e, ok := c.lru.Peek(ws); ok {
		nums = e.nums
	} else if n := len(c.free); n > 0 {
		nums, c.free = c.free[n-1], c.free[:n-1]
	} else {
		nums = make([]Number, c.width)
	}
	clear(nums)
	c.lru.Add(ws, lruEntry{nums: nums, kind: kind})
	return nums
}

// remove drops ws, if cached; its numbers' memory is kept for reuse.
func (c *wsCache) remove(ws WSID) { c.lru.Remove(ws) }

// reset empties the cache, keeping the numbers' memory for reuse.
func (c *wsCache) reset() { c.lru.Purge() }
