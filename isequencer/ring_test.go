package isequencer

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRingGrowKeepsPositionsAcrossTheWrap(t *testing.T) {
	r := newRing[uint64](4)
	for p := uint64(6); p < 10; p++ { // slots 2, 3, 0, 1
		*r.at(p) = p * 10
	}
	g := r.grow(7, 64, 6, 10)
	require.Equal(t, uint64(8), g.size(), "the next power of two at or above need")
	for p := uint64(6); p < 10; p++ {
		assert.Equal(t, p*10, *g.at(p), "position %d", p)
	}
	assert.Same(t, g, g.grow(8, 64, 6, 10), "a ring of need slots is kept")
	assert.Same(t, g, g.grow(100, 8, 6, 10), "a ring at the limit is kept")
	assert.Equal(t, uint64(32), g.grow(100, 32, 6, 10).size(), "growth stops at the limit")
	assert.Panics(t, func() { newRing[int](3) })
}

// slowWrites delays every write, so that a backlog builds up while the
// worker collects and writes: the rings grow under a concurrent reader.
type slowWrites struct {
	*mockStorage
	delay time.Duration
}

func (s slowWrites) WriteValuesAndNextPLogOffset(batch []SeqValue, next PLogOffset) error {
	time.Sleep(s.delay)
	return s.mockStorage.WriteValuesAndNextPLogOffset(batch, next)
}

// TestRingsGrowUnderTheWorker: values accepted while the rings grow from
// their initial size to thousands of slots, with the worker writing
// concurrently, all reach storage with their last value, in both flows
// (run it with -race: the growth is published to the worker).
func TestRingsGrowUnderTheWorker(t *testing.T) {
	for _, grouped := range []bool{false, true} {
		name := "serial"
		if grouped {
			name = "groupcommit"
		}
		t.Run(name, func(t *testing.T) {
			st := newMockStorage()
			s, _ := newTestSequencer(t, slowWrites{st, 2 * time.Millisecond}, func(p *Params) {
				p.MaxNumUnflushedValues = 20_000
				p.GroupCommit = grouped
			})
			seq := s
			const workspaces, rounds = 3000, 3
			want := map[NumberKey]Number{}
			var off PLogOffset
			for range rounds {
				for ws := WSID(1); ws <= workspaces; ws++ {
					off = waitStart(t, s, kindUser, ws)
					n, err := s.Next(seqWLog)
					require.NoError(t, err)
					want[NumberKey{WSID: ws, SeqID: seqWLog}] = n
					s.Flush()
					if grouped && off%64 == 0 {
						s.Durable(off + 1)
					}
				}
			}
			if grouped {
				s.Durable(off + 1)
			}
			assert.Greater(t, seq.caller.values.size(), uint64(initialRingSize), "the backlog made the values ring grow")
			if grouped {
				assert.Greater(t, seq.caller.marks.size(), uint64(initialRingSize), "the backlog made the marks ring grow")
			}
			waitFor(t, "every value stored", func() bool { _, next := st.stored(); return next == off+1 })
			got, _ := st.stored()
			assert.Equal(t, want, got)
			for _, n := range want {
				assert.Equal(t, Number(rounds), n)
			}
		})
	}
}

// TestIdleSequencerIsSmall: a sequencer that has handed out nothing holds
// kilobytes, not its bound (default MaxNumUnflushedValues 10,000: a ring of
// 16,384 values, 384 KiB, 640 KiB with GroupCommit).
func TestIdleSequencerIsSmall(t *testing.T) {
	const n = 200
	const limit = 64 << 10
	for _, grouped := range []bool{false, true} {
		st := newMockStorage()
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		cleanups := make([]func(), 0, n)
		for range n {
			p := &Params{SeqTypes: testSeqTypes(), SeqStorage: st, GroupCommit: grouped, Logger: quietLogger()}
			s, cleanup, err := New(p)
			require.NoError(t, err)
			waitStart(t, s, kindApp, 1)
			s.Flush()
			cleanups = append(cleanups, cleanup)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
		t.Logf("GroupCommit %v: %d bytes of heap per idle sequencer", grouped, per)
		assert.LessOrEqual(t, per, int64(limit), "GroupCommit %v: heap per idle sequencer", grouped)
		var wg sync.WaitGroup
		for _, c := range cleanups {
			wg.Add(1)
			go func() { defer wg.Done(); c() }()
		}
		wg.Wait()
	}
}
