// Package boltdb is a storage.Storage in one bbolt file, for a single
// machine: the embedded mode of cqlseq. layout.go documents the file's
// layout.
//
// Conditional writes (InsertIfNotExists, CompareAndSwap, CompareAndDelete,
// ApplyBatchIf) are atomic and serialised with every other write. Writes
// of concurrent callers share one bbolt write transaction and one fsync
// (group commit, groupcommit.go), each with its own result. Rows written with a TTL are absent
// to every read once it has passed; a sweeper owned by the Store deletes
// them every Options.ReclaimInterval, and writes overwrite them in place.
//
// A damaged file never crashes the process: Open checks an existing
// file's bbolt structure before bbolt reads past its meta pages (bbolt
// trusts page ids and offsets, and one past the end of the file faults),
// and a panic of bbolt on a damaged tree becomes an error; both wrap
// ErrCorruptFile. Options.ReadOnly opens a file for inspection without
// changing a byte of it.
package boltdb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/cqlseq/cqlseq/storage"
)

// readPageRows is how many rows Read scans in one read transaction.
const readPageRows = 1024

// Store implements storage.Storage over one bbolt file.
type Store struct {
	db   *bolt.DB
	path string
	now  func() time.Time
	log  *slog.Logger

	commit *committer // runs every write transaction (groupcommit.go)

	closed  atomic.Bool
	closeMu sync.Mutex         // serialises Close
	stop    context.CancelFunc // cancels the sweeper
	done    chan struct{}      // closed when the sweeper has returned
}

var (
	_ storage.Storage        = (*Store)(nil)
	_ storage.GroupCommitter = (*Store)(nil)
)

// hooks replace the sweeper's ticker and report its sweeps, and pause
// the committer before each group (tests).
type hooks struct {
	tick        <-chan time.Time
	swept       chan<- int
	beforeGroup func(n int)
}

// Open opens (creating if needed, mode 0600) the file at path, whose
// directory must exist, and starts the Store's sweeper; with
// o.ReadOnly it opens an existing file for reading only. A file held by
// another Store, in this process or another, makes Open fail after
// o.Timeout with an error naming the file and wrapping
// storage.ErrUnavailable. A bbolt file of another layout fails with
// ErrIncompatible. Before bbolt reads more than the meta pages, Open
// checks the structure of an existing file (checkFile: the meta pages,
// the file size, the freelist and every page reachable from the root,
// which bbolt would trust and fault on): a broken one fails with
// ErrCorruptFile, naming the file and what is wrong. The check reads each
// page in use once.
func Open(path string, o Options) (*Store, error) { return open(path, o, hooks{}) }

func open(path string, o Options, h hooks) (*Store, error) {
	o.EnsureDefaults()
	err := o.Validate()
	if path == "" {
		err = errors.Join(err, fmt.Errorf("%w: path is empty", ErrInvalidOptions))
	}
	if err != nil {
		return nil, err
	}
	db, err := openChecked(path, o)
	if err != nil {
		return nil, err
	}
	func() {
		defer recoverCorrupt(path, &err)
		if o.ReadOnly {
			err = db.View(checkLayout)
		} else {
			err = db.Update(initLayout)
		}
	}()
	if err != nil {
		_ = db.Close()
		if errors.Is(err, ErrCorruptFile) {
			return nil, err
		}
		return nil, fmt.Errorf("boltdb: open %s: %w", path, err)
	}
	s := &Store{db: db, path: path, now: o.Now, log: o.Logger, done: make(chan struct{}), commit: newCommitter(h.beforeGroup)}
	go s.runCommitter()
	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	tick, stopTicker := h.tick, func() {}
	if o.ReadOnly {
		tick = nil
	} else if tick == nil && o.ReclaimInterval > 0 {
		t := time.NewTicker(o.ReclaimInterval)
		tick, stopTicker = t.C, t.Stop
	}
	if tick == nil {
		close(s.done)
		return s, nil
	}
	go s.sweep(ctx, tick, stopTicker, h.swept)
	return s, nil
}

