// Package mem is an in-memory storage.Storage for tests and the in-memory
// demo mode. TTLs follow Options.Now, so tests can move time.
package mem

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cqlseq/cqlseq/storage"
)

// Options configure a Store.
type Options struct {
	// Now is the clock TTLs are measured with. Default time.Now.
	Now func() time.Time
}

// Store implements storage.Storage in memory.
type Store struct {
	now func() time.Time
	mu  struct {
		sync.Mutex
		parts  map[string]*partition
		closed bool
	}
}

type partition struct {
	rows   map[string]*row
	sorted []string // clustering keys in order; nil when stale
}

type row struct {
	value   []byte
	expires time.Time // zero: never
	version uint64    // storage.Row.Version of the write that stays
}

var _ storage.Storage = (*Store)(nil)

// New returns an empty Store.
func New(o Options) *Store {
	s := &Store{now: o.Now}
	if s.now == nil {
		s.now = time.Now
	}
	s.mu.parts = map[string]*partition{}
	return s
}

func (s *Store) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("mem: %w", err)
	}
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return storage.ErrClosed
	}
	return nil
}

func (s *Store) getLocked(pKey, cCols []byte) ([]byte, bool) {
	p := s.mu.parts[string(pKey)]
	if p == nil {
		return nil, false
	}
	r, ok := p.rows[string(cCols)]
	if !ok || s.expired(r) {
		return nil, false
	}
	return r.value, true
}

func (s *Store) expired(r *row) bool { return !r.expires.IsZero() && !s.now().Before(r.expires) }

// putVersionLocked is an unconditional write of version v: it replaces the
// row only if v orders at or above the stored row's version.
func (s *Store) putVersionLocked(r storage.Row) {
	if p := s.mu.parts[string(r.PKey)]; p != nil {
		if old, ok := p.rows[string(r.CCols)]; ok && !s.expired(old) && !storage.Replaces(r.Version, old.version) {
			return
		}
	}
	s.putLocked(r.PKey, r.CCols, r.Value, 0).version = r.Version
}

// putLocked writes the row (unversioned) and returns it for the caller to
// complete.
func (s *Store) putLocked(pKey, cCols, value []byte, ttl time.Duration) *row {
	p := s.mu.parts[string(pKey)]
	if p == nil {
		p = &partition{rows: map[string]*row{}}
		s.mu.parts[string(pKey)] = p
	}
	if _, ok := p.rows[string(cCols)]; !ok {
		p.sorted = nil
	}
	r := row{value: bytes.Clone(value)}
	if r.value == nil {
		r.value = []byte{}
	}
	if ttl > 0 {
		r.expires = s.now().Add(ttl)
	}
	p.rows[string(cCols)] = &r
	return &r
}

func (s *Store) deleteLocked(pKey, cCols []byte) {
	if p := s.mu.parts[string(pKey)]; p != nil {
		delete(p.rows, string(cCols))
		p.sorted = nil
	}
}

// Get implements storage.Storage.
func (s *Store) Get(ctx context.Context, pKey, cCols []byte) ([]byte, bool, error) {
	if err := s.lock(ctx); err != nil {
		return nil, false, err
	}
	defer s.mu.Unlock()
	v, ok := s.getLocked(pKey, cCols)
	return bytes.Clone(v), ok, nil
}

// GetBatch implements storage.Storage.
func (s *Store) GetBatch(ctx context.Context, pKey []byte, items []storage.GetItem) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	for i := range items {
		v, ok := s.getLocked(pKey, items[i].CCols)
		items[i].Ok, items[i].Value = ok, bytes.Clone(v)
	}
	return nil
}

// Put implements storage.Storage: an unversioned write, which does not
// replace a versioned row.
func (s *Store) Put(ctx context.Context, pKey, cCols, value []byte) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	s.putVersionLocked(storage.Row{PKey: pKey, CCols: cCols, Value: value})
	return nil
}

// PutBatch implements storage.Storage.
func (s *Store) PutBatch(ctx context.Context, rows []storage.Row) error {
	if err := storage.ValidateVersions(rows, false); err != nil {
		return fmt.Errorf("mem: put batch: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	for _, r := range rows {
		s.putVersionLocked(r)
	}
	return nil
}

// Read implements storage.Storage. It copies the range under the lock and
// calls cb without it, so cb may call the Store.
func (s *Store) Read(ctx context.Context, pKey, from, to []byte, cb func(cCols, value []byte) error) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	var out []storage.Row
	if p := s.mu.parts[string(pKey)]; p != nil {
		if p.sorted == nil {
			p.sorted = make([]string, 0, len(p.rows))
			for k := range p.rows {
				p.sorted = append(p.sorted, k)
			}
			slices.Sort(p.sorted)
		}
		i := 0
		if from != nil {
			i, _ = slices.BinarySearch(p.sorted, string(from))
		}
		for ; i < len(p.sorted); i++ {
			k := p.sorted[i]
			if to != nil && k >= string(to) {
				break
			}
			if r := p.rows[k]; !s.expired(r) {
				out = append(out, storage.Row{CCols: []byte(k), Value: r.value})
			}
		}
	}
	s.mu.Unlock()
	for _, r := range out {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("mem: %w", err)
		}
		if err := cb(r.CCols, bytes.Clone(r.Value)); err != nil {
			return err
		}
	}
	return nil
}

