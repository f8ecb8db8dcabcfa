// Package faulty owns cqlseq's storage fault injection: a wrapper around a
// storage.Storage that fails, delays or times out chosen calls (by
// operation, clustering key, probability and count), by rules that can
// change while the Store is in use. Tests and the CLI's bench use it to
// drive code through storage faults.
package faulty

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cqlseq/cqlseq/storage"
)

var (
	// ErrInjected wraps every fault a Store injects.
	ErrInjected = errors.New("faulty: injected fault")

	// ErrInvalidRule wraps every problem found in rules. It wraps
	// storage.ErrInvalidArgument.
	ErrInvalidRule = fmt.Errorf("faulty: invalid rule: %w", storage.ErrInvalidArgument)
)

// Options configure a Store.
type Options struct {
	// Seed seeds the generator that Rule.Probability draws from: the same
	// seed and the same sequence of calls give the same faults.
	Seed uint64

	// Rules are the initial rules; see SetRules.
	Rules []Rule
}

// EnsureDefaults copies Rules (the caller's slice is not changed) and sets
// each rule's zero Probability to 1 and a Fail rule's nil Err to
// storage.ErrUnavailable.
func (o *Options) EnsureDefaults() { o.Rules = withDefaults(o.Rules) }

// Validate reports every problem of o at once; each wraps ErrInvalidRule.
func (o *Options) Validate() error { return ValidateRules(o.Rules) }

func withDefaults(rules []Rule) []Rule {
	rules = slices.Clone(rules)
	for i := range rules {
		r := &rules[i]
		r.Ops = slices.Clone(r.Ops)
		r.CCols = bytes.Clone(r.CCols)
		if r.Probability == 0 {
			r.Probability = 1
		}
		if r.Action == Fail && r.Err == nil {
			r.Err = storage.ErrUnavailable
		}
	}
	return rules
}

// Store implements storage.Storage over another Storage, injecting faults
// as its rules say. Safe for concurrent use.
type Store struct {
	inner    storage.Storage
	injected atomic.Uint64
	closing  chan struct{} // closed by Close: ends Timeout and Delay waits
	closeOne sync.Once
	mu       struct {
		sync.Mutex
		rules []rule
		rng   *rand.Rand
		byOp  map[string]uint64 // faults injected per operation
	}
}

// rule is a Rule with its remaining count.
type rule struct {
	Rule
	left int // fires left when Times > 0
}

var _ storage.Storage = (*Store)(nil)

// New wraps inner. It fails only for invalid rules or a nil inner.
func New(inner storage.Storage, o Options) (*Store, error) {
	o.EnsureDefaults()
	err := o.Validate()
	if inner == nil {
		err = errors.Join(err, fmt.Errorf("faulty: %w: inner Storage is nil", storage.ErrInvalidArgument))
	}
	if err != nil {
		return nil, err
	}
	s := &Store{inner: inner, closing: make(chan struct{})}
	s.mu.rng = rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	s.mu.byOp = make(map[string]uint64)
	s.setLocked(o.Rules)
	return s, nil
}

var (
	_ storage.Wrapper      = (*Store)(nil)
	_ storage.MultiApplier = (*Store)(nil)
)

// Unwrap implements storage.Wrapper: it returns the wrapped Storage.
func (s *Store) Unwrap() storage.Storage { return s.inner }

// SetRules replaces the rules, restarting every Times count. Calls already
// delayed or blocked by a rule are not released. Invalid rules change
// nothing and are reported, every problem at once.
func (s *Store) SetRules(rules ...Rule) error {
	rules = withDefaults(rules)
	if err := ValidateRules(rules); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setLocked(rules)
	return nil
}

// Clear removes every rule: calls from now on pass through.
func (s *Store) Clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.rules = nil
}

func (s *Store) setLocked(rules []Rule) {
	s.mu.rules = make([]rule, len(rules))
	for i, r := range rules {
		s.mu.rules[i] = rule{Rule: r, left: r.Times}
	}
}

// Injected returns how many faults the Store has injected so far.
func (s *Store) Injected() uint64 { return s.injected.Load() }

// InjectedOn returns how many faults the Store has injected so far into
// calls of op.
func (s *Store) InjectedOn(op string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.byOp[op]
}

// pick returns the rule that fires on this call of op on key, if any.
func (s *Store) pick(op string, key []byte, keyed bool) (Rule, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.mu.rules {
		r := &s.mu.rules[i]
		if r.Times > 0 && r.left == 0 || !r.matches(op, key, keyed) {
			continue
		}
		if r.Probability < 1 && s.mu.rng.Float64() >= r.Probability {
			continue
		}
		if r.Times > 0 {
			r.left--
		}
		s.injected.Add(1)
		s.mu.byOp[op]++
		return r.Rule, true
	}
	return Rule{}, false
}

// do runs call as the rule picked for op says; the call has no single
// clustering key.
func (s *Store) do(ctx context.Context, op string, call func() error) error {
	return s.doKeyed(ctx, op, nil, false, call)
}

// doKey is do for a call on one clustering key.
func (s *Store) doKey(ctx context.Context, op string, key []byte, call func() error) error {
	return s.doKeyed(ctx, op, key, true, call)
}

func (s *Store) doKeyed(ctx context.Context, op string, key []byte, keyed bool, call func() error) error {
	r, ok := s.pick(op, key, keyed)
	if !ok {
		return call()
	}
	if r.AfterCall {
		if err := call(); err != nil {
			return err
		}
		return s.act(ctx, op, &r)
	}
	if err := s.act(ctx, op, &r); err != nil {
		return err
	}
	return call()
}

