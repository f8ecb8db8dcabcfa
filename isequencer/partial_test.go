package isequencer

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// partialStorage is a mockStorage whose writes can fail for chosen keys as
// a storage that writes workspaces separately reports it: the other values
// are written, the offset is not, and a PartialWriteError names the failed
// values. It records every write call, and can hold the next write until
// released.
type partialStorage struct {
	*mockStorage
	mu       sync.Mutex
	failing  map[NumberKey]int // failures left per key
	offsetFa int               // offset-only failures left
	calls    [][]SeqValue
	offsets  []PLogOffset
	hold     chan struct{}
	held     chan struct{}
}

func newPartialStorage() *partialStorage {
	return &partialStorage{mockStorage: newMockStorage(), failing: map[NumberKey]int{}, held: make(chan struct{}, 1)}
}

func (p *partialStorage) WriteValuesAndNextPLogOffset(batch []SeqValue, next PLogOffset) error {
	p.mu.Lock()
	hold := p.hold
	p.hold = nil
	p.mu.Unlock()
	if hold != nil {
		p.held <- struct{}{}
		<-hold
	}
	p.mu.Lock()
	p.calls = append(p.calls, slices.Clone(batch))
	p.offsets = append(p.offsets, next)
	var failed []int
	for i, v := range batch {
		if p.failing[v.Key] > 0 {
			p.failing[v.Key]--
			failed = append(failed, i)
		}
	}
	offsetFails := len(failed) == 0 && p.offsetFa > 0
	if offsetFails {
		p.offsetFa--
	}
	p.mu.Unlock()
	if len(failed) == 0 && !offsetFails {
		return p.mockStorage.WriteValuesAndNextPLogOffset(batch, next)
	}
	p.mockStorage.mu.Lock()
	for i, v := range batch {
		if !slices.Contains(failed, i) {
			p.mockStorage.numbers[v.Key] = v.Value
		}
	}
	p.mockStorage.mu.Unlock()
	return fmt.Errorf("wrapped: %w", &PartialWriteError{Failed: failed, Err: errStorage})
}

func (p *partialStorage) writes() ([][]SeqValue, []PLogOffset) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.calls), slices.Clone(p.offsets)
}

// TestFlushRetriesOnlyFailedValues: a flush of 20 workspaces' values whose
// write reports one workspace's value failed retries that value alone,
// with the same next offset, which becomes stored only then; a failure of
// the offset write alone retries the offset alone.
func TestFlushRetriesOnlyFailedValues(t *testing.T) {
	const n, bad = 20, WSID(7)
	st := newPartialStorage()
	metrics := &countingMetrics{}
	s, _ := newTestSequencer(t, st, func(p *Params) { p.Metrics = metrics })

	// The warm-up's write is held while the 20 transactions are flushed,
	// so that they form one batch.
	st.mu.Lock()
	st.hold = make(chan struct{})
	hold := st.hold
	st.failing[NumberKey{WSID: bad, SeqID: seqRecord}] = 1
	st.mu.Unlock()
	waitStart(t, s, kindApp, 100)
	s.Flush()
	<-st.held
	for ws := WSID(1); ws <= n; ws++ {
		waitStart(t, s, kindApp, ws)
		for _, id := range []SeqID{seqWLog, seqRecord} {
			_, err := s.Next(id)
			require.NoError(t, err)
		}
		s.Flush()
	}
	close(hold)
	waitFor(t, "the flush", func() bool { _, off := st.stored(); return off == n+2 })

	calls, offsets := st.writes()
	require.Len(t, calls, 3)
	assert.Equal(t, []PLogOffset{2, n + 2, n + 2}, offsets)
	assert.Len(t, calls[1], 2*n)
	assert.Equal(t, []SeqValue{{Key: NumberKey{WSID: bad, SeqID: seqRecord}, Value: 200_000}}, calls[2], "only the failed value is written again")
	nums, _ := st.stored()
	for ws := WSID(1); ws <= n; ws++ {
		assert.Equal(t, Number(1), nums[NumberKey{WSID: ws, SeqID: seqWLog}])
		assert.Equal(t, Number(200_000), nums[NumberKey{WSID: ws, SeqID: seqRecord}])
	}
	assert.Equal(t, 1, metrics.storageErrors(opWriteValues))

	// Only the offset write fails: the retry writes no value.
	st.mu.Lock()
	st.offsetFa = 1
	st.mu.Unlock()
	waitStart(t, s, kindApp, 1)
	_, err := s.Next(seqWLog)
	require.NoError(t, err)
	s.Flush()
	waitFor(t, "the flush", func() bool { _, off := st.stored(); return off == n+3 })
	calls, offsets = st.writes()
	require.Len(t, calls, 5)
	assert.Equal(t, []PLogOffset{n + 3, n + 3}, offsets[3:])
	assert.Len(t, calls[3], 1)
	assert.Empty(t, calls[4], "the values were written: the retry writes the offset alone")
}

func TestPartialWriteErrorFailedOnly(t *testing.T) {
	batch := func() []SeqValue {
		var b []SeqValue
		for i := range 5 {
			b = append(b, SeqValue{Key: NumberKey{WSID: WSID(i + 1)}, Value: Number(i)})
		}
		return b
	}
	for _, tc := range []struct {
		name   string
		failed []int
		wok    bool
		wws    []WSID
	}{
		{"none", nil, true, nil},
		{"some", []int{1, 3, 4}, true, []WSID{2, 4, 5}},
		{"all", []int{0, 1, 2, 3, 4}, true, []WSID{1, 2, 3, 4, 5}},
		{"out of range", []int{1, 5}, false, []WSID{1, 2, 3, 4, 5}},
		{"negative", []int{-1}, false, []WSID{1, 2, 3, 4, 5}},
		{"descending", []int{3, 1}, false, []WSID{1, 2, 3, 4, 5}},
		{"repeated", []int{2, 2}, false, []WSID{1, 2, 3, 4, 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := (&PartialWriteError{Failed: tc.failed, Err: errStorage}).failedOnly(batch())
			assert.Equal(t, tc.wok, ok)
			var ws []WSID
			for _, v := range got {
				ws = append(ws, v.Key.WSID)
				assert.Equal(t, Number(v.Key.WSID-1), v.Value, "values move with their keys")
			}
			assert.Equal(t, tc.wws, ws)
		})
	}
	err := fmt.Errorf("outer: %w", &PartialWriteError{Failed: []int{1}, Err: errStorage})
	require.ErrorIs(t, err, errStorage)
	assert.Contains(t, err.Error(), "isequencer: partial write: 1 values")
}
