package isequencer

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func groupCommit(p *Params) { p.GroupCommit = true }

// TestDurableWithoutGroupCommitPanics: Durable on a sequencer made without
// GroupCommit is protocol misuse: it panics, and leaves the watermark,
// which Flush alone moves, as it was.
func TestDurableWithoutGroupCommitPanics(t *testing.T) {
	st := newMockStorage()
	s, _ := newTestSequencer(t, st, nil)
	off := waitStart(t, s, kindUser, 1)
	_, err := s.Next(seqWLog)
	require.NoError(t, err)
	require.True(t, st.writeEvent(off, nil))
	s.Flush()
	w := s.shared.watermark.v.Load()
	require.PanicsWithValue(t, "isequencer: Durable: the sequencer was not made with Params.GroupCommit", func() {
		s.Durable(off + 100)
	})
	require.Equal(t, w, s.shared.watermark.v.Load(), "the watermark is Flush's")
	var g IGroupCommit = s
	require.PanicsWithValue(t, "isequencer: Durable: the sequencer was not made with Params.GroupCommit", func() {
		g.Durable(off + 1) // even one that covers nothing new
	})
	waitFor(t, "the flushed transaction stored", func() bool { _, next := st.stored(); return next == off+1 })
}

// TestGroupCommitWritesOnlyDurable: values and the next offset of a
// flushed transaction reach storage only once Durable covers it.
func TestGroupCommitWritesOnlyDurable(t *testing.T) {
	st := newMockStorage()
	s, _ := newTestSequencer(t, st, groupCommit)
	var g IGroupCommit = s

	var offs []PLogOffset
	for ws := WSID(1); ws <= 3; ws++ {
		offs = append(offs, waitStart(t, s, kindUser, ws))
		_, err := s.Next(seqWLog)
		require.NoError(t, err)
		s.Flush()
	}
	assert.Equal(t, []PLogOffset{1, 2, 3}, offs, "offsets are handed out before any event is durable")

	g.Durable(2) // the event at offset 1 is durable
	waitFor(t, "offset 2 stored", func() bool { _, off := st.stored(); return off == 2 })
	nums, _ := st.stored()
	assert.Equal(t, map[NumberKey]Number{{WSID: 1, SeqID: seqWLog}: 1}, nums, "only the durable transaction's value")

	g.Durable(1) // smaller: ignored
	g.Durable(4)
	waitFor(t, "offset 4 stored", func() bool { _, off := st.stored(); return off == 4 })
	nums, _ = st.stored()
	assert.Len(t, nums, 3)
}

// TestGroupCommitRestartDropsTentative: tentative transactions whose events
// were never written leave no trace; the next instance reuses neither
// offsets nor numbers of durable events.
func TestGroupCommitRestartDropsTentative(t *testing.T) {
	st := newMockStorage()
	s, cleanup := newTestSequencer(t, st, groupCommit)
	off := waitStart(t, s, kindUser, 1)
	n1, err := s.Next(seqWLog)
	require.NoError(t, err)
	require.True(t, st.writeEvent(off, []SeqValue{{Key: NumberKey{WSID: 1, SeqID: seqWLog}, Value: n1}}))
	s.Flush()
	s.Durable(off + 1)

	off2 := waitStart(t, s, kindUser, 1)
	_, err = s.Next(seqWLog)
	require.NoError(t, err)
	s.Flush() // its event is never written
	cleanup()
	_, stored := st.stored()
	assert.LessOrEqual(t, stored, off2, "the stored offset never claims the unwritten event")

	s2, _ := newTestSequencer(t, st, groupCommit)
	off3 := waitStart(t, s2, kindUser, 1)
	assert.Equal(t, off2, off3, "the unwritten offset is free again")
	n3, err := s2.Next(seqWLog)
	require.NoError(t, err)
	assert.Greater(t, n3, n1)
}

// TestGroupCommitOverflow: a transaction too large for the ring is held in
// overflow and written, with its offset, only once durable.
func TestGroupCommitOverflow(t *testing.T) {
	st := newMockStorage()
	s, _ := newTestSequencer(t, st, func(p *Params) { p.GroupCommit = true; p.MaxNumUnflushedValues = 1 })
	waitStart(t, s, kindUser, 1)
	_, err := s.Next(seqWLog)
	require.NoError(t, err)
	s.Flush()
	// Ring capacity for MaxNumUnflushedValues 1 is 512 values.
	waitStart(t, s, kindUser, 2)
	var last Number
	for range 600 {
		n, err := s.Next(seqWLog)
		require.NoError(t, err)
		last = n
	}
	s.Flush()
	_, ok := s.Start(kindUser, 3)
	assert.False(t, ok, "busy: tentative values above the limit")

	g := s
	g.Durable(2)
	waitFor(t, "offset 2 stored", func() bool { _, off := st.stored(); return off == 2 })
	nums, _ := st.stored()
	assert.Equal(t, map[NumberKey]Number{{WSID: 1, SeqID: seqWLog}: 1}, nums, "the overflow transaction is not durable yet")

	g.Durable(3)
	waitFor(t, "offset 3 stored", func() bool { _, off := st.stored(); return off == 3 })
	nums, _ = st.stored()
	assert.Equal(t, last, nums[NumberKey{WSID: 2, SeqID: seqWLog}])
	waitStart(t, s, kindUser, 3)
	s.Flush()
}

// TestGroupCommitBusyWithoutDurable: transactions that take no numbers
// still occupy a mark; without Durable, Start eventually reports busy.
func TestGroupCommitBusyWithoutDurable(t *testing.T) {
	st := newMockStorage()
	s, _ := newTestSequencer(t, st, func(p *Params) { p.GroupCommit = true; p.MaxNumUnflushedValues = 1 })
	waitStart(t, s, kindUser, 1)
	s.Flush()
	n := 1
	for {
		if _, ok := s.Start(kindUser, 1); !ok {
			break
		}
		s.Flush()
		n++
		require.Less(t, n, 10_000, "Start never reported busy")
	}
	assert.Equal(t, 512, n, "the mark ring's capacity")
	s.Durable(PLogOffset(n + 1))
	waitStart(t, s, kindUser, 1)
	s.Flush()
}
