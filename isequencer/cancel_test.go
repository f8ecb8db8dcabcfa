package isequencer

import (
	"context"
	"sync"
	"sync/atomic"
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

// hangingReads is a hangingStorage whose ReadNumbers (not its writes)
// hang, once hangReads is set, until CancelCalls; readEnded is set as a
// hung read returns.
type hangingReads struct {
	*hangingStorage
	hangReads *atomic.Bool
	readEnded *atomic.Bool
}

func (h hangingReads) ReadNumbers(ws WSID, ids []SeqID) ([]Number, error) {
	if h.hangReads.Load() {
		select {
		case h.inFlight <- struct{}{}:
		default:
		}
		<-h.life.Done()
		h.readEnded.Store(true)
		return nil, h.life.Err()
	}
	return h.mockStorage.ReadNumbers(ws, ids)
}

// TestCleanupCancelsReadAheadInFlight: a ReadAhead whose read hangs does
// not outlive cleanup: cleanup cancels it after its grace and returns only
// once the ReadAhead call's storage read has (the call itself then
// returns; its goroutine may run after cleanup's).
func TestCleanupCancelsReadAheadInFlight(t *testing.T) {
	st := hangingReads{newHangingStorage(), new(atomic.Bool), new(atomic.Bool)}
	s, cleanup := newTestSequencer(t, st, nil)
	waitStart(t, s, kindApp, 1)
	s.Flush()
	st.hangReads.Store(true)
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		s.ReadAhead(kindApp, 2)
	}()
	select {
	case <-st.inFlight:
	case <-time.After(10 * time.Second):
		t.Fatal("the read-ahead did not start")
	}
	began := time.Now()
	cleanup()
	took := time.Since(began)
	t.Logf("cleanup with a read-ahead in flight took %v", took)
	assert.True(t, st.readEnded.Load(), "cleanup returned before the ReadAhead call's read")
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("the ReadAhead call did not return after cleanup")
	}
	assert.Less(t, took, time.Second)
	assert.Error(t, st.life.Err(), "CancelCalls was called")
	s.ReadAhead(kindApp, 3) // closed: returns at once, no read
}
