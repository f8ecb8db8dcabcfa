//go:build !cqlseq_lru_hashicorp

package isequencer

// wsCache is an LRU of workspaces, each holding the last issued Number of
// every sequence of its kind (0 = none issued yet). One goroutine owns it.
//
// Entries live in slices indexed by int32 and are linked into a recency list
// by index, so neither a hit nor a miss allocates, and a cached workspace
// costs one map entry, one slot and width Numbers.
//
// It is kept over github.com/hashicorp/golang-lru/v2's simplelru.LRU (the
// design's choice) by a side-by-side measurement: cache_hashicorp.go is the
// same cache over simplelru (one entry per workspace, the numbers in the
// value), built with -tags cqlseq_lru_hashicorp, and the benchmarks of
// this package compare them (figures in docs/benchmarks.md): simplelru is
// slower on eviction (every miss also allocates its list element), takes
// more heap per cached number, and is no faster on a hit.
//
// Ring positions: the sequencer marks each entry with the ring position
// past its workspace's last accepted value (markLast). When an entry whose
// values may still wait to be written (position above the ring head the
// sequencer passes) leaves the cache, its position is kept in gone until
// the workspace is added again, so that a miss scans only the ring part
// that can hold the workspace's values (pending), and a workspace with no
// position has none there: values enter the ring only from a cached
// workspace's transaction.
type wsCache struct {
	idx   map[WSID]int32
	slots []cacheSlot
	nums  []Number // slot i owns nums[i*width : (i+1)*width]
	width int
	free  []int32 // slots of removed workspaces, reused by add first
	max   int     // capacity in workspaces
	head  int32   // most recently used, -1 if empty
	tail  int32   // least recently used, -1 if empty
	last  int32   // the slot get or add returned last
	gone  goneSet
}

type cacheSlot struct {
	ws         WSID
	pos        uint64 // ring position past the workspace's last value; 0: none
	prev, next int32
	kind       WSKind
}

const noSlot int32 = -1

// newWSCache returns a cache for maxWS workspaces of at most width sequences.
func newWSCache(maxWS, width int) *wsCache {
	if maxWS < 1 {
		maxWS = 1
	}
	if width < 1 {
		width = 1
	}
	pre := min(maxWS, 128) // grows on demand; keeps New cheap
	return &wsCache{
		idx:   make(map[WSID]int32, pre),
		slots: make([]cacheSlot, 0, pre),
		nums:  make([]Number, 0, pre*width),
		width: width,
		max:   maxWS,
		head:  noSlot,
		tail:  noSlot,
	}
}

// len returns the number of cached workspaces.
func (c *wsCache) len() int { return len(c.idx) }

// markLast sets the ring position of the entry get or add returned last.
func (c *wsCache) markLast(pos uint64) { c.slots[c.last].pos = pos }

// pending returns the ring position below which ws's values lie, if ws is
// not cached: 0 if it has none in the ring above the head passed when it
// left the cache.
func (c *wsCache) pending(ws WSID) uint64 { return c.gone.pos[ws] }

// has reports whether ws is cached, without touching its recency: the
// only method safe to call concurrently with get (not with add, remove or
// reset).
func (c *wsCache) has(ws WSID) bool {
	_, ok := c.idx[ws]
	return ok
}

// get returns the numbers of ws and marks it most recently used. The slice
// stays valid until the next add or reset.
func (c *wsCache) get(ws WSID) (nums []Number, kind WSKind, ok bool) {
	i, ok := c.idx[ws]
	if !ok {
		return nil, 0, false
	}
	if i != c.head {
		c.unlink(i)
		c.pushFront(i)
	}
	c.last = i
	off := int(i) * c.width
	return c.nums[off : off+c.width : off+c.width], c.slots[i].kind, true
}

// add makes ws the most recently used entry with the given kind, evicting
// the least recently used workspace when full (keeping its ring position
// if above head), and returns its numbers, zeroed. A ws not cached takes
// over its kept position.
func (c *wsCache) add(ws WSID, kind WSKind, head uint64) []Number {
	i, ok := c.idx[ws]
	pos := uint64(0)
	switch {
	case ok:
		c.unlink(i)
		pos = c.slots[i].pos
	case len(c.free) > 0:
		i = c.free[len(c.free)-1]
		c.free = c.free[:len(c.free)-1]
	case len(c.slots) < c.max:
		i = int32(len(c.slots))
		c.slots = append(c.slots, cacheSlot{})
		for range c.width {
			c.nums = append(c.nums, 0)
		}
	default:
		i = c.tail
		c.unlink(i)
		old := &c.slots[i]
		delete(c.idx, old.ws)
		c.gone.keep(old.ws, old.pos, head)
	}
	if !ok && c.gone.pos != nil {
		pos = c.gone.take(ws)
	}
	c.slots[i].ws = ws
	c.slots[i].kind = kind
	c.slots[i].pos = pos
	c.pushFront(i)
	c.idx[ws] = i
	c.last = i
	off := int(i) * c.width
	nums := c.nums[off : off+c.width : off+c.width]
	clear(nums)
	return nums
}

// remove drops ws, if cached, keeping its ring position if above head. Its
// slot is reused by the next add.
func (c *wsCache) remove(ws WSID, head uint64) {
	i, ok := c.idx[ws]
	if !ok {
		return
	}
	c.unlink(i)
	delete(c.idx, ws)
	c.gone.keep(ws, c.slots[i].pos, head)
	c.free = append(c.free, i)
}

// reset empties the cache, keeping its memory.
func (c *wsCache) reset() {
	clear(c.idx)
	c.slots = c.slots[:0]
	c.nums = c.nums[:0]
	c.free = c.free[:0]
	clear(c.gone.pos)
	c.head, c.tail = noSlot, noSlot
}

func (c *wsCache) unlink(i int32) {
	s := &c.slots[i]
	if s.prev != noSlot {
		c.slots[s.prev].next = s.next
	} else {
		c.head = s.next
	}
	if s.next != noSlot {
		c.slots[s.next].prev = s.prev
	} else {
		c.tail = s.prev
	}
	s.prev, s.next = noSlot, noSlot
}

func (c *wsCache) pushFront(i int32) {
	s := &c.slots[i]
	s.prev, s.next = noSlot, c.head
	if c.head != noSlot {
		c.slots[c.head].prev = i
	}
	c.head = i
	if c.tail == noSlot {
		c.tail = i
	}
}
