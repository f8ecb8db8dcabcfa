package cql

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gocql/gocql"
	"golang.org/x/sync/errgroup"

	"github.com/cqlseq/cqlseq/storage"
)

// maxIn bounds the clustering keys of one GetBatch query (c_col IN ?).
const maxIn = 100

// Get implements storage.Storage.
func (s *Store) Get(ctx context.Context, pKey, cCols []byte) ([]byte, bool, error) {
	if err := s.begin(ctx, "get", pKey); err != nil {
		return nil, false, err
	}
	qctx, cancel := s.queryCtx(ctx)
	defer cancel()
	var v []byte
	err := s.read(qctx, s.stmt.get, pKey, blob(cCols)).Scan(&v)
	switch {
	case errors.Is(err, gocql.ErrNotFound):
		return nil, false, nil
	case err != nil:
		return nil, false, s.fail(ctx, qctx, "get", err)
	}
	return blob(v), true, nil
}

// GetBatch implements storage.Storage. It reads up to 100 distinct keys per
// query (c_col IN ?).
func (s *Store) GetBatch(ctx context.Context, pKey []byte, items []storage.GetItem) error {
	if err := s.begin(ctx, "get batch", pKey); err != nil {
		return err
	}
	var keys [][]byte
	seen := map[string]bool{}
	for _, it := range items {
		if !seen[string(it.CCols)] {
			seen[string(it.CCols)] = true
			keys = append(keys, blob(it.CCols))
		}
	}
	found := make(map[string][]byte, len(keys))
	for len(keys) > 0 {
		n := min(len(keys), maxIn)
		if err := s.readIn(ctx, "get batch", s.o.Consistency, pKey, keys[:n], found); err != nil {
			return err
		}
		keys = keys[n:]
	}
	for i := range items {
		v, ok := found[string(items[i].CCols)]
		items[i].Ok, items[i].Value = ok, nil
		if ok {
			items[i].Value = append([]byte{}, v...)
		}
	}
	return nil
}

// readIn reads the rows of pKey with the given clustering keys at
// consistency c into found (clustering key -> value).
func (s *Store) readIn(ctx context.Context, op string, c gocql.Consistency, pKey []byte, keys [][]byte, found map[string][]byte) error {
	qctx, cancel := s.queryCtx(ctx)
	defer cancel()
	iter := s.read(qctx, s.stmt.getIn, pKey, keys).Consistency(c).Iter()
	for {
		var k, v []byte // fresh per row: gocql reuses a destination's array
		if !iter.Scan(&k, &v) {
			break
		}
		found[string(k)] = blob(v)
	}
	if err := iter.Close(); err != nil {
		return s.fail(ctx, qctx, op, err)
	}
	return nil
}

// Put implements storage.Storage.
func (s *Store) Put(ctx context.Context, pKey, cCols, value []byte) error {
	if err := s.begin(ctx, "put", pKey); err != nil {
		return err
	}
	qctx, cancel := s.queryCtx(ctx)
	defer cancel()
	if err := s.write(qctx, s.clock.next(), s.stmt.put, owned(pKey), owned(cCols), owned(value)).Exec(); err != nil {
		return s.fail(ctx, qctx, "put", err)
	}
	return nil
}

// PutBatch implements storage.Storage. Rows are grouped by partition (a
// later row for the same key replaces an earlier one); each partition is
// written as UNLOGGED batches of at most BatchRows rows and BatchBytes
// bytes, atomic each; up to WriteWorkers batches are in flight at once. The
// first failure cancels the batches not yet sent and is returned.
func (s *Store) PutBatch(ctx context.Context, rows []storage.Row) error {
	if len(rows) == 0 {
		return nil
	}
	for _, r := range rows {
		if err := s.begin(ctx, "put batch", r.PKey); err != nil {
			return err
		}
	}
	if err := storage.ValidateVersions(rows, false); err != nil {
		return fmt.Errorf("cql: put batch: %w", err)
	}
	chunks := chunkRows(rows, s.o.BatchRows, s.o.BatchBytes)
	ts := s.clock.next() // one logical write: one timestamp for every chunk and attempt
	return runBounded(ctx, s.o.WriteWorkers, len(chunks), func(ctx context.Context, i int) error {
		return s.writeChunk(ctx, ts, chunks[i])
	})
}

