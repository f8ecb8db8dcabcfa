// Package cql owns cqlseq's CQL sessions: the storage.Storage driver for
// Apache Cassandra and ScyllaDB, on the gocql API (ScyllaDB's fork through
// cqlseq's go.mod replace), and the one place that configures gocql
// (Connect and ClusterConfig: hosts, TLS, authentication, host lookup,
// timeouts, the logger), detects the engine (DetectEngine) and validates
// keyspace and table names (ValidName). The CLI, the migrator (package
// schema) and the integration tests connect through it. The keyspace and
// table must exist: create them with package schema.
//
// Every statement is prepared, with bind markers for all values; keyspace
// and table names are validated identifiers. Every query carries the call's
// context and a deadline of Options.Timeout unless the context's is earlier.
// Lightweight transactions read their result by column name (ScyllaDB
// returns the previous row even when applied, Cassandra only [applied]).
// A conditional write whose outcome the server could not report (CAS write
// timeout, or no answer on a sent request) is decided by a SERIAL re-read of
// the rows it targets: it is reported as applied only when that read proves
// it (every row it writes holds its value and its own write ID, column w,
// which no other call uses); otherwise the call fails with an error
// wrapping storage.ErrUnknownOutcome. A competitor's write of the same value
// is never taken for the call's own.
//
// An unconditional write of a versioned row (storage.Row.Version) is
// written at timestamp 1<<62 + version, above every wall-clock timestamp:
// versions, not client clocks, order an owner's writes against other
// owners' (docs/design.md).
package cql

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocql/gocql"

	"github.com/cqlseq/cqlseq/storage"
)

// Store implements storage.Storage on a CQL table.
type Store struct {
	o       Options
	session *gocql.Session
	owned   bool // the session was created by Open and is closed by Close
	closed  atomic.Bool
	stmt    statements
	health  *health                          // nil: DisableHealth, or a caller's Session
	hedge   gocql.SpeculativeExecutionPolicy // nil: no hedging
	clock   monotonicMicros
	// stmts counts the statements sent (see StatementStats).
	stmts struct{ all, conditional atomic.Uint64 }
}

var _ storage.Storage = (*Store)(nil)

// statements are the CQL texts, built once from the validated names.
//
// Every statement that writes a row in a conditional write (putW,
// putTTLW, putTTLIfNotExists, insertIfNotExists, casUpdate, updateIf) also
// sets the row's write ID w to the call's own ID (see lwt.go), bound last
// but one before the conditions' values; getInW is the SERIAL re-read that
// returns it. On a table without the column w (writeIDs false) they leave
// it out, and no conditional write is ever proven by a re-read.
type statements struct {
	writeIDs                                bool
	get, getIn, put, putTTLIfNotExists, ttl string
	putAt                                   string // INSERT ... USING TIMESTAMP ?: a versioned row
	casUpdate, casDelete                    string
	read                                    [4]string // by bounds: none, from, to, both
	readIn                                  [4]string // read with p_key IN ?, selecting p_key first
	condAbsent                              string    // carries "row must not exist" in a conditional batch
	insertIfNotExists                       string    // INSERT IF NOT EXISTS without TTL, in batches
	updateIf                                string    // UPDATE ... IF value = ?, in batches
	putW                                    string    // a written row without condition, in conditional batches
	putTTLW                                 string    // the re-insert with TTL of CompareAndSwap's batch
	getInW                                  string
}