// openChecked opens the bbolt file at path after checking an existing
// file's structure. The check runs under the file's lock, taken by a
// read-only bbolt open (which reads only the meta pages), so that no
// writer is in the middle of a commit; a read-only Store keeps that
// open, a writable one closes it and opens the file for writing.
func openChecked(path string, o Options) (*bolt.DB, error) {
	fi, err := os.Stat(path)
	switch {
	case o.ReadOnly && errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("boltdb: open %s read-only: %w", path, fs.ErrNotExist)
	case err != nil && (o.ReadOnly || !errors.Is(err, fs.ErrNotExist)):
		return nil, fmt.Errorf("boltdb: open %s: %w", path, err)
	case err != nil || (fi.Size() == 0 && !o.ReadOnly):
		return openBolt(path, o) // bbolt creates the file
	case fi.Size() == 0:
		return nil, fmt.Errorf("%w: %s is empty (0 bytes), not a cqlseq store", ErrIncompatible, path)
	}
	ro := o
	ro.ReadOnly = true
	db, err := openBolt(path, ro)
	if err != nil {
		return nil, err
	}
	if err := checkOpen(db, path); err != nil {
		_ = db.Close()
		return nil, err
	}
	if o.ReadOnly {
		return db, nil
	}
	if err := db.Close(); err != nil {
		return nil, fmt.Errorf("boltdb: open %s: %w", path, err)
	}
	return openBolt(path, o)
}

// checkOpen runs checkFile on the file db holds open read-only.
func checkOpen(db *bolt.DB, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("boltdb: open %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("boltdb: open %s: %w", path, err)
	}
	if err := checkFile(f, fi.Size(), db.Info().PageSize); err != nil {
		return fmt.Errorf("%w %s: %w", ErrCorruptFile, path, err)
	}
	return nil
}

// openBolt opens the file with bbolt. bbolt's own refusals of a file (no
// valid meta page, too small) wrap ErrCorruptFile.
func openBolt(path string, o Options) (*bolt.DB, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: o.Timeout, NoSync: o.NoSync, ReadOnly: o.ReadOnly})
	var pathErr *fs.PathError
	switch {
	case err == nil:
		return db, nil
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("boltdb: open %s (waited %v): %w", path, o.Timeout, ErrLocked)
	case errors.As(err, &pathErr):
		return nil, fmt.Errorf("boltdb: open %s: %w", path, err)
	}
	return nil, fmt.Errorf("%w %s: %w", ErrCorruptFile, path, err)
}

// checkLayout checks an existing file's layout version (read-only).
func checkLayout(tx *bolt.Tx) error {
	if tx.Bucket(bucketMeta) == nil {
		return fmt.Errorf("%w: no layout version: not a cqlseq store", ErrIncompatible)
	}
	return checkVersion(tx)
}

// recoverCorrupt turns a panic of bbolt into an error wrapping
// ErrCorruptFile. checkFile keeps every page access inside the file, but
// bbolt also asserts invariants of the tree (key order, no page used
// twice) that a damaged file can break; it panics then, and the Store
// returns the error instead (a transaction that panics is rolled back).
func recoverCorrupt(path string, err *error) {
	if r := recover(); r != nil {
		*err = corruptPanic(path, r)
	}
}

func corruptPanic(path string, r any) error {
	return fmt.Errorf("%w %s: bbolt panicked: %v", ErrCorruptFile, path, r)
}

// initLayout creates the buckets of a new file, or checks an existing
// file's layout version.
func initLayout(tx *bolt.Tx) error {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		foreign := false
		_ = tx.ForEach(func([]byte, *bolt.Bucket) error { foreign = true; return nil })
		if foreign {
			return fmt.Errorf("%w: buckets without a layout version", ErrIncompatible)
		}
		meta, err := tx.CreateBucket(bucketMeta)
		if err != nil {
			return err
		}
		if err := meta.Put(keyLayout, []byte{layoutVersion}); err != nil {
			return err
		}
		if _, err := tx.CreateBucket(bucketRows); err != nil {
			return err
		}
		_, err = tx.CreateBucket(bucketExpiry)
		return err
	}
	if err := checkVersion(tx); err != nil {
		return err
	}
	if v := meta.Get(keyLayout); !bytes.Equal(v, []byte{layoutVersion}) {
		return meta.Put(keyLayout, []byte{layoutVersion}) // upgrade version 1
	}
	return nil
}