// versionBase is the write timestamp of version 0 of a versioned row
// (storage.Row.Version): above every wall-clock timestamp in microseconds
// (1<<62 us is some 146,000 years), so that versions order the row's
// writes and no client clock does.
const versionBase = 1 << 62

// writeChunk writes rows of one partition: one INSERT, or an UNLOGGED
// batch. An unversioned row is written at client timestamp ts, a versioned
// one at versionBase + its version.
func (s *Store) writeChunk(ctx context.Context, ts int64, rows []storage.Row) error {
	qctx, cancel := s.queryCtx(ctx)
	defer cancel()
	stmt := func(r storage.Row) (string, []any) {
		if r.Version == 0 {
			return s.stmt.put, []any{owned(r.PKey), owned(r.CCols), owned(r.Value)}
		}
		return s.stmt.putAt, []any{owned(r.PKey), owned(r.CCols), owned(r.Value), int64(versionBase + r.Version)}
	}
	var err error
	if len(rows) == 1 {
		st, args := stmt(rows[0])
		err = s.write(qctx, ts, st, args...).Exec()
	} else {
		b := s.writeBatch(qctx, ts)
		for _, r := range rows {
			st, args := stmt(r)
			b.Entries = append(b.Entries, gocql.BatchEntry{Stmt: st, Args: args, Idempotent: true})
		}
		err = b.Exec()
	}
	if err != nil {
		return s.fail(ctx, qctx, "put batch", err)
	}
	return nil
}

// chunkRows groups rows by partition, keeps the last row of each (partition,
// clustering key) among those of the highest version, and cuts each partition's rows into chunks of at most
// maxRows rows and maxBytes bytes of keys and values (at least one row).
// Partitions keep the order of their first row, rows within one the order
// of their last write.
func chunkRows(rows []storage.Row, maxRows, maxBytes int) [][]storage.Row {
	type part struct {
		rows []storage.Row
		idx  map[string]int
	}
	var order []string
	parts := map[string]*part{}
	for _, r := range rows {
		p := parts[string(r.PKey)]
		if p == nil {
			p = &part{idx: map[string]int{}}
			parts[string(r.PKey)] = p
			order = append(order, string(r.PKey))
		}
		if i, ok := p.idx[string(r.CCols)]; ok {
			if storage.Replaces(r.Version, p.rows[i].Version) {
				p.rows[i].Value, p.rows[i].Version = r.Value, r.Version
			}
			continue
		}
		p.idx[string(r.CCols)] = len(p.rows)
		p.rows = append(p.rows, r)
	}
	var out [][]storage.Row
	for _, k := range order {
		rs := parts[k].rows
		for len(rs) > 0 {
			n, size := 0, 0
			for n < len(rs) && n < maxRows {
				sz := len(rs[n].CCols) + len(rs[n].Value)
				if n > 0 && size+sz > maxBytes {
					break
				}
				size += sz
				n++
			}
			out = append(out, rs[:n:n])
			rs = rs[n:]
		}
	}
	return out
}

