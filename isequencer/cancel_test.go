package isequencer

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hangingStorage is a mockStorage whose writes hang, once hang is set,
// until CancelCalls: an outage in which only cancellation ends a call.
type hangingStorage struct {
	*mockStorage
	life     context.Context
	cancel   context.CancelFunc
	mu       sync.Mutex
	hang     bool
	inFlight chan struct{} // receives when a write starts to hang
}

var _ ISeqStorageCanceler = (*hangingStorage)(nil)

func newHangingStorage() *hangingStorage {
	h := &hangingStorage{mockStorage: newMockStorage(), inFlight: make(chan struct{}, 1)}
	h.life, h.cancel = context.WithCancel(context.Background())
	return h
}

func (h *hangingStorage) WriteValuesAndNextPLogOffset(batch []SeqValue, next PLogOffset) error {
	h.mu.Lock()
	hang := h.hang
	h.mu.Unlock()
	if hang {
		select {
		case h.inFlight <- struct{}{}:
		default:
		}
		<-h.life.Done()
		return h.life.Err()
	}
	return h.mockStorage.WriteValuesAndNextPLogOffset(batch, next)
}

func (h *hangingStorage) CancelCalls() { h.cancel() }

func TestCleanupCancelsStorageCallInFlight(t *testing.T) {
	st := newHangingStorage()
	s, cleanup := newTestSequencer(t, st, nil)
	waitStart(t, s, kindApp, 1)
	st.mu.Lock()
	st.hang = true
	st.mu.Unlock()
	_, err := s.Next(seqWLog)
	require.NoError(t, err)
	s.Flush()
	select {
	case <-st.inFlight:
	case <-time.After(10 * time.Second):
		t.Fatal("the flush write did not start")
	}
	began := time.Now()
	cleanup()
	took := time.Since(began)
	t.Logf("cleanup with a write in flight took %v", took)
	// The write would hang forever: returning at all shows the
	// cancellation; the bound leaves room for a busy machine.
	assert.Less(t, took, time.Second)
	assert.Error(t, st.life.Err(), "CancelCalls was called")
}