// checkVersion checks the layout version and buckets of an initialised
// file.
func checkVersion(tx *bolt.Tx) error {
	if v := tx.Bucket(bucketMeta).Get(keyLayout); !bytes.Equal(v, []byte{layoutVersion}) && !bytes.Equal(v, []byte{layoutVersionV1}) {
		return fmt.Errorf("%w: layout version %x, this build reads %d and %d", ErrIncompatible, v, layoutVersionV1, layoutVersion)
	}
	if tx.Bucket(bucketRows) == nil || tx.Bucket(bucketExpiry) == nil {
		return fmt.Errorf("%w: a bucket is missing", ErrIncompatible)
	}
	return nil
}

// Close stops the sweeper (cancelling it, then waiting for it) and closes
// the file after in-flight transactions end. It is idempotent; other calls
// after Close return storage.ErrClosed.
func (s *Store) Close() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed.Load() {
		return nil
	}
	s.stop()
	<-s.done
	s.closed.Store(true)
	s.commit.close()
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("boltdb: close %s: %w", s.path, err)
	}
	return nil
}

// Path returns the file's path.
func (s *Store) Path() string { return s.path }

// ready reports a done ctx or a closed Store; checked before each
// transaction.
func (s *Store) ready(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("boltdb: %w", err)
	}
	if s.closed.Load() {
		return fmt.Errorf("boltdb: %w", storage.ErrClosed)
	}
	return nil
}

// txErr maps an error of a transaction to the storage sentinels.
func (s *Store) txErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, berrors.ErrDatabaseNotOpen):
		return fmt.Errorf("boltdb: %w", storage.ErrClosed)
	case errors.Is(err, berrors.ErrDatabaseReadOnly):
		return fmt.Errorf("boltdb: %s: %w", s.path, ErrReadOnly)
	case errors.Is(err, ErrCorrupt):
		return fmt.Errorf("%w (file %s)", err, s.path)
	default:
		return fmt.Errorf("boltdb: %s: %w: %w", s.path, storage.ErrUnavailable, err)
	}
}

// view runs fn in one read transaction; now is the clock in Unix ns.
func (s *Store) view(ctx context.Context, fn func(rows *bolt.Bucket, now int64) error) (err error) {
	if err := s.ready(ctx); err != nil {
		return err
	}
	defer recoverCorrupt(s.path, &err)
	return s.txErr(s.db.View(func(tx *bolt.Tx) error {
		return fn(tx.Bucket(bucketRows), s.now().UnixNano())
	}))
}

// writer is the state of one write transaction.
type writer struct {
	rows, expiry *bolt.Bucket
	now          int64 // Unix ns, read once the write lock is held
}

// put writes the row at rk; ttl 0 means no expiry.
func (w *writer) put(rk, value []byte, ttl time.Duration) error {
	var expires int64
	if ttl > 0 {
		expires = w.now + int64(ttl)
	}
	if err := w.rows.Put(rk, encodeValue(value, expires)); err != nil {
		return err
	}
	if expires != 0 {
		return w.expiry.Put(expiryKey(expires, rk), []byte{})
	}
	return nil
}

// putVersion is an unconditional write of version (storage.Row.Version):
// it replaces the row at rk only if version orders at or above the stored
// row's (an expired row has none).
func (w *writer) putVersion(rk, value []byte, version uint64) error {
	if old := w.rows.Get(rk); old != nil {
		_, expires, err := decodeValue(old)
		if err != nil {
			return fmt.Errorf("%w (row key %x)", err, rk)
		}
		if (expires == 0 || w.now < expires) && !storage.Replaces(version, rowVersion(old)) {
			return nil
		}
	}
	if version == 0 {
		return w.put(rk, value, 0)
	}
	return w.rows.Put(rk, encodeVersioned(value, version))
}

