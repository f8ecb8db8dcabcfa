package boltdb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/cqlseq/cqlseq/storage"
)

// realFile returns the bytes of a small file written by the driver: rows
// in a few partitions (some with a TTL, a value spilling onto overflow
// pages, deleted rows leaving free pages), closed cleanly.
func realFile(t testing.TB) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "real.db")
	s, err := Open(path, Options{NoSync: true, ReclaimInterval: -1})
	require.NoError(t, err)
	ctx := context.Background()
	for p := range 3 {
		pk := []byte{'p', byte(p)}
		for c := range 40 {
			require.NoError(t, s.Put(ctx, pk, []byte{byte(c)}, bytes.Repeat([]byte{byte(c)}, 20)))
		}
		_, err := s.InsertIfNotExists(ctx, pk, []byte("ttl"), []byte("v"), time.Hour)
		require.NoError(t, err)
	}
	require.NoError(t, s.Put(ctx, []byte("big"), nil, bytes.Repeat([]byte("x"), 9000)))
	for c := range 20 {
		_, err := s.CompareAndDelete(ctx, []byte{'p', 1}, []byte{byte(c)}, bytes.Repeat([]byte{byte(c)}, 20))
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// writeFile writes b to a new file and returns its path.
func writeFile(t testing.TB, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "f.db")
	require.NoError(t, os.WriteFile(path, b, 0o600))
	return path
}

// metaOf returns the meta page bbolt uses in b (4 KiB pages).
func metaOf(t testing.TB, b []byte) boltMeta {
	t.Helper()
	c := &fileChecker{r: bytes.NewReader(b), size: int64(len(b)), m: boltMeta{pageSize: 4096}}
	require.NoError(t, c.pickMeta())
	return c.m
}

// TestCorruptFilesAreRefused: each broken file makes Open fail with
// ErrCorruptFile, read-only or not, instead of faulting the process (a
// truncated file crashed bbolt's loadFreelist with SIGSEGV). The file is
// left as it was.
func TestCorruptFilesAreRefused(t *testing.T) {
	good := realFile(t)
	m := metaOf(t, good)
	require.Equal(t, 0, len(good)%4096)
	page := func(b []byte, id uint64) []byte { return b[id*4096 : (id+1)*4096] }
	edit := func(f func(b []byte)) []byte {
		b := bytes.Clone(good)
		f(b)
		return b
	}
	for _, tc := range []struct {
		name, werr string
		file       []byte
	}{
		{"truncated to 20000 bytes", "size 20000 is not a whole number of 4096-byte pages", good[:20000]},
		{"truncated below the high-water mark", "high-water mark", good[:(m.pgid-1)*4096]},
		{"both meta pages broken", "checksum", edit(func(b []byte) { b[16+60]++; b[4096+16+60]++ })},
		{"not a freelist page", "want 0x10", edit(func(b []byte) { ne.PutUint16(page(b, m.freelist)[8:], leafPage) })},
		{"free page id past the end", "free page id", edit(func(b []byte) {
			p := page(b, m.freelist)
			ne.PutUint16(p[10:], 1)
			ne.PutUint64(p[16:], m.pgid+5)
		})},
		{"freelist count past the page", "do not fit", edit(func(b []byte) { ne.PutUint16(page(b, m.freelist)[10:], 0xFFF0) })},
		{"root element key past the page", "key and value end", edit(func(b []byte) { ne.PutUint32(page(b, m.root)[16+4:], 0xFFFFFF00) })},
		{"root element count past the page", "elements do not fit", edit(func(b []byte) { ne.PutUint16(page(b, m.root)[10:], 0xFFFF) })},
		{"root page id past the end", "outside", edit(func(b []byte) {
			// Both metas point at a page past the end, with valid checksums.
			for _, off := range []int{16, 4096 + 16} {
				meta := b[off : off+metaSize]
				ne.PutUint64(meta[16:], m.pgid+100)
				h := fnvSum(meta[:metaSumSize])
				ne.PutUint64(meta[metaSumSize:], h)
			}
		})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, tc.file)
			for _, ro := range []bool{true, false} {
				s, err := Open(path, Options{ReadOnly: ro, ReclaimInterval: -1})
				if s != nil {
					_ = s.Close()
				}
				require.ErrorIs(t, err, ErrCorruptFile, "read-only %v", ro)
				assert.Contains(t, err.Error(), tc.werr)
				assert.Contains(t, err.Error(), path)
			}
			after, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(tc.file, after), "the file is not changed")
		})
	}
}