func newStatements(keyspace, table string, writeIDs bool) statements {
	t := keyspace + "." + table
	sel := "SELECT c_col, value FROM " + t + " WHERE p_key = ?"
	cols, vals, setW := "(p_key, c_col, value)", "(?, ?, ?)", ""
	if writeIDs {
		cols, vals, setW = "(p_key, c_col, value, w)", "(?, ?, ?, ?)", ", w = ?"
	}
	return statements{
		writeIDs:          writeIDs,
		get:               "SELECT value FROM " + t + " WHERE p_key = ? AND c_col = ?",
		getIn:             sel + " AND c_col IN ?",
		getInW:            map[bool]string{true: "SELECT c_col, value, w FROM " + t + " WHERE p_key = ? AND c_col IN ?"}[writeIDs],
		put:               "INSERT INTO " + t + " (p_key, c_col, value) VALUES (?, ?, ?)",
		putAt:             "INSERT INTO " + t + " (p_key, c_col, value) VALUES (?, ?, ?) USING TIMESTAMP ?",
		putW:              "INSERT INTO " + t + " " + cols + " VALUES " + vals,
		putTTLW:           "INSERT INTO " + t + " " + cols + " VALUES " + vals + " USING TTL ?",
		putTTLIfNotExists: "INSERT INTO " + t + " " + cols + " VALUES " + vals + " IF NOT EXISTS USING TTL ?",
		insertIfNotExists: "INSERT INTO " + t + " " + cols + " VALUES " + vals + " IF NOT EXISTS",
		ttl:               "SELECT TTL(value) FROM " + t + " WHERE p_key = ? AND c_col = ?",
		casUpdate:         "UPDATE " + t + " USING TTL ? SET value = ?" + setW + " WHERE p_key = ? AND c_col = ? IF value = ?",
		updateIf:          "UPDATE " + t + " SET value = ?" + setW + " WHERE p_key = ? AND c_col = ? IF value = ?",
		casDelete:         "DELETE FROM " + t + " WHERE p_key = ? AND c_col = ? IF value = ?",
		condAbsent:        "DELETE value FROM " + t + " WHERE p_key = ? AND c_col = ? IF value = null",
		read:              bounds(sel),
		readIn:            bounds("SELECT p_key, c_col, value FROM " + t + " WHERE p_key IN ?"),
	}
}

// bounds returns sel with each of a read's clustering bounds: none, from,
// to, both (bounded's index).
func bounds(sel string) [4]string {
	return [4]string{
		sel,
		sel + " AND c_col >= ?",
		sel + " AND c_col < ?",
		sel + " AND c_col >= ? AND c_col < ?",
	}
}

// bounded picks of stmts (built by bounds) the statement for the non-nil
// bounds among from and to, and its arguments: the partition's (a key or
// a list of keys), then the bounds.
func bounded(stmts [4]string, from, to []byte, part any) (string, []any) {
	args := []any{part}
	var which int
	if from != nil {
		which |= 1
		args = append(args, from)
	}
	if to != nil {
		which |= 2
		args = append(args, to)
	}
	return stmts[which], args
}

// Open connects (or takes Options.Session), checks that the table exists
// and, unless Options.SkipTimestampProbe, that the cluster accepts
// cqlseq's write timestamps as the session's user (CheckTimestamps: one
// probe write; a refusal fails Open with ErrTimestampsRefused, any other
// probe failure is logged), and returns the Store. ctx bounds the whole of Open: the connection
// attempt to each host is bounded by ConnectTimeout and by ctx's deadline.
func Open(ctx context.Context, o Options) (*Store, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("cql: open: %w", err)
	}
	st := &Store{o: o, session: o.Session}
	st.clock.now = o.Now
	if st.session == nil {
		s, h, err := connect(ctx, o)
		if err != nil {
			return nil, err
		}
		st.session, st.owned, st.health = s, true, h
	}
	switch {
	case o.DisableHealth || o.NoHedging:
	case st.health != nil && o.HedgeDelay == 0:
		st.hedge = hedging{st.health}
	case o.HedgeDelay > 0:
		st.hedge = &gocql.SimpleSpeculativeExecution{NumAttempts: 1, TimeoutDelay: o.HedgeDelay}
	}
	writeIDs, err := st.checkTable(ctx)
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	if !o.SkipTimestampProbe {
		qctx, cancel := st.queryCtx(ctx)
		warnings, err := CheckTimestamps(qctx, st.session, o.Keyspace, o.Table)
		cancel()
		switch {
		case errors.Is(err, ErrTimestampsRefused):
			_ = st.Close()
			return nil, err
		case err != nil:
			o.Logger.Warn("cql: open: the write timestamp probe failed, which proves nothing: writes may fail", "err", err)
		}
		for _, w := range warnings {
			o.Logger.Warn("cql: the cluster warns about cqlseq's write timestamps", "warning", w)
		}
	}
	st.stmt = newStatements(o.Keyspace, o.Table, writeIDs)
	if !writeIDs {
		o.Logger.Warn("cql: the table has no write ID column w (schema script 0003, cqlseq migrate): a conditional write whose outcome is unknown is never proven applied",
			"keyspace", o.Keyspace, "table", o.Table)
	}
	st.fetchRouting(ctx)
	return st, nil
}

