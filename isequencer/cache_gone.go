package isequencer

// goneSet holds the ring positions of workspaces that left the cache while
// their values may have been waiting in the ring. Entries at or below the
// ring head are stale and pruned as the set grows.
type goneSet struct {
	pos     map[WSID]uint64
	pruneAt int
}

// keep records ws's position if it is above head.
func (g *goneSet) keep(ws WSID, pos, head uint64) {
	if pos <= head {
		return
	}
	if g.pos == nil {
		g.pos = make(map[WSID]uint64)
		g.pruneAt = 1024
	}
	g.pos[ws] = max(g.pos[ws], pos)
	if len(g.pos) >= g.pruneAt {
		for w, p := range g.pos {
			if p <= head {
				delete(g.pos, w)
			}
		}
		g.pruneAt = max(1024, 2*len(g.pos))
	}
}

// take removes and returns ws's position (0 if none).
func (g *goneSet) take(ws WSID) uint64 {
	p, ok := g.pos[ws]
	if ok {
		delete(g.pos, ws)
	}
	return p
}
