package electionstest

import (
	"bytes"
	"context"
	"sync"
	"time"

	"github.com/cqlseq/cqlseq/storage"
)

// Op names a storage call Faulty can fail.
type Op uint8

// Ops.
const (
	OpGet Op = iota + 1
	OpInsertIfNotExists
	OpCompareAndSwap
	OpCompareAndDelete
)

// Fault is how Faulty fails a call.
type Fault struct {
	// Err is returned by the failed call.
	Err error
	// Apply makes the call reach the wrapped storage first, so that a
	// write is applied and still reported as failed (with Err wrapping
	// storage.ErrUnknownOutcome: an unknown outcome that did apply).
	Apply bool
	// CCols limits the fault to one clustering key; nil matches any row.
	CCols []byte
	// Times is how many matching calls fail; 0: every one until Clear.
	Times int
}

// Faulty wraps a storage.Storage and fails chosen calls. It is safe for
// concurrent use; calls it does not fail go to the wrapped storage.
type Faulty struct {
	storage.Storage
	mu     sync.Mutex
	faults map[Op]*Fault
	calls  map[Op]int
}

// NewFaulty wraps st.
func NewFaulty(st storage.Storage) *Faulty {
	return &Faulty{Storage: st, faults: map[Op]*Fault{}, calls: map[Op]int{}}
}

// Set makes the calls of op fail as f says, replacing op's previous fault.
func (s *Faulty) Set(op Op, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[op] = &f
}

// Clear removes every fault.
func (s *Faulty) Clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.faults)
}

// Failed returns how many calls of op have failed.
func (s *Faulty) Failed(op Op) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[op]
}

// fault returns the fault for this call, if any, and counts it.
func (s *Faulty) fault(op Op, cCols []byte) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.faults[op]
	if f == nil || f.CCols != nil && !bytes.Equal(f.CCols, cCols) {
		return nil
	}
	s.calls[op]++
	if f.Times > 0 {
		if f.Times--; f.Times == 0 {
			delete(s.faults, op)
		}
	}
	return f
}

// Get implements storage.Storage.
func (s *Faulty) Get(ctx context.Context, pKey, cCols []byte) ([]byte, bool, error) {
	if f := s.fault(OpGet, cCols); f != nil {
		return nil, false, f.Err
	}
	return s.Storage.Get(ctx, pKey, cCols)
}

// InsertIfNotExists implements storage.Storage.
func (s *Faulty) InsertIfNotExists(ctx context.Context, pKey, cCols, value []byte, ttl time.Duration) (bool, error) {
	f := s.fault(OpInsertIfNotExists, cCols)
	if f == nil || f.Apply {
		ok, err := s.Storage.InsertIfNotExists(ctx, pKey, cCols, value, ttl)
		if f == nil || err != nil {
			return ok, err
		}
	}
	return false, f.Err
}

// CompareAndSwap implements storage.Storage.
func (s *Faulty) CompareAndSwap(ctx context.Context, pKey, cCols, oldValue, newValue []byte, ttl time.Duration) (bool, error) {
	f := s.fault(OpCompareAndSwap, cCols)
	if f == nil || f.Apply {
		ok, err := s.Storage.CompareAndSwap(ctx, pKey, cCols, oldValue, newValue, ttl)
		if f == nil || err != nil {
			return ok, err
		}
	}
	return false, f.Err
}

// CompareAndDelete implements storage.Storage.
func (s *Faulty) CompareAndDelete(ctx context.Context, pKey, cCols, expected []byte) (bool, error) {
	f := s.fault(OpCompareAndDelete, cCols)
	if f == nil || f.Apply {
		ok, err := s.Storage.CompareAndDelete(ctx, pKey, cCols, expected)
		if f == nil || err != nil {
			return ok, err
		}
	}
	return false, f.Err
}

// Close does not close the wrapped storage: its owner does.
func (s *Faulty) Close() error { return nil }