func fnvSum(b []byte) uint64 {
	h := fnv.New64a()
	_, _ = h.Write(b)
	return h.Sum64()
}

// TestReadOnly: a read-only Store reads a file without changing a byte of
// it, refuses writes with ErrReadOnly, runs no sweeper, and shares the
// file with other read-only Stores; a missing or empty file is an error,
// and an empty one stays empty (inspect grew it to 32 KiB).
func TestReadOnly(t *testing.T) {
	good := realFile(t)
	path := writeFile(t, good)
	ctx := context.Background()
	a := openT(t, path, Options{ReadOnly: true})
	b := openT(t, path, Options{ReadOnly: true})
	for _, s := range []*Store{a, b} {
		v, ok, err := s.Get(ctx, []byte{'p', 2}, []byte{7})
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, bytes.Repeat([]byte{7}, 20), v)
	}
	err := a.Put(ctx, []byte("p"), nil, []byte("v"))
	require.ErrorIs(t, err, ErrReadOnly)
	assert.Contains(t, err.Error(), path)
	_, err = a.InsertIfNotExists(ctx, []byte("p"), nil, []byte("v"), 0)
	require.ErrorIs(t, err, ErrReadOnly)
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(good, after), "not a byte changed")

	_, err = Open(filepath.Join(t.TempDir(), "missing.db"), Options{ReadOnly: true})
	require.ErrorIs(t, err, fs.ErrNotExist)
	assert.Contains(t, err.Error(), "missing.db")
	assert.NoFileExists(t, filepath.Join(t.TempDir(), "missing.db"))

	empty := writeFile(t, nil)
	_, err = Open(empty, Options{ReadOnly: true})
	require.ErrorIs(t, err, ErrIncompatible)
	assert.Contains(t, err.Error(), "empty")
	fi, err := os.Stat(empty)
	require.NoError(t, err)
	assert.Zero(t, fi.Size(), "the empty file stays empty")

	// A bbolt file this package never initialised.
	foreign := filepath.Join(t.TempDir(), "foreign.db")
	db, err := bolt.Open(foreign, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	_, err = Open(foreign, Options{ReadOnly: true})
	require.ErrorIs(t, err, ErrIncompatible)
}

// TestReadOnlyWaitsForWriter: a writer's lock keeps a read-only Open out
// (bounded by Timeout), so the check never reads a commit in progress.
func TestReadOnlyWaitsForWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.db")
	w := openT(t, path, Options{NoSync: true})
	_, err := Open(path, Options{ReadOnly: true, Timeout: 50 * time.Millisecond})
	require.ErrorIs(t, err, storage.ErrUnavailable)
	require.NoError(t, w.Close())
	openT(t, path, Options{ReadOnly: true})
}

// FuzzOpen: Open of a truncated or bit-flipped copy of a real file either
// fails or gives a usable Store; it never crashes the process. The seeds
// are the file, truncations and single bit flips in each page of it.
func FuzzOpen(f *testing.F) {
	good := realFile(f)
	f.Add(good)
	for _, n := range []int{0, 100, 4096, 8192, 20000, len(good) - 4096, len(good) - 1} {
		if n >= 0 && n < len(good) {
			f.Add(good[:n])
		}
	}
	for off := 5; off < len(good); off += 4096 / 4 {
		b := bytes.Clone(good)
		b[off] ^= 1 << (off % 8)
		f.Add(b)
	}
	dir := f.TempDir()
	i := 0
	f.Fuzz(func(t *testing.T, b []byte) {
		i++
		path := filepath.Join(dir, fmt.Sprintf("fuzz-%d.db", i))
		require.NoError(t, os.WriteFile(path, b, 0o600))
		defer os.Remove(path)
		for _, ro := range []bool{true, false} {
			s, err := Open(path, Options{ReadOnly: ro, NoSync: true, ReclaimInterval: -1, Timeout: time.Second})
			if err != nil {
				if !errors.Is(err, ErrCorruptFile) && !errors.Is(err, ErrIncompatible) {
					t.Fatalf("read-only %v: an error of no known kind: %v", ro, err)
				}
				continue
			}
			useStore(t, s, ro)
			require.NoError(t, s.Close())
		}
	})
}

