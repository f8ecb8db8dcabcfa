package isequencer

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gatedWrites holds every write until gate is closed; entered receives a
// value as each write arrives (if there is room).
type gatedWrites struct {
	*mockStorage
	gate    chan struct{}
	entered chan struct{}
}

func (g gatedWrites) WriteValuesAndNextPLogOffset(batch []SeqValue, next PLogOffset) error {
	select {
	case g.entered <- struct{}{}:
	default:
	}
	<-g.gate
	return g.mockStorage.WriteValuesAndNextPLogOffset(batch, next)
}

func takeOne(t *testing.T, s ISequencer, ws WSID) Number {
	t.Helper()
	waitStart(t, s, kindUser, ws)
	n, err := s.Next(seqWLog)
	require.NoError(t, err)
	s.Flush()
	return n
}

func (m *mockStorage) readCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reads
}

// TestReadAheadSavesTheRead: a read-ahead of a cold workspace is used by
// its next transaction (no read in Next); a cached workspace is not read.
func TestReadAheadSavesTheRead(t *testing.T) {
	st := newMockStorage()
	// The actualization is held until after the first ReadAhead: without
	// the gate it may end first on a busy machine, and the ReadAhead would
	// then read (make test once failed this way).
	st.block = make(chan struct{})
	s, _ := newTestSequencer(t, st, nil)
	ra := s
	ra.ReadAhead(kindUser, 1)
	assert.Zero(t, st.readCount(), "no read while the sequencer actualizes")
	close(st.block)
	takeOne(t, s, 9) // the end of actualization; one read
	ra.ReadAhead(kindUser, 1)
	require.Equal(t, 2, st.readCount())
	assert.Equal(t, Number(1), takeOne(t, s, 1))
	assert.Equal(t, 2, st.readCount(), "Next used the read-ahead")
	ra.ReadAhead(kindUser, 1)
	assert.Equal(t, 2, st.readCount(), "a cached workspace is not read ahead")
	ra.ReadAhead(99, 2)
	ra.ReadAhead(kindUser, 0)
	assert.Equal(t, 2, st.readCount(), "an unknown kind or WSID 0 is not read")
	assert.Equal(t, int64(1), s.readAhead.used.Load())
}

// TestReadAheadStaleAfterTheWorkspacesWrite is the interleaving the
// filters exist for: ws 1's value 1 is accepted, ws 1 leaves the cache,
// its read-ahead reads storage before the write of value 1 lands, the
// write completes (the value leaves the overlay), and the next transaction
// on ws 1 misses: it must not use the read-ahead (which says 0) and hand
// out 1 again.
func TestReadAheadStaleAfterTheWorkspacesWrite(t *testing.T) {
	st := newMockStorage()
	g := gatedWrites{mockStorage: st, gate: make(chan struct{}), entered: make(chan struct{}, 1)}
	s, _ := newTestSequencer(t, g, func(p *Params) { p.LRUCacheSize = 3 }) // one workspace
	opened := false
	t.Cleanup(func() {
		if !opened {
			close(g.gate)
		}
	})

	require.Equal(t, Number(1), takeOne(t, s, 1))
	<-g.entered // the write of ws 1's value is in flight
	require.Equal(t, Number(1), takeOne(t, s, 2), "ws 2 evicts ws 1")
	s.ReadAhead(kindUser, 1) // reads 0
	close(g.gate)            // the writes land
	opened = true
	waitFor(t, "the values stored", func() bool {
		nums, _ := st.stored()
		return nums[NumberKey{WSID: 1, SeqID: seqWLog}] == 1 && nums[NumberKey{WSID: 2, SeqID: seqWLog}] == 1
	})
	assert.Equal(t, Number(2), takeOne(t, s, 1), "the stale read-ahead is not used")
	assert.Equal(t, int64(1), s.readAhead.stale.Load())
}

// TestReadAheadKeptAcrossOtherWorkspacesWrites: writes of other workspaces
// do not make a read-ahead stale (the filter tells them apart).
func TestReadAheadKeptAcrossOtherWorkspacesWrites(t *testing.T) {
	st := newMockStorage()
	s, _ := newTestSequencer(t, st, nil)
	takeOne(t, s, 1)
	s.ReadAhead(kindUser, 7)
	for ws := WSID(2); ws < 6; ws++ {
		takeOne(t, s, ws)
		waitFor(t, "the write", func() bool { _, next := st.stored(); return next == PLogOffset(ws+1) })
	}
	reads := st.readCount()
	assert.Equal(t, Number(1), takeOne(t, s, 7))
	assert.Equal(t, reads, st.readCount(), "the read-ahead was used")
}

