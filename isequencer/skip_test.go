package isequencer

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSkipTakesAGapOfOffsets: Skip takes the marker's offset and the n
// after it, outside a transaction; the next transaction follows the gap,
// and the next offset stored is past the gap once Durable covers it.
// Misuse panics.
func TestSkipTakesAGapOfOffsets(t *testing.T) {
	st := newMockStorage()
	s, _ := newTestSequencer(t, st, groupCommit)
	first := waitStart(t, s, kindUser, 1)
	_, err := s.Next(seqWLog)
	require.NoError(t, err)
	s.Flush()
	next, ok := s.NextOffset()
	require.True(t, ok)
	assert.Equal(t, first+1, next)

	at, ok := s.Skip(5)
	require.True(t, ok)
	assert.Equal(t, first+1, at, "the marker takes the next offset")
	next, ok = s.NextOffset()
	require.True(t, ok)
	assert.Equal(t, at+6, next, "and the 5 after it")
	assert.Equal(t, at+6, waitStart(t, s, kindUser, 2), "the next transaction follows the gap")
	require.PanicsWithValue(t, "isequencer: Skip: a Sequencing Transaction is in progress", func() { s.Skip(1) })
	s.Cancel()
	require.PanicsWithValue(t, "isequencer: Skip: n == 0", func() { s.Skip(0) })

	s.Durable(at + 6)
	waitFor(t, "the offset after the gap stored", func() bool { _, off := st.stored(); return off == at+6 })
	assert.Equal(t, at+6, s.DurableNext())
	assert.False(t, s.Cached(99), "a workspace never read")
	assert.True(t, s.Cached(1), "a workspace a transaction read")
}