// useStore reads every row of s (and, if writable, writes and deletes
// some); errors are fine, crashes are not.
func useStore(t *testing.T, s *Store, ro bool) {
	ctx := context.Background()
	_ = s.view(ctx, func(rows *bolt.Bucket, _ int64) error {
		return rows.Tx().ForEach(func(name []byte, bk *bolt.Bucket) error {
			return bk.ForEach(func(k, v []byte) error {
				if bytes.Equal(name, bucketRows) {
					_, _, _ = decodeValue(v)
				}
				return nil
			})
		})
	})
	for p := range 3 {
		_ = s.Read(ctx, []byte{'p', byte(p)}, nil, nil, func(_, _ []byte) error { return nil })
	}
	if ro {
		return
	}
	_ = s.Put(ctx, []byte{'p', 1}, []byte{99}, bytes.Repeat([]byte("y"), 5000))
	_, _ = s.CompareAndDelete(ctx, []byte{'p', 0}, []byte{3}, bytes.Repeat([]byte{3}, 20))
	_, _ = s.InsertIfNotExists(ctx, []byte("new"), nil, []byte("v"), time.Hour)
	_, _ = s.Reclaim(ctx)
}

// mutate applies 1 to 4 random edits to a copy of b: a bit flip, a random
// byte, or a large little-endian u32 written over whatever is there.
func mutate(rng *rand.Rand, b []byte) []byte {
	b = bytes.Clone(b)
	for range 1 + rng.Intn(4) {
		switch rng.Intn(3) {
		case 0:
			b[rng.Intn(len(b))] ^= 1 << rng.Intn(8)
		case 1:
			b[rng.Intn(len(b))] = byte(rng.Intn(256))
		default:
			copy(b[rng.Intn(len(b)-8):], []byte{0xF0, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0})
		}
	}
	return b
}

// TestOpenMutatedCopies: 600 seeded random mutations of a real file (the
// fuzz target's property, run in every test run): each Open fails with
// ErrCorruptFile or ErrIncompatible, or gives a Store whose calls return
// or fail; none crashes.
func TestOpenMutatedCopies(t *testing.T) {
	good := realFile(t)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	dir := t.TempDir()
	opened := 0
	for i := range 600 {
		path := filepath.Join(dir, fmt.Sprintf("m-%d.db", i))
		require.NoError(t, os.WriteFile(path, mutate(rng, good), 0o600))
		ro := i%2 == 0
		s, err := Open(path, Options{ReadOnly: ro, NoSync: true, ReclaimInterval: -1})
		if err != nil {
			require.True(t, errors.Is(err, ErrCorruptFile) || errors.Is(err, ErrIncompatible), "seed %d copy %d: %v", seed, i, err)
			continue
		}
		opened++
		useStore(t, s, ro)
		require.NoError(t, s.Close())
	}
	t.Logf("%d of 600 copies opened (a flip inside a key or value is not detected at open)", opened)
}

// TestBboltPanicIsAnError: a leaf element with an empty key passes the
// structure check but makes bbolt panic when a write reads the page
// ("zero-length inode key"); the Store returns ErrCorruptFile instead and
// rolls the transaction back, so the next calls neither hang on the write
// lock nor crash.
func TestBboltPanicIsAnError(t *testing.T) {
	b := realFile(t)
	c := &fileChecker{r: bytes.NewReader(b), size: int64(len(b)), reached: map[uint64]bool{}, m: boltMeta{pageSize: 4096}}
	require.NoError(t, c.pickMeta())
	require.NoError(t, c.walk(c.m.root, 0))
	broken := 0
	for id := range c.reached {
		p := b[id*4096:]
		if id != c.m.root && id != c.m.freelist && ne.Uint16(p[8:]) == leafPage && ne.Uint16(p[10:]) >= 2 {
			ne.PutUint32(p[pageHeaderSize+elementSize+8:], 0) // element 1: ksize 0
			broken++
		}
	}
	require.NotZero(t, broken)
	path := writeFile(t, b)
	s := openT(t, path, Options{NoSync: true, ReclaimInterval: -1})
	ctx := context.Background()
	var errs []error
	for p := range 3 {
		for c := range 40 {
			errs = append(errs, s.Put(ctx, []byte{'p', byte(p)}, []byte{byte(c)}, []byte("new")))
		}
	}
	panicked := 0
	for _, err := range errs {
		if err != nil {
			require.ErrorIs(t, err, ErrCorruptFile)
			if strings.Contains(err.Error(), "bbolt panicked") {
				panicked++
			}
		}
	}
	require.NotZero(t, panicked, "some write read a broken page")
	// Had the panic left the write lock held, these would hang.
	_, err := s.InsertIfNotExists(ctx, []byte{'p', 1}, []byte{5}, []byte("v"), 0)
	require.ErrorIs(t, err, ErrCorruptFile)
	_, _, err = s.Get(ctx, []byte{'p', 1}, []byte{5})
	require.NoError(t, err)
	require.NoError(t, s.Close())
}
