package isequencer

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gatedStorage records the size of every write and holds a write while
// gate is set, until the gate is closed.
type gatedStorage struct {
	*mockStorage
	mu      sync.Mutex
	sizes   []int
	gate    chan struct{}
	entered chan struct{} // receives once per write held at the gate
}

func (g *gatedStorage) WriteValuesAndNextPLogOffset(batch []SeqValue, next PLogOffset) error {
	g.mu.Lock()
	gate := g.gate
	g.mu.Unlock()
	if gate != nil {
		g.entered <- struct{}{}
		<-gate
	}
	if err := g.mockStorage.WriteValuesAndNextPLogOffset(batch, next); err != nil {
		return err
	}
	g.mu.Lock()
	g.sizes = append(g.sizes, len(batch))
	g.mu.Unlock()
	return nil
}

// TestFlushBatchTakesAllPending: while one write is in flight, accepted
// values accumulate; the next write takes all of them at once rather than
// alternating full and near-empty batches.
func TestFlushBatchTakesAllPending(t *testing.T) {
	g := &gatedStorage{mockStorage: newMockStorage(), gate: make(chan struct{}), entered: make(chan struct{}, 1)}
	s, _ := newTestSequencer(t, g, func(p *Params) { p.MaxNumUnflushedValues = 1000 })

	const later = 300
	waitStart(t, s, kindUser, 1)
	_, err := s.Next(seqWLog)
	require.NoError(t, err)
	s.Flush()
	<-g.entered // the first write (one value) is held in flight

	for ws := WSID(2); ws < 2+later; ws++ {
		waitStart(t, s, kindUser, ws)
		_, err := s.Next(seqWLog)
		require.NoError(t, err)
		s.Flush()
	}
	g.mu.Lock()
	gate := g.gate
	g.gate = nil
	g.mu.Unlock()
	close(gate)

	waitFor(t, "every value written", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		total := 0
		for _, n := range g.sizes {
			total += n
		}
		return total == 1+later
	})
	g.mu.Lock()
	defer g.mu.Unlock()
	assert.Equal(t, []int{1, later}, g.sizes, "the write after the held one takes everything pending")
	g.mockStorage.mu.Lock()
	defer g.mockStorage.mu.Unlock()
	assert.Equal(t, PLogOffset(2+later), g.mockStorage.nextOffset)
}