// ReadPartitions implements storage.Storage: a Read of each partition in
// turn.
func (s *Store) ReadPartitions(ctx context.Context, pKeys [][]byte, from, to []byte, cb func(pKey, cCols, value []byte) error) error {
	keys, err := storage.DistinctReadKeys(pKeys)
	if err != nil {
		return fmt.Errorf("mem: read partitions: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	s.mu.Unlock()
	for _, k := range keys {
		if err := s.Read(ctx, k, from, to, func(cCols, value []byte) error { return cb(k, cCols, value) }); err != nil {
			return err
		}
	}
	return nil
}

// InsertIfNotExists implements storage.Storage.
func (s *Store) InsertIfNotExists(ctx context.Context, pKey, cCols, value []byte, ttl time.Duration) (bool, error) {
	if err := storage.ValidateTTL(ttl); err != nil {
		return false, err
	}
	if err := s.lock(ctx); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	if _, ok := s.getLocked(pKey, cCols); ok {
		return false, nil
	}
	s.putLocked(pKey, cCols, value, ttl)
	return true, nil
}

// CompareAndSwap implements storage.Storage.
func (s *Store) CompareAndSwap(ctx context.Context, pKey, cCols, oldValue, newValue []byte, ttl time.Duration) (bool, error) {
	if err := storage.ValidateTTL(ttl); err != nil {
		return false, err
	}
	if err := s.lock(ctx); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	if v, ok := s.getLocked(pKey, cCols); !ok || !bytes.Equal(v, oldValue) {
		return false, nil
	}
	s.putLocked(pKey, cCols, newValue, ttl)
	return true, nil
}

// CompareAndDelete implements storage.Storage.
func (s *Store) CompareAndDelete(ctx context.Context, pKey, cCols, expected []byte) (bool, error) {
	if err := s.lock(ctx); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	if v, ok := s.getLocked(pKey, cCols); !ok || !bytes.Equal(v, expected) {
		return false, nil
	}
	s.deleteLocked(pKey, cCols)
	return true, nil
}

// ApplyBatchIf implements storage.Storage: one batch of ApplyBatchesIf.
func (s *Store) ApplyBatchIf(ctx context.Context, pKey []byte, conds []storage.Condition, rows []storage.Row) (bool, error) {
	return storage.ApplyOne(ctx, s, pKey, conds, rows)
}

var _ storage.MultiApplier = (*Store)(nil)

// ApplyBatchesIf implements storage.MultiApplier under the Store's lock.
func (s *Store) ApplyBatchesIf(ctx context.Context, batches []storage.CondBatch, applied []bool) error {
	clear(applied)
	if err := storage.ValidateBatches(batches, applied); err != nil {
		return fmt.Errorf("mem: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
batch:
	for i, b := range batches {
		if !b.Ready(applied) {
			continue
		}
		for _, c := range b.Conds {
			if v, ok := s.getLocked(b.PKey, c.CCols); !c.Holds(v, ok) {
				continue batch
			}
		}
		for _, r := range b.Rows {
			s.putVersionLocked(storage.Row{PKey: b.PKey, CCols: r.CCols, Value: r.Value, Version: r.Version})
		}
		applied[i] = true
	}
	return nil
}

// QueryTTL implements storage.Storage.
func (s *Store) QueryTTL(ctx context.Context, pKey, cCols []byte) (time.Duration, bool, error) {
	if err := s.lock(ctx); err != nil {
		return 0, false, err
	}
	defer s.mu.Unlock()
	p := s.mu.parts[string(pKey)]
	if p == nil {
		return 0, false, nil
	}
	r, ok := p.rows[string(cCols)]
	if !ok || s.expired(r) {
		return 0, false, nil
	}
	if r.expires.IsZero() {
		return 0, true, nil
	}
	return r.expires.Sub(s.now()), true, nil
}

// Close implements storage.Storage.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.closed = true
	s.mu.parts = nil
	return nil
}
