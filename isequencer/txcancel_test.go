package isequencer

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadNumbersFailureIsCancelledWithoutActualization: the first Next of
// a transaction fails to read the workspace's numbers; the caller cancels.
// Nothing is actualized (no offset read, no PLog replay), the next
// transaction gets the same offset, reads the numbers again and gets the
// first ones.
func TestReadNumbersFailureIsCancelledWithoutActualization(t *testing.T) {
	st := newMockStorage()
	metrics := &countingMetrics{}
	s, _ := newTestSequencer(t, st, func(p *Params) { p.Metrics = metrics })
	off := waitStart(t, s, kindApp, 5)
	st.set(func(m *mockStorage) { m.failRead = errStorage })
	_, err := s.Next(seqRecord)
	require.ErrorIs(t, err, ErrReadNumbers)
	require.ErrorIs(t, err, errStorage)
	assert.Contains(t, err.Error(), "WSID 5")
	s.Cancel()
	st.set(func(m *mockStorage) { m.failRead = nil })

	off2, ok := s.Start(kindApp, 5)
	require.True(t, ok, "not busy: no actualization")
	assert.Equal(t, off, off2, "the cancelled transaction used up no offset")
	n, err := s.Next(seqRecord)
	require.NoError(t, err)
	assert.Equal(t, Number(200_000), n)
	s.Flush()
	st.set(func(m *mockStorage) {
		assert.Equal(t, 1, m.actualizations, "New's actualization only")
		assert.Equal(t, 2, m.reads, "the failed read and its retry")
	})
	assert.Equal(t, 1, metrics.actualized())
}

// TestCancelAfterNumbersTaken: a cancelled transaction's numbers are
// issued again, and the values of transactions flushed before it (not yet
// written to storage) are kept; other cached workspaces are not re-read.
func TestCancelAfterNumbersTaken(t *testing.T) {
	st := newMockStorage()
	s, _ := newTestSequencer(t, st, nil)
	waitStart(t, s, kindApp, 2) // WSID 2 stays cached throughout
	_, err := s.Next(seqWLog)
	require.NoError(t, err)
	s.Flush()
	st.set(func(m *mockStorage) { m.failWrite = errStorage }) // flushed values stay unwritten

	off := waitStart(t, s, kindApp, 1)
	n, err := s.Next(seqRecord)
	require.NoError(t, err)
	require.Equal(t, Number(200_000), n)
	s.Flush()

	off2 := waitStart(t, s, kindApp, 1)
	require.Equal(t, off+1, off2)
	for _, wn := range []Number{200_001, 200_002} {
		n, err = s.Next(seqRecord)
		require.NoError(t, err)
		require.Equal(t, wn, n)
	}
	n, err = s.Next(seqWLog)
	require.NoError(t, err)
	require.Equal(t, Number(1), n)
	s.Cancel()

	off3 := waitStart(t, s, kindApp, 1)
	assert.Equal(t, off2, off3, "the cancelled transaction used up no offset")
	n, err = s.Next(seqRecord)
	require.NoError(t, err)
	assert.Equal(t, Number(200_001), n, "above the flushed 200,000 (unwritten), the cancelled numbers again")
	n, err = s.Next(seqWLog)
	require.NoError(t, err)
	assert.Equal(t, Number(1), n)
	s.Flush()

	readsBefore := 0
	st.set(func(m *mockStorage) { readsBefore = m.reads })
	waitStart(t, s, kindApp, 2)
	n, err = s.Next(seqWLog)
	require.NoError(t, err)
	assert.Equal(t, Number(2), n)
	s.Flush()
	st.set(func(m *mockStorage) {
		assert.Equal(t, readsBefore, m.reads, "another workspace's cache entry is kept")
		assert.Equal(t, 1, m.actualizations)
	})
}

func TestCancelWithoutTransactionPanics(t *testing.T) {
	s, _ := newTestSequencer(t, newMockStorage(), nil)
	require.Panics(t, func() { s.Cancel() })
	waitStart(t, s, kindApp, 1)
	s.Cancel()
	require.Panics(t, func() { s.Cancel() }, "Cancel ends the transaction")
	require.Panics(t, func() { s.Flush() }, "Flush after Cancel")
}

func TestWSCacheRemove(t *testing.T) {
	c := newWSCache(3, 1)
	for ws := WSID(1); ws <= 3; ws++ {
		c.add(ws, 1, 0)[0] = Number(ws)
	}
	c.remove(2, 0)
	c.remove(2, 0) // not cached: no-op
	c.remove(9, 0)
	assert.Equal(t, 2, c.len())
	_, _, ok := c.get(2)
	assert.False(t, ok)

	// The freed slot is reused: 1 and 3 stay cached.
	nums := c.add(4, 1, 0)
	assert.Equal(t, []Number{0}, nums, "zeroed")
	nums[0] = 4
	assert.Equal(t, 3, c.len())
	for _, ws := range []WSID{1, 3, 4} {
		nums, _, ok := c.get(ws)
		require.True(t, ok, "ws %d", ws)
		assert.Equal(t, Number(ws), nums[0])
	}
	// Recency is intact: get order 1, 3, 4 leaves 1 least recent.
	c.add(5, 1, 0)
	_, _, ok = c.get(1)
	assert.False(t, ok, "1 was least recently used")

	// Removing every entry, then refilling, keeps the capacity.
	for _, ws := range []WSID{3, 4, 5} {
		c.remove(ws, 0)
	}
	assert.Equal(t, 0, c.len())
	for ws := WSID(10); ws < 20; ws++ {
		c.add(ws, 1, 0)[0] = Number(ws)
		require.LessOrEqual(t, c.len(), 3)
	}
	for ws := WSID(17); ws < 20; ws++ {
		nums, _, ok := c.get(ws)
		require.True(t, ok, "ws %d", ws)
		assert.Equal(t, Number(ws), nums[0])
	}
	c.remove(18, 0)
	c.reset()
	assert.Equal(t, 0, c.len())
	c.add(1, 1, 0)
	assert.Equal(t, 1, c.len())
}