// runBounded calls do(ctx, i) for i in [0, n) on at most workers goroutines
// (errgroup) and waits for them. The first error cancels the context given
// to the other calls, stops starting new ones, and is returned; so is the
// caller's ctx ending before every call was started.
func runBounded(ctx context.Context, workers, n int, do func(ctx context.Context, i int) error) error {
	if n == 1 {
		return do(ctx, 0)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(workers, 1))
	started := 0
	for i := range n {
		if gctx.Err() != nil {
			break
		}
		started++
		g.Go(func() error { return do(gctx, i) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if started < n {
		return fmt.Errorf("cql: put batch: %w", context.Cause(ctx))
	}
	return nil
}

// Read implements storage.Storage. Each page of PageSize rows is one query
// (resumed with the driver's paging state) bounded by Timeout; cb runs
// between queries, so it may call the Store.
func (s *Store) Read(ctx context.Context, pKey, from, to []byte, cb func(cCols, value []byte) error) error {
	if err := s.begin(ctx, "read", pKey); err != nil {
		return err
	}
	stmt, args := bounded(s.stmt.read, from, to, pKey)
	return s.readRows(ctx, "read", stmt, args, false, func(r storage.Row) error { return cb(r.CCols, r.Value) })
}

// ReadPartitions implements storage.Storage: one query, p_key IN the
// distinct keys, paged as Read. The query goes to any coordinator (a list
// of keys has no one token to route by), which reads each partition at
// the Store's consistency.
func (s *Store) ReadPartitions(ctx context.Context, pKeys [][]byte, from, to []byte, cb func(pKey, cCols, value []byte) error) error {
	keys, err := storage.DistinctReadKeys(pKeys)
	if err != nil {
		return fmt.Errorf("cql: read partitions: %w", err)
	}
	if err := s.ready(ctx, "read partitions"); err != nil || len(keys) == 0 {
		return err
	}
	stmt, args := bounded(s.stmt.readIn, from, to, keys)
	return s.readRows(ctx, "read partitions", stmt, args, true, func(r storage.Row) error { return cb(r.PKey, r.CCols, r.Value) })
}

// readRows runs a paged read (op names it in errors) and calls cb with
// each row between queries; withPKey scans p_key first (stmt selects it).
func (s *Store) readRows(ctx context.Context, op, stmt string, args []any, withPKey bool, cb func(storage.Row) error) error {
	var state []byte
	// Grown by append as rows come: most reads (a workspace's numbers)
	// return a few rows, and a page of PageSize rows per call was most of
	// their allocation.
	page := make([]storage.Row, 0, min(s.o.PageSize, 16))
	for {
		var err error
		page, state, err = s.readPage(ctx, op, stmt, args, withPKey, state, page[:0])
		if err != nil {
			return err
		}
		for _, r := range page {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("cql: %s: %w", op, err)
			}
			if err := cb(r); err != nil {
				return err
			}
		}
		if len(state) == 0 {
			return nil
		}
	}
}

func (s *Store) readPage(ctx context.Context, op, stmt string, args []any, withPKey bool, state []byte, page []storage.Row) ([]storage.Row, []byte, error) {
	qctx, cancel := s.queryCtx(ctx)
	defer cancel()
	iter := s.read(qctx, stmt, args...).PageSize(s.o.PageSize).PageState(state).Iter()
	next := iter.PageState()
	for {
		var p, k, v []byte // fresh per row: gocql reuses a destination's array
		var ok bool
		if withPKey {
			var dp []byte // only here: a destination escapes, one allocation a row
			ok = iter.Scan(&dp, &k, &v)
			p = dp
		} else {
			ok = iter.Scan(&k, &v)
		}
		if !ok {
			break
		}
		page = append(page, storage.Row{PKey: p, CCols: blob(k), Value: blob(v)})
	}
	if err := iter.Close(); err != nil {
		return nil, nil, s.fail(ctx, qctx, op, err)
	}
	return page, next, nil
}

// QueryTTL implements storage.Storage, with CQL's whole seconds.
func (s *Store) QueryTTL(ctx context.Context, pKey, cCols []byte) (time.Duration, bool, error) {
	if err := s.begin(ctx, "query TTL", pKey); err != nil {
		return 0, false, err
	}
	qctx, cancel := s.queryCtx(ctx)
	defer cancel()
	var ttl *int
	err := s.read(qctx, s.stmt.ttl, pKey, blob(cCols)).Scan(&ttl)
	switch {
	case errors.Is(err, gocql.ErrNotFound):
		return 0, false, nil
	case err != nil:
		return 0, false, s.fail(ctx, qctx, "query TTL", err)
	case ttl == nil:
		return 0, true, nil
	}
	return time.Duration(*ttl) * time.Second, true, nil
}
