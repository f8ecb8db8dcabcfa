package boltdb

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"

	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/storagetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is a settable clock shared by the stores of one harness.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Unix(1_700_000_000, 0)} }

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// openT opens a Store at path and closes it when the test ends.
func openT(t testing.TB, path string, o Options) *Store {
	t.Helper()
	s, err := Open(path, o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// harness opens a fresh file per store. With reclaim, Advance also reclaims
// expired rows in every open store, so the suite runs against a file whose
// expired rows are physically gone.
func harness(noSync, reclaim bool) storagetest.Harness {
	c := newClock()
	var mu sync.Mutex
	var stores []*Store
	return storagetest.Harness{
		New: func(t testing.TB) storage.Storage {
			s := openT(t, filepath.Join(t.TempDir(), "cqlseq.db"), Options{NoSync: noSync, Now: c.Now})
			mu.Lock()
			stores = append(stores, s)
			mu.Unlock()
			return s
		},
		Advance: func(t testing.TB, d time.Duration) {
			c.advance(d)
			if !reclaim {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, s := range stores {
				if _, err := s.Reclaim(context.Background()); err != nil && !errors.Is(err, storage.ErrClosed) {
					t.Fatalf("Reclaim: %v", err)
				}
			}
		},
	}
}

func TestConformance(t *testing.T) { storagetest.Run(t, harness(false, false)) }

func TestConformanceReclaimOnAdvance(t *testing.T) { storagetest.Run(t, harness(true, true)) }

func BenchmarkBoltDB(b *testing.B) { storagetest.RunBenchmarks(b, harness(false, false)) }

func BenchmarkBoltDBNoSync(b *testing.B) { storagetest.RunBenchmarks(b, harness(true, false)) }

func TestPersistenceAcrossRestart(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	path := filepath.Join(t.TempDir(), "restart.db")
	s, err := Open(path, Options{Now: c.Now})
	require.NoError(t, err)
	p := []byte("ws\x00\x01")
	require.NoError(t, s.Put(ctx, p, []byte("a"), []byte("1")))
	require.NoError(t, s.PutBatch(ctx, []storage.Row{
		{PKey: p, CCols: []byte("b"), Value: []byte("2")},
		{PKey: []byte("other"), CCols: []byte{0}, Value: []byte{}},
	}))
	ok, err := s.InsertIfNotExists(ctx, p, []byte("lease"), []byte("me"), 10*time.Second)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = s.CompareAndDelete(ctx, p, []byte("a"), []byte("1"))
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, s.Close())

	c.advance(4 * time.Second)
	s2 := openT(t, path, Options{Now: c.Now})
	_, ok, err = s2.Get(ctx, p, []byte("a"))
	require.NoError(t, err)
	assert.False(t, ok, "the delete survived the restart")
	v, ok, err := s2.Get(ctx, p, []byte("b"))
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, []byte("2"), v)
	v, ok, err = s2.Get(ctx, []byte("other"), []byte{0})
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, []byte{}, v)
	ttl, ok, err := s2.QueryTTL(ctx, p, []byte("lease"))
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, 6*time.Second, ttl, "the expiry is stored, not the TTL")
	ok, err = s2.InsertIfNotExists(ctx, p, []byte("lease"), []byte("you"), time.Second)
	require.NoError(t, err)
	assert.False(t, ok, "the lease is still held after the restart")

	c.advance(6 * time.Second)
	_, ok, err = s2.Get(ctx, p, []byte("lease"))
	require.NoError(t, err)
	assert.False(t, ok, "expired at the stored instant")
}

func TestSecondOpenTimesOut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locked.db")
	first := openT(t, path, Options{})
	second, err := Open(path, Options{Timeout: 100 * time.Millisecond})
	require.Error(t, err)
	assert.Nil(t, second)
	assert.ErrorIs(t, err, storage.ErrUnavailable)
	assert.ErrorIs(t, err, ErrLocked)
	assert.Contains(t, err.Error(), path, "the error names the file")
	assert.Contains(t, err.Error(), "locked")

	require.NoError(t, first.Close())
	second, err = Open(path, Options{Timeout: time.Second})
	require.NoError(t, err, "the lock is released on Close")
	require.NoError(t, second.Close())
}

