package isequencer

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// txsOn runs one transaction on each of wss with the synchronous worker
// (Start, one number of seqWLog, the event written, Flush), stepping the
// worker until it has nothing to do after each. It returns the last
// transaction's offset.
func (w *syncWorker) txsOn(t *testing.T, st *mockStorage, wss ...WSID) PLogOffset {
	t.Helper()
	var off PLogOffset
	for _, ws := range wss {
		off = w.start(t, kindUser, ws)
		n, err := w.s.Next(seqWLog)
		require.NoError(t, err)
		require.True(t, st.writeEvent(off, []SeqValue{{Key: NumberKey{WSID: ws, SeqID: seqWLog}, Value: n}}))
		w.s.Flush()
		w.drain()
	}
	return off
}

// drain steps the worker until it has nothing to do.
func (w *syncWorker) drain() {
	for w.step() {
	}
}

// TestFlushAfterEventsWritesOnceAWindow: with FlushAfterEvents 10 the
// worker writes nothing until the tenth durable event past the stored
// offset, then one write holding one value per key of the window and the
// offset after it; a restart replays only the events after it.
func TestFlushAfterEventsWritesOnceAWindow(t *testing.T) {
	st := newMockStorage()
	w := newSyncSequencer(t, st, func(p *Params) { p.FlushAfterEvents = 10; p.MaxNumUnflushedValues = 1000 })
	w.drain() // the actualization
	_, next := st.stored()
	require.Equal(t, PLogOffset(0), next)
	writes := st.writes

	w.txsOn(t, st, 1, 2, 3, 1, 2, 3, 1, 2, 3)
	assert.Equal(t, writes, st.writes, "9 durable events: nothing written")
	w.txsOn(t, st, 1)
	assert.Equal(t, writes+1, st.writes, "the tenth: one write")
	nums, next := st.stored()
	assert.Equal(t, PLogOffset(11), next)
	assert.Len(t, nums, 3, "one value per workspace of the window")

	w.txsOn(t, st, 2, 2, 2, 2)
	assert.Equal(t, writes+1, st.writes)
	w = newSyncSequencer(t, st, func(p *Params) { p.FlushAfterEvents = 10; p.MaxNumUnflushedValues = 1000 })
	st.mu.Lock()
	st.eventsReplayed = 0
	st.mu.Unlock()
	w.drain()
	st.mu.Lock()
	replayed := st.eventsReplayed
	st.mu.Unlock()
	assert.Equal(t, 4, replayed, "a restart replays the events after the stored offset only")
	assert.Equal(t, PLogOffset(15), w.txsOn(t, st, 3), "and takes the offset after them")
}

// TestFlushAfterEventsWritesAtAQuarterOfTheValues: the window is cut short
// when its values reach a quarter of MaxNumUnflushedValues, so that three
// quarters stay as the headroom for stalled flushes.
func TestFlushAfterEventsWritesAtAQuarterOfTheValues(t *testing.T) {
	st := newMockStorage()
	w := newSyncSequencer(t, st, func(p *Params) { p.FlushAfterEvents = 1000; p.MaxNumUnflushedValues = 40 })
	w.drain()
	writes := st.writes
	w.txsOn(t, st, 1, 2, 3, 4, 5, 6, 7, 8, 9)
	assert.Equal(t, writes, st.writes, "9 values of 40: nothing written")
	w.txsOn(t, st, 10)
	assert.Equal(t, writes+1, st.writes, "10 values of 40: written")
	_, next := st.stored()
	assert.Equal(t, PLogOffset(11), next)
}