// live returns the row at rk if it exists and has not expired at now. value
// aliases the transaction's memory.
func live(rows *bolt.Bucket, rk []byte, now int64) (value []byte, expires int64, ok bool, err error) {
	v := rows.Get(rk)
	if v == nil {
		return nil, 0, false, nil
	}
	value, expires, err = decodeValue(v)
	if err != nil {
		return nil, 0, false, fmt.Errorf("%w (row key %x)", err, rk)
	}
	if expires != 0 && now >= expires {
		return nil, 0, false, nil
	}
	return value, expires, true, nil
}

func invalid(format string, a ...any) error {
	return fmt.Errorf("boltdb: %w: "+format, append([]any{storage.ErrInvalidArgument}, a...)...)
}

// makeRowKey checks a row's keys and returns its bbolt key.
func makeRowKey(pKey, cCols []byte) ([]byte, error) {
	if len(pKey) == 0 {
		return nil, invalid("empty partition key")
	}
	rk := rowKey(pKey, cCols)
	if len(rk) > maxRowKey {
		return nil, invalid("partition and clustering keys take %d bytes stored, at most %d", len(rk), maxRowKey)
	}
	return rk, nil
}

func checkValue(value []byte) error {
	if len(value) > maxValue {
		return invalid("value of %d bytes, at most %d", len(value), maxValue)
	}
	return nil
}