func TestSweeperReclaimsExpiredRows(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	tick := make(chan time.Time)
	swept := make(chan int)
	s, err := open(filepath.Join(t.TempDir(), "sweep.db"), Options{Now: c.Now, NoSync: true}, hooks{tick: tick, swept: swept})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })

	const expiring = 2*reclaimChunk + 500 // more than one reclaim transaction
	p := []byte("p")
	for i := range expiring {
		ok, err := s.InsertIfNotExists(ctx, p, fmt.Appendf(nil, "e%05d", i), []byte("v"), 5*time.Second)
		require.NoError(t, err)
		require.True(t, ok)
	}
	require.NoError(t, s.Put(ctx, p, []byte("plain"), []byte("v")))
	_, err = s.InsertIfNotExists(ctx, p, []byte("overwritten"), []byte("v"), 5*time.Second)
	require.NoError(t, err)
	require.NoError(t, s.Put(ctx, p, []byte("overwritten"), []byte("w")), "a Put removes the TTL")
	_, err = s.InsertIfNotExists(ctx, p, []byte("renewed"), []byte("v"), 5*time.Second)
	require.NoError(t, err)
	ok, err := s.CompareAndSwap(ctx, p, []byte("renewed"), []byte("v"), []byte("v"), 60*time.Second)
	require.NoError(t, err)
	require.True(t, ok)

	tick <- time.Time{}
	assert.Equal(t, 0, <-swept, "nothing is due yet")
	assert.Equal(t, expiring+3, countRows(t, s))

	c.advance(5 * time.Second)
	tick <- time.Time{}
	assert.Equal(t, expiring, <-swept)
	assert.Equal(t, 3, countRows(t, s), "plain, overwritten and renewed remain")
	assert.Equal(t, 1, countBucket(t, s, bucketExpiry), "only the renewed lease's index entry remains")
	for _, k := range []string{"plain", "overwritten", "renewed"} {
		_, ok, err := s.Get(ctx, p, []byte(k))
		require.NoError(t, err)
		assert.True(t, ok, k)
	}

	c.advance(55 * time.Second)
	tick <- time.Time{}
	assert.Equal(t, 1, <-swept)
	assert.Equal(t, 0, countBucket(t, s, bucketExpiry))
	assert.Equal(t, 2, countRows(t, s))

	ok, err = s.InsertIfNotExists(ctx, p, []byte("renewed"), []byte("again"), 0)
	require.NoError(t, err)
	assert.True(t, ok)
	require.NoError(t, s.Close(), "Close cancels and waits for the sweeper")
}

func countRows(t *testing.T, s *Store) int { return countBucket(t, s, bucketRows) }

func countBucket(t *testing.T, s *Store, name []byte) int {
	t.Helper()
	n := 0
	require.NoError(t, s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(name).ForEach(func(_, _ []byte) error { n++; return nil })
	}))
	return n
}

func TestSweeperStartsAndStops(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "tick.db"), Options{NoSync: true, ReclaimInterval: time.Hour})
	require.NoError(t, err)
	select {
	case <-s.done:
		t.Fatal("Open starts the sweeper")
	default:
	}
	require.NoError(t, s.Close())
	select {
	case <-s.done:
	default:
		t.Fatal("Close returned before the sweeper did")
	}
}

func TestSweeperDisabled(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "off.db"), Options{ReclaimInterval: -1, NoSync: true})
	select {
	case <-s.done:
	default:
		t.Fatal("a disabled sweeper is not running")
	}
	n, err := s.Reclaim(context.Background())
	require.NoError(t, err)
	assert.Zero(t, n)
}

func TestCloseIsIdempotent(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "close.db"), Options{NoSync: true})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())
	p, c := []byte("p"), []byte("c")
	calls := map[string]error{}
	_, _, calls["Get"] = s.Get(ctx, p, c)
	calls["GetBatch"] = s.GetBatch(ctx, p, []storage.GetItem{{CCols: c}})
	calls["Put"] = s.Put(ctx, p, c, nil)
	calls["PutBatch"] = s.PutBatch(ctx, []storage.Row{{PKey: p, CCols: c}})
	calls["Read"] = s.Read(ctx, p, nil, nil, func(_, _ []byte) error { return nil })
	_, calls["InsertIfNotExists"] = s.InsertIfNotExists(ctx, p, c, nil, 0)
	_, calls["CompareAndSwap"] = s.CompareAndSwap(ctx, p, c, nil, nil, 0)
	_, calls["CompareAndDelete"] = s.CompareAndDelete(ctx, p, c, nil)
	_, calls["ApplyBatchIf"] = s.ApplyBatchIf(ctx, p, nil, nil)
	_, _, calls["QueryTTL"] = s.QueryTTL(ctx, p, c)
	_, calls["Reclaim"] = s.Reclaim(ctx)
	for name, err := range calls {
		assert.ErrorIs(t, err, storage.ErrClosed, name)
	}
}