// all returns every statement text.
func (t *statements) all() []string {
	all := append([]string{t.get, t.getIn, t.put, t.putAt, t.putW, t.putTTLW, t.putTTLIfNotExists, t.insertIfNotExists,
		t.ttl, t.casUpdate, t.updateIf, t.casDelete, t.condAbsent}, append(t.read[:], t.readIn[:]...)...)
	if t.writeIDs {
		all = append(all, t.getInW)
	}
	return all
}

// fetchRouting has gocql fetch the routing information (partition key
// columns, LWT flag) of every statement now, while the cluster is known to
// answer: gocql fetches it on a statement's first use otherwise, with a
// PREPARE sent to the first up host of its list whatever the host policy
// says, and the statement waits for it. A failure here is logged, not
// returned: the information is then fetched on first use.
func (s *Store) fetchRouting(ctx context.Context) {
	qctx, cancel := s.queryCtx(ctx)
	defer cancel()
	stmts := s.stmt.all()
	errs := make([]error, len(stmts))
	var wg sync.WaitGroup
	for i, stmt := range stmts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Placeholder values: the routing key computed from them is
			// discarded; the statement's routing information stays cached
			// in the session.
			q := s.session.Query(stmt, make([]any, strings.Count(stmt, "?"))...).WithContext(qctx).
				SetRequestTimeout(s.o.AttemptTimeout)
			_, errs[i] = q.GetRoutingKey()
			q.Release()
		}()
	}
	wg.Wait()
	var failed int
	var first error
	for _, err := range errs {
		if err != nil {
			if failed == 0 {
				first = err
			}
			failed++
		}
	}
	if failed > 0 {
		s.o.Logger.Warn("cql: open: routing information not fetched: it is fetched on first use, from the first host gocql lists, which may be silent then",
			"statements", failed, "of", len(stmts), "err", first)
	}
}

// checkTable fails clearly when the keyspace or table is missing, and
// reports whether the table has the write ID column w.
func (s *Store) checkTable(ctx context.Context) (writeIDs bool, err error) {
	qctx, cancel := s.queryCtx(ctx)
	defer cancel()
	ks, tbl := strings.ToLower(s.o.Keyspace), strings.ToLower(s.o.Table)
	iter := s.read(qctx, "SELECT column_name FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?", ks, tbl).
		Consistency(gocql.One).Iter()
	var col string
	n := 0
	for iter.Scan(&col) {
		n++
		writeIDs = writeIDs || col == "w"
	}
	if err := iter.Close(); err != nil {
		return false, s.fail(ctx, qctx, "open", err)
	}
	if n == 0 {
		return false, fmt.Errorf("cql: table %s.%s does not exist: create it with package schema (cqlseq migrate)", ks, tbl)
	}
	return writeIDs, nil
}

// Close implements storage.Storage. It closes the session Open created, not
// a caller's Options.Session. Calls in flight fail with storage.ErrClosed.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if s.owned {
		s.session.Close()
	}
	return nil
}

// begin checks a call's preconditions: open store, live context, non-empty
// partition key.
func (s *Store) begin(ctx context.Context, op string, pKey []byte) error {
	if err := s.ready(ctx, op); err != nil {
		return err
	}
	if len(pKey) == 0 {
		return fmt.Errorf("cql: %s: %w: empty partition key", op, storage.ErrInvalidArgument)
	}
	return nil
}

