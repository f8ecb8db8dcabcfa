//go:build cqlseq_lru_hashicorp

package isequencer

import "github.com/hashicorp/golang-lru/v2/simplelru"

// wsCache, built with the tag cqlseq_lru_hashicorp, is the cache of
// cache.go over github.com/hashicorp/golang-lru/v2's simplelru.LRU, with
// one entry per workspace holding its numbers. It exists for the
// side-by-side measurement in cache.go's doc comment (run the isequencer
// benchmarks with -tags cqlseq_lru_hashicorp); the default build uses the
// index-linked wsCache. One goroutine owns it. Ring positions: see
// cache.go.
type wsCache struct {
	lru   *simplelru.LRU[WSID, *lruEntry]
	width int
	free  []*lruEntry // entries evicted or removed, reused by add
	last  *lruEntry   // the entry get or add returned last
	head  uint64      // the ring head passed to the add or remove in progress
	gone  goneSet
}

type lruEntry struct {
	nums []Number
	kind WSKind
	pos  uint64
}

// newWSCache returns a cache for maxWS workspaces of at most width sequences.
func newWSCache(maxWS, width int) *wsCache {
	c := &wsCache{width: max(width, 1)}
	// NewLRU fails only for a size < 1, which max excludes.
	c.lru, _ = simplelru.NewLRU(max(maxWS, 1), func(ws WSID, e *lruEntry) {
		c.gone.keep(ws, e.pos, c.head)
		c.free = append(c.free, e)
	})
	return c
}

// len returns the number of cached workspaces.
func (c *wsCache) len() int { return c.lru.Len() }

// markLast sets the ring position of the entry get or add returned last.
func (c *wsCache) markLast(pos uint64) { c.last.pos = pos }

// pending returns the ring position below which ws's values lie, if ws is
// not cached (see cache.go).
func (c *wsCache) pending(ws WSID) uint64 { return c.gone.pos[ws] }

// has reports whether ws is cached, without touching its recency (see
// cache.go: simplelru's Contains reads its map only).
func (c *wsCache) has(ws WSID) bool { return c.lru.Contains(ws) }

// get returns the numbers of ws and marks it most recently used. The slice
// stays valid until the next add or reset.
func (c *wsCache) get(ws WSID) (nums []Number, kind WSKind, ok bool) {
	e, ok := c.lru.Get(ws)
	if !ok {
		return nil, 0, false
	}
	c.last = e
	return e.nums, e.kind, true
}

// add makes ws the most recently used entry with the given kind, evicting
// the least recently used workspace when full (keeping its ring position
// if above head), and returns its numbers, zeroed.
func (c *wsCache) add(ws WSID, kind WSKind, head uint64) []Number {
	c.head = head
	e, ok := c.lru.Peek(ws)
	if !ok {
		if n := len(c.free); n > 0 {
			e, c.free = c.free[n-1], c.free[:n-1]
		} else {
			e = &lruEntry{nums: make([]Number, c.width)}
		}
		e.pos = 0
		if c.gone.pos != nil {
			e.pos = c.gone.take(ws)
		}
	}
	clear(e.nums)
	e.kind = kind
	c.lru.Add(ws, e)
	c.last = e
	return e.nums
}

// remove drops ws, if cached, keeping its ring position if above head.
func (c *wsCache) remove(ws WSID, head uint64) {
	c.head = head
	c.lru.Remove(ws)
}

// reset empties the cache, keeping the numbers' memory for reuse.
func (c *wsCache) reset() {
	c.head = ^uint64(0) // nothing is kept
	c.lru.Purge()
	clear(c.gone.pos)
}