// act carries out r's action; nil lets the call go on (or stand).
func (s *Store) act(ctx context.Context, op string, r *Rule) error {
	switch r.Action {
	case Fail:
		return fmt.Errorf("%w: %s: %w", ErrInjected, op, r.Err)
	case Delay:
		t := time.NewTimer(r.Delay)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("faulty: %s delayed %v: %w", op, r.Delay, ctx.Err())
		case <-s.closing:
			return fmt.Errorf("faulty: %s: %w", op, storage.ErrClosed)
		}
	default: // Timeout
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %s timed out: %w", ErrInjected, op, ctx.Err())
		case <-s.closing:
			return fmt.Errorf("faulty: %s: %w", op, storage.ErrClosed)
		}
	}
}

// Get implements storage.Storage.
func (s *Store) Get(ctx context.Context, pKey, cCols []byte) (value []byte, ok bool, err error) {
	err = s.doKey(ctx, OpGet, cCols, func() (err error) {
		value, ok, err = s.inner.Get(ctx, pKey, cCols)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return value, ok, nil
}

// GetBatch implements storage.Storage.
func (s *Store) GetBatch(ctx context.Context, pKey []byte, items []storage.GetItem) error {
	return s.do(ctx, OpGetBatch, func() error { return s.inner.GetBatch(ctx, pKey, items) })
}

// Put implements storage.Storage.
func (s *Store) Put(ctx context.Context, pKey, cCols, value []byte) error {
	return s.doKey(ctx, OpPut, cCols, func() error { return s.inner.Put(ctx, pKey, cCols, value) })
}

// PutBatch implements storage.Storage.
func (s *Store) PutBatch(ctx context.Context, rows []storage.Row) error {
	return s.do(ctx, OpPutBatch, func() error { return s.inner.PutBatch(ctx, rows) })
}

// Read implements storage.Storage. A fault before the call delivers no
// rows; one after it delivers them all, then fails.
func (s *Store) Read(ctx context.Context, pKey, fromCCols, toCCols []byte, cb func(cCols, value []byte) error) error {
	return s.do(ctx, OpRead, func() error { return s.inner.Read(ctx, pKey, fromCCols, toCCols, cb) })
}

// ReadPartitions implements storage.Storage.
func (s *Store) ReadPartitions(ctx context.Context, pKeys [][]byte, fromCCols, toCCols []byte, cb func(pKey, cCols, value []byte) error) error {
	return s.do(ctx, OpReadPartitions, func() error { return s.inner.ReadPartitions(ctx, pKeys, fromCCols, toCCols, cb) })
}

// InsertIfNotExists implements storage.Storage.
func (s *Store) InsertIfNotExists(ctx context.Context, pKey, cCols, value []byte, ttl time.Duration) (ok bool, err error) {
	err = s.doKey(ctx, OpInsertIfNotExists, cCols, func() (err error) {
		ok, err = s.inner.InsertIfNotExists(ctx, pKey, cCols, value, ttl)
		return err
	})
	return ok && err == nil, err
}

// CompareAndSwap implements storage.Storage.
func (s *Store) CompareAndSwap(ctx context.Context, pKey, cCols, oldValue, newValue []byte, ttl time.Duration) (ok bool, err error) {
	err = s.doKey(ctx, OpCompareAndSwap, cCols, func() (err error) {
		ok, err = s.inner.CompareAndSwap(ctx, pKey, cCols, oldValue, newValue, ttl)
		return err
	})
	return ok && err == nil, err
}

// CompareAndDelete implements storage.Storage.
func (s *Store) CompareAndDelete(ctx context.Context, pKey, cCols, expected []byte) (ok bool, err error) {
	err = s.doKey(ctx, OpCompareAndDelete, cCols, func() (err error) {
		ok, err = s.inner.CompareAndDelete(ctx, pKey, cCols, expected)
		return err
	})
	return ok && err == nil, err
}

// ApplyBatchIf implements storage.Storage.
func (s *Store) ApplyBatchIf(ctx context.Context, pKey []byte, conds []storage.Condition, rows []storage.Row) (ok bool, err error) {
	err = s.do(ctx, OpApplyBatchIf, func() (err error) {
		ok, err = s.inner.ApplyBatchIf(ctx, pKey, conds, rows)
		return err
	})
	return ok && err == nil, err
}

// ApplyBatchesIf implements storage.MultiApplier (operation
// OpApplyBatchesIf) over a wrapped MultiApplier; over any other storage it
// refuses the call (storage.ErrNotMultiApplier, not faulted). An injected
// error (after the call, too) leaves applied all false, as the interface
// says of any error.
func (s *Store) ApplyBatchesIf(ctx context.Context, batches []storage.CondBatch, applied []bool) error {
	ma, ok := s.inner.(storage.MultiApplier)
	if !ok {
		return fmt.Errorf("faulty: %w", storage.ErrNotMultiApplier)
	}
	err := s.do(ctx, OpApplyBatchesIf, func() error { return ma.ApplyBatchesIf(ctx, batches, applied) })
	if err != nil {
		clear(applied)
	}
	return err
}

// QueryTTL implements storage.Storage.
func (s *Store) QueryTTL(ctx context.Context, pKey, cCols []byte) (ttl time.Duration, ok bool, err error) {
	err = s.doKey(ctx, OpQueryTTL, cCols, func() (err error) {
		ttl, ok, err = s.inner.QueryTTL(ctx, pKey, cCols)
		return err
	})
	if err != nil {
		return 0, false, err
	}
	return ttl, ok, nil
}

// Close releases calls that a rule is delaying or blocking (they return
// storage.ErrClosed) and closes the wrapped Storage. Close is never
// faulted.
func (s *Store) Close() error {
	s.closeOne.Do(func() { close(s.closing) })
	return s.inner.Close()
}