func TestInvalidArguments(t *testing.T) {
	ctx := context.Background()
	s := openT(t, filepath.Join(t.TempDir(), "args.db"), Options{NoSync: true})
	c := []byte("c")
	calls := map[string]error{}
	_, _, calls["Get"] = s.Get(ctx, nil, c)
	calls["GetBatch"] = s.GetBatch(ctx, []byte{}, nil)
	calls["Put"] = s.Put(ctx, nil, c, nil)
	calls["PutBatch"] = s.PutBatch(ctx, []storage.Row{{PKey: []byte("p"), CCols: c}, {CCols: c}})
	calls["Read"] = s.Read(ctx, nil, nil, nil, func(_, _ []byte) error { return nil })
	_, calls["InsertIfNotExists"] = s.InsertIfNotExists(ctx, nil, c, nil, 0)
	_, calls["CompareAndSwap"] = s.CompareAndSwap(ctx, nil, c, nil, nil, 0)
	_, calls["CompareAndDelete"] = s.CompareAndDelete(ctx, nil, c, nil)
	_, calls["ApplyBatchIf"] = s.ApplyBatchIf(ctx, nil, nil, nil)
	_, _, calls["QueryTTL"] = s.QueryTTL(ctx, nil, c)
	calls["Put/key too long"] = s.Put(ctx, []byte("p"), make([]byte, bolt.MaxKeySize), nil)
	_, calls["CompareAndSwap/ttl"] = s.CompareAndSwap(ctx, []byte("p"), c, nil, nil, -time.Second)
	_, calls["ApplyBatchIf/foreign row"] = s.ApplyBatchIf(ctx, []byte("p"), nil, []storage.Row{{PKey: []byte("q"), CCols: c}})
	for name, err := range calls {
		assert.ErrorIs(t, err, storage.ErrInvalidArgument, name)
		if err != nil {
			assert.True(t, strings.HasPrefix(err.Error(), "boltdb: "), "%s: %v", name, err)
		}
	}
	_, ok, err := s.Get(ctx, []byte("p"), c)
	require.NoError(t, err)
	assert.False(t, ok, "a rejected batch writes nothing")
}

func TestEmptyClusteringKey(t *testing.T) {
	ctx := context.Background()
	s := openT(t, filepath.Join(t.TempDir(), "empty.db"), Options{NoSync: true})
	p := []byte("p")
	require.NoError(t, s.Put(ctx, p, nil, []byte("root")))
	require.NoError(t, s.Put(ctx, p, []byte{0}, []byte("zero")))
	v, ok, err := s.Get(ctx, p, []byte{})
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, []byte("root"), v)
	var keys [][]byte
	require.NoError(t, s.Read(ctx, p, nil, nil, func(c, _ []byte) error {
		keys = append(keys, append([]byte{}, c...))
		return nil
	}))
	assert.Equal(t, [][]byte{{}, {0}}, keys)
}

func TestOptionsValidate(t *testing.T) {
	o := Options{Timeout: -time.Second}
	err := o.Validate()
	require.ErrorIs(t, err, ErrInvalidOptions)
	require.ErrorIs(t, err, storage.ErrInvalidArgument)
	for _, want := range []string{"Timeout", "Now", "Logger"} {
		assert.Contains(t, err.Error(), want, "every problem is reported")
	}
	o = Options{}
	o.EnsureDefaults()
	require.NoError(t, o.Validate())
	assert.Equal(t, DefaultTimeout, o.Timeout)
	assert.Equal(t, DefaultReclaimInterval, o.ReclaimInterval)

	_, err = Open("", Options{})
	assert.ErrorIs(t, err, ErrInvalidOptions)
	_, err = Open(filepath.Join(t.TempDir(), "x.db"), Options{Timeout: -1})
	assert.ErrorIs(t, err, ErrInvalidOptions)
}

func TestForeignFiles(t *testing.T) {
	dir := t.TempDir()
	notBolt := filepath.Join(dir, "text")
	require.NoError(t, os.WriteFile(notBolt, []byte(strings.Repeat("not a bbolt file\n", 1000)), 0o600))
	_, err := Open(notBolt, Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), notBolt)

	other := filepath.Join(dir, "other.db")
	db, err := bolt.Open(other, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("theirs")); return err }))
	require.NoError(t, db.Close())
	_, err = Open(other, Options{})
	assert.ErrorIs(t, err, ErrIncompatible)

	newer := filepath.Join(dir, "newer.db")
	s, err := Open(newer, Options{})
	require.NoError(t, err)
	require.NoError(t, s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyLayout, []byte{layoutVersion + 1}) }))
	require.NoError(t, s.Close())
	_, err = Open(newer, Options{})
	assert.ErrorIs(t, err, ErrIncompatible)
}

func TestCorruptRowIsReported(t *testing.T) {
	ctx := context.Background()
	s := openT(t, filepath.Join(t.TempDir(), "corrupt.db"), Options{NoSync: true})
	p, c := []byte("p"), []byte("c")
	require.NoError(t, s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketRows).Put(rowKey(p, c), []byte{0x7f, 1}) }))
	_, _, err := s.Get(ctx, p, c)
	assert.ErrorIs(t, err, ErrCorrupt)
	err = s.Read(ctx, p, nil, nil, func(_, _ []byte) error { return nil })
	assert.ErrorIs(t, err, ErrCorrupt)
	_, err = s.CompareAndSwap(ctx, p, c, nil, []byte("x"), 0)
	assert.ErrorIs(t, err, ErrCorrupt)
	raw := s.db.View(func(tx *bolt.Tx) error {
		assert.Equal(t, []byte{0x7f, 1}, tx.Bucket(bucketRows).Get(rowKey(p, c)), "nothing overwrote the corrupt row")
		return nil
	})
	require.NoError(t, raw)
}