// TestReadAheadKeptAcrossALargeWrite: a write of 2,000 other workspaces
// does not make a read-ahead stale: validity does not degrade with the
// size of a write.
func TestReadAheadKeptAcrossALargeWrite(t *testing.T) {
	st := newMockStorage()
	s, _ := newTestSequencer(t, st, func(p *Params) { p.GroupCommit = true })
	s.ReadAhead(kindUser, 1) // read-ahead on before the write
	const others = 2000
	for ws := WSID(100); ws < 100+others; ws++ {
		waitStart(t, s, kindUser, ws)
		_, err := s.Next(seqWLog)
		require.NoError(t, err)
		s.Flush()
	}
	writes := s.readAhead.writeGen.Load()
	s.ReadAhead(kindUser, 7)
	s.Durable(PLogOffset(others + 1))
	// The storage holds the write before the worker counts it: wait for
	// the count.
	waitFor(t, "the write", func() bool { return s.readAhead.writeGen.Load() > writes })
	_, next := st.stored()
	require.Equal(t, PLogOffset(others+1), next, "one write held every transaction")
	require.Equal(t, writes+1, s.readAhead.writeGen.Load(), "one write")
	reads := st.readCount()
	assert.Equal(t, Number(1), takeOne(t, s, 7))
	assert.Equal(t, reads, st.readCount(), "the read-ahead was used")
	assert.Zero(t, s.readAhead.stale.Load())
}

// TestReadAheadStaleAfterActualize: an actualization begun after the read
// makes it stale.
func TestReadAheadStaleAfterActualize(t *testing.T) {
	st := newMockStorage()
	s, _ := newTestSequencer(t, st, nil)
	takeOne(t, s, 1)
	s.ReadAhead(kindUser, 2)
	waitStart(t, s, kindUser, 3)
	s.Actualize()
	reads := st.readCount()
	assert.Equal(t, Number(1), takeOne(t, s, 2))
	assert.Equal(t, reads+1, st.readCount(), "read again")
	assert.Equal(t, int64(1), s.readAhead.stale.Load())
}

// TestReadAheadConcurrent runs read-aheads from many goroutines against
// transactions on the same workspaces (run it with -race): every number is
// handed out once.
func TestReadAheadConcurrent(t *testing.T) {
	st := newMockStorage()
	s, _ := newTestSequencer(t, slowWrites{st, 0}, func(p *Params) { p.LRUCacheSize = 12 }) // 4 workspaces
	const workspaces, rounds = 40, 50
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				s.ReadAhead(kindUser, WSID(1+(i*7+g)%workspaces))
			}
		}()
	}
	last := map[WSID]Number{}
	for r := range rounds * workspaces {
		ws := WSID(1 + (r*13)%workspaces)
		n := takeOne(t, s, ws)
		require.Greater(t, n, last[ws], "ws %d", ws)
		last[ws] = n
	}
	close(stop)
	wg.Wait()
	for ws, n := range last {
		assert.Equal(t, Number(rounds), n, "ws %d", ws)
	}
}

// TestReadAheadListsShrinkAfterALargeWrite: the list slot of a write of
// thousands of workspaces gives its backing array up once the slot holds
// a small write's list again, and lists within 4 times of a slot's
// capacity reuse it (no allocation).
func TestReadAheadListsShrinkAfterALargeWrite(t *testing.T) {
	const large = 3000
	st := newMockStorage()
	w := newSyncSequencer(t, st, func(p *Params) { p.MaxNumUnflushedValues = 2 * large })
	s := w.s
	ra := &s.readAhead
	maxCap := func() (c int) {
		ra.mu.Lock()
		defer ra.mu.Unlock()
		for _, r := range ra.written {
			c = max(c, cap(r.ws))
		}
		return c
	}
	for s.shared.state.Load() != 0 { // actualized
		w.step()
	}
	s.ReadAhead(kindUser, 1) // read-ahead on: the worker keeps lists
	for ws := WSID(1); ws <= large; ws++ {
		w.start(t, kindUser, ws)
		_, err := s.Next(seqWLog)
		require.NoError(t, err)
		s.Flush()
	}
	for w.step() { // one write of every workspace
	}
	require.True(t, ra.on.Load())
	require.Equal(t, uint64(1), ra.writeGen.Load(), "one write")
	require.GreaterOrEqual(t, maxCap(), large, "the large write's list")

	for i := range listWindow { // a small write in every slot
		for ws := range WSID(3) {
			w.start(t, kindUser, WSID(i)*3+ws+1)
			_, err := s.Next(seqWLog)
			require.NoError(t, err)
			s.Flush()
		}
		for w.step() {
		}
	}
	require.Equal(t, uint64(1+listWindow), ra.writeGen.Load(), "one write each")
	assert.LessOrEqual(t, maxCap(), listKeepCap, "no slot keeps the large write's array")
	for g := ra.writeGen.Load() - listWindow + 1; g <= ra.writeGen.Load(); g++ {
		r := &ra.written[g%listWindow]
		require.Equal(t, g, r.gen)
		require.Len(t, r.ws, 3, "write %d", g)
	}

	// Lists of 120 and 400 workspaces in turn in every slot reuse the
	// slots' arrays.
	small, big := make([]WSID, 120), make([]WSID, 400)
	for i := range big {
		big[i] = WSID(i + 1)
	}
	copy(small, big)
	for range listWindow {
		ra.completed(big, true)
	}
	allocs := testing.AllocsPerRun(10, func() {
		for _, ws := range [][]WSID{small, big} {
			for range listWindow {
				ra.completed(ws, true)
			}
		}
	})
	assert.Zero(t, allocs, "lists within 4 times of a slot's capacity reuse it")
}
