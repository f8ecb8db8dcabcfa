// Package drivertest owns the shared test support of code written against
// the storage contract: Each runs a test on every embedded driver (mem and
// bbolt; EachPath also with their optional interfaces hidden), and Counting
// counts a Storage's calls by operation. The drivers' own conformance suite
// is package storagetest; fault injection is package faulty.
package drivertest

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/boltdb"
	"github.com/cqlseq/cqlseq/storage/faulty"
	"github.com/cqlseq/cqlseq/storage/mem"
)

// Each runs f as the subtests "mem" and "bbolt", each on a fresh, empty
// store (bbolt without fsync, in t's temporary directory) that is closed at
// the subtest's cleanup.
func Each(t *testing.T, f func(t *testing.T, st storage.Storage)) {
	t.Run("mem", func(t *testing.T) {
		st := mem.New(mem.Options{})
		t.Cleanup(func() { _ = st.Close() })
		f(t, st)
	})
	t.Run("bbolt", func(t *testing.T) {
		st, err := boltdb.Open(filepath.Join(t.TempDir(), "drivertest.db"), boltdb.Options{NoSync: true})
		if err != nil {
			t.Fatalf("drivertest: %v", err)
		}
		t.Cleanup(func() { _ = st.Close() })
		f(t, st)
	})
}

// EachPath runs f as Each does, and then again as the subtest "contract"
// over each driver wrapped in ContractOnly: code with a faster path for an
// optional interface of the drivers (storage.MultiApplier) is tested on
// both paths.
func EachPath(t *testing.T, f func(t *testing.T, st storage.Storage)) {
	Each(t, f)
	t.Run("contract", func(t *testing.T) {
		Each(t, func(t *testing.T, st storage.Storage) { f(t, ContractOnly(st)) })
	})
}

// ContractOnly returns st with only the methods of storage.Storage: the
// optional interfaces st implements (storage.MultiApplier) are hidden.
func ContractOnly(st storage.Storage) storage.Storage { return contractOnly{st} }

type contractOnly struct{ storage.Storage }

// ops are the operation names Counting counts, in faulty's spelling.
var ops = faulty.AllOps()

// Counting wraps a Storage and counts its calls by operation. Safe for
// concurrent use. Close is passed on and not counted.
type Counting struct {
	storage.Storage
	calls []atomic.Int64 // by index in ops
}

var _ storage.Storage = (*Counting)(nil)

// NewCounting returns a Counting over st.
func NewCounting(st storage.Storage) *Counting {
	return &Counting{Storage: st, calls: make([]atomic.Int64, len(ops))}
}

func (c *Counting) index(op string) int {
	for i, o := range ops {
		if o == op {
			return i
		}
	}
	panic("drivertest: unknown operation " + op) // a test's typo
}

func (c *Counting) count(op string) { c.calls[c.index(op)].Add(1) }

// Calls returns how many calls of op (a faulty.Op... name) were made since
// NewCounting or the last Reset. It panics on an unknown name.
func (c *Counting) Calls(op string) int64 { return c.calls[c.index(op)].Load() }

// Reset sets every count to 0.
func (c *Counting) Reset() {
	for i := range c.calls {
		c.calls[i].Store(0)
	}
}

// Get counts and passes the call on.
func (c *Counting) Get(ctx context.Context, pKey, cCols []byte) ([]byte, bool, error) {
	c.count(faulty.OpGet)
	return c.Storage.Get(ctx, pKey, cCols)
}

// GetBatch counts and passes the call on.
func (c *Counting) GetBatch(ctx context.Context, pKey []byte, items []storage.GetItem) error {
	c.count(faulty.OpGetBatch)
	return c.Storage.GetBatch(ctx, pKey, items)
}

// Put counts and passes the call on.
func (c *Counting) Put(ctx context.Context, pKey, cCols, value []byte) error {
	c.count(faulty.OpPut)
	return c.Storage.Put(ctx, pKey, cCols, value)
}

// PutBatch counts and passes the call on.
func (c *Counting) PutBatch(ctx context.Context, rows []storage.Row) error {
	c.count(faulty.OpPutBatch)
	return c.Storage.PutBatch(ctx, rows)
}

// Read counts and passes the call on.
func (c *Counting) Read(ctx context.Context, pKey, from, to []byte, cb func(cCols, value []byte) error) error {
	c.count(faulty.OpRead)
	return c.Storage.Read(ctx, pKey, from, to, cb)
}

// ReadPartitions counts and passes the call on.
func (c *Counting) ReadPartitions(ctx context.Context, pKeys [][]byte, from, to []byte, cb func(pKey, cCols, value []byte) error) error {
	c.count(faulty.OpReadPartitions)
	return c.Storage.ReadPartitions(ctx, pKeys, from, to, cb)
}

// InsertIfNotExists counts and passes the call on.
func (c *Counting) InsertIfNotExists(ctx context.Context, pKey, cCols, value []byte, ttl time.Duration) (bool, error) {
	c.count(faulty.OpInsertIfNotExists)
	return c.Storage.InsertIfNotExists(ctx, pKey, cCols, value, ttl)
}

// CompareAndSwap counts and passes the call on.
func (c *Counting) CompareAndSwap(ctx context.Context, pKey, cCols, oldValue, newValue []byte, ttl time.Duration) (bool, error) {
	c.count(faulty.OpCompareAndSwap)
	return c.Storage.CompareAndSwap(ctx, pKey, cCols, oldValue, newValue, ttl)
}

// CompareAndDelete counts and passes the call on.
func (c *Counting) CompareAndDelete(ctx context.Context, pKey, cCols, expected []byte) (bool, error) {
	c.count(faulty.OpCompareAndDelete)
	return c.Storage.CompareAndDelete(ctx, pKey, cCols, expected)
}

// ApplyBatchIf counts and passes the call on.
func (c *Counting) ApplyBatchIf(ctx context.Context, pKey []byte, conds []storage.Condition, rows []storage.Row) (bool, error) {
	c.count(faulty.OpApplyBatchIf)
	return c.Storage.ApplyBatchIf(ctx, pKey, conds, rows)
}

// QueryTTL counts and passes the call on.
func (c *Counting) QueryTTL(ctx context.Context, pKey, cCols []byte) (time.Duration, bool, error) {
	c.count(faulty.OpQueryTTL)
	return c.Storage.QueryTTL(ctx, pKey, cCols)
}