// Get implements storage.Storage.
func (s *Store) Get(ctx context.Context, pKey, cCols []byte) (value []byte, ok bool, err error) {
	rk, err := makeRowKey(pKey, cCols)
	if err != nil {
		return nil, false, err
	}
	err = s.view(ctx, func(rows *bolt.Bucket, now int64) error {
		v, _, found, err := live(rows, rk, now)
		if found {
			value, ok = bytes.Clone(v), true
		}
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return value, ok, nil
}

// GetBatch implements storage.Storage. All items are read in one read
// transaction.
func (s *Store) GetBatch(ctx context.Context, pKey []byte, items []storage.GetItem) error {
	if len(pKey) == 0 {
		return invalid("empty partition key")
	}
	rks := make([][]byte, len(items))
	for i := range items {
		rk, err := makeRowKey(pKey, items[i].CCols)
		if err != nil {
			return err
		}
		rks[i] = rk
	}
	return s.view(ctx, func(rows *bolt.Bucket, now int64) error {
		for i, rk := range rks {
			v, _, ok, err := live(rows, rk, now)
			if err != nil {
				return err
			}
			items[i].Ok, items[i].Value = ok, nil
			if ok {
				items[i].Value = bytes.Clone(v)
			}
		}
		return nil
	})
}

// Put implements storage.Storage.
func (s *Store) Put(ctx context.Context, pKey, cCols, value []byte) error {
	rk, err := makeRowKey(pKey, cCols)
	if err != nil {
		return err
	}
	if err := checkValue(value); err != nil {
		return err
	}
	return s.update(ctx, false, func(w *writer) error { return w.putVersion(rk, value, 0) })
}

// PutBatch implements storage.Storage. The batch is checked whole before
// anything is written, then written in one transaction: all or nothing.
func (s *Store) PutBatch(ctx context.Context, rows []storage.Row) error {
	rks := make([][]byte, len(rows))
	for i, r := range rows {
		rk, err := makeRowKey(r.PKey, r.CCols)
		if err != nil {
			return fmt.Errorf("%w (row %d)", err, i)
		}
		if err := checkValue(r.Value); err != nil {
			return fmt.Errorf("%w (row %d)", err, i)
		}
		rks[i] = rk
	}
	if err := storage.ValidateVersions(rows, false); err != nil {
		return fmt.Errorf("boltdb: put batch: %w", err)
	}
	if len(rows) == 0 {
		return s.ready(ctx)
	}
	return s.update(ctx, false, func(w *writer) error {
		for i, r := range rows {
			if err := w.putVersion(rks[i], r.Value, r.Version); err != nil {
				return err
			}
		}
		return nil
	})
}

// page holds the rows of one Read page; its buffer is reused page after
// page.
type page struct {
	buf  []byte
	ends [][2]int // per row: end of cCols, end of value in buf
}

func (p *page) reset() { p.buf, p.ends = p.buf[:0], p.ends[:0] }

func (p *page) add(cCols, value []byte) {
	p.buf = append(p.buf, cCols...)
	c := len(p.buf)
	p.buf = append(p.buf, value...)
	p.ends = append(p.ends, [2]int{c, len(p.buf)})
}

func (p *page) row(i int) (cCols, value []byte) {
	start := 0
	if i > 0 {
		start = p.ends[i-1][1]
	}
	e := p.ends[i]
	return p.buf[start:e[0]:e[0]], p.buf[e[0]:e[1]:e[1]]
}

// Read implements storage.Storage. It scans up to 1,024 rows per read
// transaction, copies them, ends the transaction and only then calls cb, so
// cb may call the Store and a long Read does not pin the file. cb's slices
// alias a buffer reused for the next page: they are valid only during the
// call. ctx is checked before each page and each row.
func (s *Store) Read(ctx context.Context, pKey, fromCCols, toCCols []byte, cb func(cCols, value []byte) error) error {
	if len(pKey) == 0 {
		return invalid("empty partition key")
	}
	prefix := partPrefix(pKey, 0)
	start := append(prefix[:len(prefix):len(prefix)], fromCCols...)
	end := partEnd(prefix)
	if toCCols != nil {
		end = append(prefix[:len(prefix):len(prefix)], toCCols...)
	}
	if bytes.Compare(start, end) >= 0 {
		return s.ready(ctx)
	}
	var p page
	for start != nil {
		p.reset()
		var next []byte
		err := s.view(ctx, func(rows *bolt.Bucket, now int64) error {
			scanned := 0
			c := rows.Cursor()
			for k, v := c.Seek(start); k != nil && bytes.Compare(k, end) < 0; k, v = c.Next() {
				if scanned == readPageRows {
					next = bytes.Clone(k)
					return nil
				}
				scanned++
				value, expires, err := decodeValue(v)
				if err != nil {
					return fmt.Errorf("%w (row key %x)", err, k)
				}
				if expires == 0 || now < expires {
					p.add(k[len(prefix):], value)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		for i := range p.ends {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("boltdb: %w", err)
			}
			if err := cb(p.row(i)); err != nil {
				return err
			}
		}
		start = next
	}
	return nil
}

// ReadPartitions implements storage.Storage: a Read of each partition in
// turn (local reads gain nothing from one request).
func (s *Store) ReadPartitions(ctx context.Context, pKeys [][]byte, fromCCols, toCCols []byte, cb func(pKey, cCols, value []byte) error) error {
	keys, err := storage.DistinctReadKeys(pKeys)
	if err != nil {
		return fmt.Errorf("boltdb: read partitions: %w", err)
	}
	if err := s.ready(ctx); err != nil {
		return err
	}
	for _, k := range keys {
		if err := s.Read(ctx, k, fromCCols, toCCols, func(cCols, value []byte) error { return cb(k, cCols, value) }); err != nil {
			return err
		}
	}
	return nil
}

// InsertIfNotExists implements storage.Storage.
func (s *Store) InsertIfNotExists(ctx context.Context, pKey, cCols, value []byte, ttl time.Duration) (ok bool, err error) {
	if err := storage.ValidateTTL(ttl); err != nil {
		return false, fmt.Errorf("boltdb: %w", err)
	}
	rk, err := makeRowKey(pKey, cCols)
	if err != nil {
		return false, err
	}
	if err := checkValue(value); err != nil {
		return false, err
	}
	err = s.update(ctx, true, func(w *writer) error {
		ok = false
		_, _, exists, err := live(w.rows, rk, w.now)
		if err != nil || exists {
			return err
		}
		ok = true
		return w.put(rk, value, ttl)
	})
	if err != nil {
		return false, err
	}
	return ok, nil
}

// CompareAndSwap implements storage.Storage.
func (s *Store) CompareAndSwap(ctx context.Context, pKey, cCols, oldValue, newValue []byte, ttl time.Duration) (ok bool, err error) {
	if err := storage.ValidateTTL(ttl); err != nil {
		return false, fmt.Errorf("boltdb: %w", err)
	}
	rk, err := makeRowKey(pKey, cCols)
	if err != nil {
		return false, err
	}
	if err := checkValue(newValue); err != nil {
		return false, err
	}
	err = s.update(ctx, true, func(w *writer) error {
		ok = false
		v, _, exists, err := live(w.rows, rk, w.now)
		if err != nil || !exists || !bytes.Equal(v, oldValue) {
			return err
		}
		ok = true
		return w.put(rk, newValue, ttl)
	})
	if err != nil {
		return false, err
	}
	return ok, nil
}

// CompareAndDelete implements storage.Storage.
func (s *Store) CompareAndDelete(ctx context.Context, pKey, cCols, expected []byte) (ok bool, err error) {
	rk, err := makeRowKey(pKey, cCols)
	if err != nil {
		return false, err
	}
	err = s.update(ctx, true, func(w *writer) error {
		ok = false
		v, _, exists, err := live(w.rows, rk, w.now)
		if err != nil || !exists || !bytes.Equal(v, expected) {
			return err
		}
		ok = true
		return w.rows.Delete(rk)
	})
	if err != nil {
		return false, err
	}
	return ok, nil
}

// ApplyBatchIf implements storage.Storage: one batch of ApplyBatchesIf.
func (s *Store) ApplyBatchIf(ctx context.Context, pKey []byte, conds []storage.Condition, rows []storage.Row) (bool, error) {
	return storage.ApplyOne(ctx, s, pKey, conds, rows)
}

var _ storage.MultiApplier = (*Store)(nil)

// ApplyBatchesIf implements storage.MultiApplier: the batches are one
// request of the group commit, so they share its transaction (and fsync)
// with the writes of other goroutines.
func (s *Store) ApplyBatchesIf(ctx context.Context, batches []storage.CondBatch, applied []bool) error {
	clear(applied)
	if err := storage.ValidateBatches(batches, applied); err != nil {
		return fmt.Errorf("boltdb: %w", err)
	}
	type keyed struct{ conds, rows [][]byte }
	keys := make([]keyed, len(batches))
	for i, b := range batches {
		k := keyed{conds: make([][]byte, len(b.Conds)), rows: make([][]byte, len(b.Rows))}
		var err error
		for j, c := range b.Conds {
			if k.conds[j], err = makeRowKey(b.PKey, c.CCols); err != nil {
				return fmt.Errorf("%w (batch %d, condition %d)", err, i, j)
			}
		}
		for j, r := range b.Rows {
			if k.rows[j], err = makeRowKey(b.PKey, r.CCols); err != nil {
				return fmt.Errorf("%w (batch %d, row %d)", err, i, j)
			}
			if err := checkValue(r.Value); err != nil {
				return fmt.Errorf("%w (batch %d, row %d)", err, i, j)
			}
		}
		keys[i] = k
	}
	err := s.update(ctx, true, func(w *writer) error {
		clear(applied)
	batch:
		for i, b := range batches {
			if !b.Ready(applied) {
				continue
			}
			for j, c := range b.Conds {
				v, _, exists, err := live(w.rows, keys[i].conds[j], w.now)
				if err != nil {
					return err
				}
				if !c.Holds(v, exists) {
					continue batch
				}
			}
			for j, r := range b.Rows {
				if err := w.putVersion(keys[i].rows[j], r.Value, r.Version); err != nil {
					return err
				}
			}
			applied[i] = true
		}
		return nil
	})
	if err != nil {
		clear(applied)
	}
	return err
}

// QueryTTL implements storage.Storage.
func (s *Store) QueryTTL(ctx context.Context, pKey, cCols []byte) (ttl time.Duration, ok bool, err error) {
	rk, err := makeRowKey(pKey, cCols)
	if err != nil {
		return 0, false, err
	}
	err = s.view(ctx, func(rows *bolt.Bucket, now int64) error {
		_, expires, found, err := live(rows, rk, now)
		if found {
			ok = true
			if expires != 0 {
				ttl = time.Duration(expires - now)
			}
		}
		return err
	})
	if err != nil {
		return 0, false, err
	}
	return ttl, ok, nil
}