// ready fails a call op when the Store is closed or ctx is done.
func (s *Store) ready(ctx context.Context, op string) error {
	if s.closed.Load() {
		return fmt.Errorf("cql: %s: %w", op, storage.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("cql: %s: %w", op, err)
	}
	return nil
}

// HealthStats returns what the health-aware host choice did (see
// HealthStats), and false when the Store has none (DisableHealth, or a
// caller's Options.Session).
func (s *Store) HealthStats() (HealthStats, bool) {
	if s.health == nil {
		return HealthStats{}, false
	}
	return s.health.Stats(), true
}

// StatementStats counts the CQL statements a Store sent, cumulative since
// Open. A statement is one request as the caller sees it: a query, one
// page of a paged read, or a batch (UNLOGGED or conditional) with all its
// entries; a retry or hedge of it is not another statement (those are
// HealthStats.Attempts). Schema checks made by Open are included.
type StatementStats struct {
	// Statements are all statements, the conditional ones included.
	Statements uint64
	// Conditional are the lightweight transactions (IF ...): conditional
	// queries and conditional batches. Their SERIAL re-reads are plain
	// statements.
	Conditional uint64
}

// StatementStats returns the statements sent so far (see StatementStats).
func (s *Store) StatementStats() StatementStats {
	return StatementStats{Statements: s.stmts.all.Load(), Conditional: s.stmts.conditional.Load()}
}

// queryCtx bounds one statement, all its attempts, by Options.Timeout (or
// ctx's earlier deadline).
func (s *Store) queryCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	if s.health != nil {
		ctx = withTrack(ctx)
	}
	return ctx, cancel
}

// query is a statement of any kind; read, write and conditional qualify it.
func (s *Store) query(ctx context.Context, stmt string, args ...any) *gocql.Query {
	s.stmts.all.Add(1)
	return s.session.Query(stmt, args...).
		Consistency(s.o.Consistency).
		SerialConsistency(s.o.SerialConsistency).
		WithContext(ctx)
}

// read is an idempotent read: retried on the next host and hedged.
func (s *Store) read(ctx context.Context, stmt string, args ...any) *gocql.Query {
	q := s.query(ctx, stmt, args...)
	if s.o.DisableHealth {
		return q
	}
	q = q.Idempotent(true).RetryPolicy(idempotentRetry{}).SetRequestTimeout(s.o.AttemptTimeout)
	if s.hedge != nil {
		q = q.SetSpeculativeExecutionPolicy(s.hedge)
	}
	return q
}

// write is a plain write at client timestamp ts: idempotent (see
// attempts.go), retried on the next host and hedged.
func (s *Store) write(ctx context.Context, ts int64, stmt string, args ...any) *gocql.Query {
	q := s.read(ctx, stmt, args...)
	if s.o.DisableHealth {
		return q
	}
	return q.WithTimestamp(ts)
}

// writeBatch is an UNLOGGED batch of plain writes at client timestamp ts,
// qualified as write qualifies a statement.
func (s *Store) writeBatch(ctx context.Context, ts int64) *gocql.Batch {
	s.stmts.all.Add(1)
	b := s.session.Batch(gocql.UnloggedBatch).WithContext(ctx)
	b.SetConsistency(s.o.Consistency)
	if s.o.DisableHealth {
		return b
	}
	b = b.WithTimestamp(ts).RetryPolicy(idempotentRetry{}).SetRequestTimeout(s.o.AttemptTimeout)
	if s.hedge != nil {
		b = b.SpeculativeExecutionPolicy(s.hedge)
	}
	return b
}

// conditionalQuery is an LWT statement: one attempt (neverRetry), never
// hedged, bounded by LWTAttemptTimeout.
func (s *Store) conditionalQuery(ctx context.Context, stmt string, args ...any) *gocql.Query {
	s.stmts.conditional.Add(1)
	return s.query(ctx, stmt, args...).RetryPolicy(neverRetry{}).SetRequestTimeout(s.o.LWTAttemptTimeout)
}

// blob returns b, or an empty non-nil slice for nil: gocql binds a nil
// slice as null, and a null value would delete the cell.
func blob(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// owned returns a copy of b (never nil, as blob) that belongs to the call:
// a speculative attempt of a hedged write may bind its values after the
// call has returned (gocql returns the first execution that ends and lets
// the others run on), when the caller may have reused its buffer.
func owned(b []byte) []byte {
	c := make([]byte, len(b))
	copy(c, b)
	return c
}

// ttlSeconds converts a validated TTL to CQL's whole seconds.
func ttlSeconds(ttl time.Duration) int { return int(ttl / time.Second) }

// trimmed drops the trailing newline some gocql errors carry.
type trimmed struct{ err error }

func (t trimmed) Error() string { return strings.TrimSpace(t.err.Error()) }
func (t trimmed) Unwrap() error { return t.err }
