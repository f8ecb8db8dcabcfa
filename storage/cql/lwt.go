package cql

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/gocql/gocql"

	"github.com/cqlseq/cqlseq/storage"
)

// state is one row as a write leaves it or a condition requires it.
type state struct {
	exists bool
	value  []byte
}

func (a state) equal(b state) bool {
	return a.exists == b.exists && (!a.exists || bytes.Equal(a.value, b.value))
}

// effect is what a conditional write does to one row: the state it leaves
// (after) and the state its conditions require beforehand (before; nil when
// they say nothing about the row).
type effect struct {
	cCols  []byte
	after  state
	before *state
}

// A write ID: 8 random bytes of the process, then a counter. Every
// conditional write of the process has its own, which it stores in the
// column w of each row it writes: no other call can leave a row holding
// it, so a SERIAL re-read that finds it proves that this call's write was
// applied, whatever value a competitor wrote.
var writeIDs struct {
	prefix [8]byte
	n      atomic.Uint64
}

func init() {
	if _, err := rand.Read(writeIDs.prefix[:]); err != nil {
		panic(fmt.Sprintf("cql: no randomness for write IDs: %v", err))
	}
}

// newWriteID returns a write ID no other call of any process uses.
func newWriteID() []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), writeIDs.prefix[:]...), writeIDs.n.Add(1))
}

// written is one row as a SERIAL re-read returns it.
type written struct {
	value, id []byte
}

// provable reports whether a SERIAL read could prove that a write with
// these effects was applied: it writes at least one row (and with it its
// write ID). A delete leaves no row: an absent row is what another
// writer's delete or a TTL leaves too.
func provable(effects []effect) bool {
	for _, e := range effects {
		if e.after.exists {
			return true
		}
	}
	return false
}

// proven reports whether rows (clustering key -> row, as a SERIAL read
// returned them) prove that the write with these effects and write ID id
// was applied: it is provable, every row it writes holds its value and id,
// and every row it deletes is absent. A row holding the same value under
// another write ID is a competitor's write, never taken for this one.
func proven(effects []effect, rows map[string]written, id []byte) bool {
	for _, e := range effects {
		r, ok := rows[string(e.cCols)]
		if !e.after.exists {
			if ok {
				return false
			}
			continue
		}
		if !ok || !bytes.Equal(r.value, e.after.value) || !bytes.Equal(r.id, id) {
			return false
		}
	}
	return provable(effects)
}

// conditional runs exec, a conditional write that stores write ID id in
// every row it writes, with a per-query deadline. It reports applied only
// if this call's write was applied: when the outcome is unknown it
// re-reads the effects' rows at the serial consistency and reports applied
// only if the read proves it (see proven); otherwise it returns an error
// wrapping storage.ErrUnknownOutcome (and ctx.Err() when the caller's
// context ended with the write in flight). Effects that no read can prove
// (a delete, or a table without write IDs) are not re-read: the caller
// gets the unknown outcome at once, with the time the re-read would have
// spent left for its retry.
func (s *Store) conditional(ctx context.Context, op string, pKey []byte, effects []effect, exec func(qctx context.Context, id []byte) (bool, error)) (bool, error) {
	id := newWriteID()
	qctx, cancel := s.queryCtx(ctx)
	defer cancel()
	applied, err := exec(qctx, id)
	if err == nil {
		return applied, nil
	}
	if !outcomeUnknown(err) {
		return false, s.fail(ctx, qctx, op, err)
	}
	switch {
	case s.closed.Load():
		return false, fmt.Errorf("cql: %s: %w: %w: %w", op, storage.ErrUnknownOutcome, storage.ErrClosed, err)
	case ctx.Err() != nil:
		return false, fmt.Errorf("cql: %s: %w: %w: %w", op, storage.ErrUnknownOutcome, ctx.Err(), err)
	}
	if !s.stmt.writeIDs || !provable(effects) {
		s.o.Logger.Warn("cql: conditional write outcome unknown (no read can prove it applied)", "op", op, "err", err)
		return false, fmt.Errorf("cql: %s: %w: %w (not re-read: no read proves it applied)", op, storage.ErrUnknownOutcome, err)
	}
	keys := make([][]byte, 0, len(effects))
	for _, e := range effects {
		keys = append(keys, blob(e.cCols))
	}
	// The re-read has what is left of the call's deadline, at least
	// AttemptTimeout. It is a read, so it goes to a healthy host first.
	rctx := ctx // DisableHealth, the behaviour before: a fresh Timeout
	if !s.o.DisableHealth {
		left := s.o.AttemptTimeout
		if d, ok := qctx.Deadline(); ok {
			left = max(left, time.Until(d))
		}
		var rcancel context.CancelFunc
		rctx, rcancel = context.WithTimeout(ctx, left)
		defer rcancel()
	}
	rows, rerr := s.readWritten(rctx, op+": serial re-read", pKey, keys)
	if rerr != nil {
		s.o.Logger.Warn("cql: conditional write outcome unknown, serial re-read failed", "op", op, "err", err, "reread", rerr)
		return false, fmt.Errorf("cql: %s: %w: %w (serial re-read: %v)", op, storage.ErrUnknownOutcome, err, rerr)
	}
	if proven(effects, rows, id) {
		s.o.Logger.Info("cql: conditional write outcome decided by serial re-read: applied", "op", op, "err", err)
		return true, nil
	}
	s.o.Logger.Warn("cql: conditional write outcome unknown after serial re-read", "op", op, "err", err)
	return false, fmt.Errorf("cql: %s: %w: %w (a serial re-read does not prove it applied)", op, storage.ErrUnknownOutcome, err)
}

// readWritten reads the rows of pKey with the given clustering keys, with
// their write IDs, at the serial consistency.
func (s *Store) readWritten(ctx context.Context, op string, pKey []byte, keys [][]byte) (map[string]written, error) {
	qctx, cancel := s.queryCtx(ctx)
	defer cancel()
	iter := s.read(qctx, s.stmt.getInW, pKey, keys).Consistency(s.o.SerialConsistency).Iter()
	found := map[string]written{}
	for {
		var k, v, id []byte // fresh per row: gocql reuses a destination's array
		if !iter.Scan(&k, &v, &id) {
			break
		}
		found[string(k)] = written{value: blob(v), id: id}
	}
	if err := iter.Close(); err != nil {
		return nil, s.fail(ctx, qctx, op, err)
	}
	return found, nil
}

// InsertIfNotExists implements storage.Storage (INSERT ... IF NOT EXISTS
// USING TTL).
func (s *Store) InsertIfNotExists(ctx context.Context, pKey, cCols, value []byte, ttl time.Duration) (bool, error) {
	const op = "insert if not exists"
	if err := storage.ValidateTTL(ttl); err != nil {
		return false, fmt.Errorf("cql: %s: %w", op, err)
	}
	if err := s.begin(ctx, op, pKey); err != nil {
		return false, err
	}
	eff := []effect{{cCols: cCols, after: state{true, blob(value)}, before: &state{}}}
	return s.conditional(ctx, op, pKey, eff, func(qctx context.Context, id []byte) (bool, error) {
		return s.conditionalQuery(qctx, s.stmt.putTTLIfNotExists, s.withID(id, 3, pKey, blob(cCols), blob(value), ttlSeconds(ttl))...).
			MapScanCAS(map[string]any{})
	})
}

// CompareAndSwap implements storage.Storage (UPDATE ... IF value = ?). With
// a TTL, the row is also re-inserted with that TTL in the same conditional
// batch, so that the row's liveness expires with its value.
func (s *Store) CompareAndSwap(ctx context.Context, pKey, cCols, oldValue, newValue []byte, ttl time.Duration) (bool, error) {
	const op = "compare and swap"
	if err := storage.ValidateTTL(ttl); err != nil {
		return false, fmt.Errorf("cql: %s: %w", op, err)
	}
	if err := s.begin(ctx, op, pKey); err != nil {
		return false, err
	}
	c, o, n, sec := blob(cCols), blob(oldValue), blob(newValue), ttlSeconds(ttl)
	eff := []effect{{cCols: cCols, after: state{true, n}, before: &state{true, o}}}
	return s.conditional(ctx, op, pKey, eff, func(qctx context.Context, id []byte) (bool, error) {
		if ttl == 0 {
			return s.conditionalQuery(qctx, s.stmt.casUpdate, s.withID(id, 2, sec, n, pKey, c, o)...).MapScanCAS(map[string]any{})
		}
		b := s.batch(qctx)
		b.Query(s.stmt.putTTLW, s.withID(id, 3, pKey, c, n, sec)...)
		b.Query(s.stmt.casUpdate, s.withID(id, 2, sec, n, pKey, c, o)...)
		return s.execBatchCAS(b)
	})
}

// CompareAndDelete implements storage.Storage (DELETE ... IF value = ?).
func (s *Store) CompareAndDelete(ctx context.Context, pKey, cCols, expected []byte) (bool, error) {
	const op = "compare and delete"
	if err := s.begin(ctx, op, pKey); err != nil {
		return false, err
	}
	exp := blob(expected)
	eff := []effect{{cCols: cCols, after: state{}, before: &state{true, exp}}}
	return s.conditional(ctx, op, pKey, eff, func(qctx context.Context, _ []byte) (bool, error) {
		return s.conditionalQuery(qctx, s.stmt.casDelete, pKey, blob(cCols), exp).MapScanCAS(map[string]any{})
	})
}

// ApplyBatchIf implements storage.Storage with one conditional batch on the
// partition: a written row named by a nil-Expected condition is INSERT ...
// IF NOT EXISTS, a row with a value condition UPDATE ... IF value = ?, other
// written rows plain INSERTs. A condition on a row the batch does not write
// is carried by a statement that leaves the row as the condition requires
// it: for a value condition, an UPDATE writing the same value back (which
// clears a TTL the row had); for a nil one, a DELETE of the value IF value =
// null. Conditions that contradict each other make it return false without
// a query. Without conditions the rows are written as one UNLOGGED batch.
func (s *Store) ApplyBatchIf(ctx context.Context, pKey []byte, conds []storage.Condition, rows []storage.Row) (bool, error) {
	const op = "apply batch if"
	if err := s.begin(ctx, op, pKey); err != nil {
		return false, err
	}
	if err := storage.ValidateVersions(rows, len(conds) > 0); err != nil {
		return false, fmt.Errorf("cql: %s: %w", op, err)
	}
	plan, err := planBatchIf(pKey, conds, rows)
	if err != nil {
		return false, fmt.Errorf("cql: %s: %w", op, err)
	}
	switch {
	case plan.never:
		return false, nil
	case len(plan.entries) == 0:
		return true, nil
	case len(conds) == 0:
		rs := chunkRows(rows, len(rows), math.MaxInt) // one partition: one chunk
		if err := s.writeChunk(ctx, s.clock.next(), rs[0]); err != nil {
			return false, err
		}
		return true, nil
	}
	return s.conditional(ctx, op, pKey, plan.effects, func(qctx context.Context, id []byte) (bool, error) {
		b := s.batch(qctx)
		for _, e := range plan.entries {
			switch e.kind {
			case kindPut, kindInsertIfNotExists:
				b.Query(s.stmt.byKind(e.kind), s.withID(id, 3, e.args...)...)
			case kindUpdateIf:
				b.Query(s.stmt.byKind(e.kind), s.withID(id, 1, e.args...)...)
			default:
				b.Query(s.stmt.byKind(e.kind), e.args...)
			}
		}
		return s.execBatchCAS(b)
	})
}

// Statement kinds of a conditional batch.
type stmtKind int

const (
	kindPut               stmtKind = iota // INSERT
	kindInsertIfNotExists                 // INSERT ... IF NOT EXISTS
	kindUpdateIf                          // UPDATE SET value = ? ... IF value = ?
	kindCondAbsent                        // DELETE value ... IF value = null
)

func (st statements) byKind(k stmtKind) string {
	switch k {
	case kindInsertIfNotExists:
		return st.insertIfNotExists
	case kindUpdateIf:
		return st.updateIf
	case kindCondAbsent:
		return st.condAbsent
	}
	return st.putW
}

// withID returns args with the write ID id inserted at index i, where the
// statement binds w; args as they are on a table without write IDs.
func (s *Store) withID(id []byte, i int, args ...any) []any {
	if !s.stmt.writeIDs {
		return args
	}
	return slices.Insert(args, i, any(id))
}

type batchEntry struct {
	kind stmtKind
	args []any
}

// batchPlan is ApplyBatchIf's batch: its statements, their effects, and
// whether the conditions contradict each other.
type batchPlan struct {
	entries []batchEntry
	effects []effect
	never   bool
}

// planBatchIf builds ApplyBatchIf's statements. Rows outside pKey are
// storage.ErrInvalidArgument; a later row for a key replaces an earlier one.
func planBatchIf(pKey []byte, conds []storage.Condition, rows []storage.Row) (batchPlan, error) {
	var p batchPlan
	for _, r := range rows {
		if !bytes.Equal(r.PKey, pKey) {
			return p, fmt.Errorf("%w: row in another partition", storage.ErrInvalidArgument)
		}
	}
	cond := map[string]*state{}
	var condOrder []string
	for _, c := range conds {
		want := &state{}
		if c.Expected != nil {
			want = &state{true, c.Expected}
		}
		if prev, ok := cond[string(c.CCols)]; ok {
			if !prev.equal(*want) {
				p.never = true
				return p, nil
			}
			continue
		}
		cond[string(c.CCols)] = want
		condOrder = append(condOrder, string(c.CCols))
	}
	written := map[string]int{} // clustering key -> index in p.effects
	for _, r := range rows {
		if i, ok := written[string(r.CCols)]; ok {
			p.effects[i].after.value = blob(r.Value)
			continue
		}
		written[string(r.CCols)] = len(p.effects)
		p.effects = append(p.effects, effect{cCols: blob(r.CCols), after: state{true, blob(r.Value)}, before: cond[string(r.CCols)]})
	}
	for _, e := range p.effects {
		switch {
		case e.before == nil:
			p.entries = append(p.entries, batchEntry{kindPut, []any{pKey, e.cCols, e.after.value}})
		case !e.before.exists:
			p.entries = append(p.entries, batchEntry{kindInsertIfNotExists, []any{pKey, e.cCols, e.after.value}})
		default:
			p.entries = append(p.entries, batchEntry{kindUpdateIf, []any{e.after.value, pKey, e.cCols, blob(e.before.value)}})
		}
	}
	for _, k := range condOrder {
		if _, ok := written[k]; ok {
			continue
		}
		c, want := []byte(k), cond[k]
		p.effects = append(p.effects, effect{cCols: c, after: *want, before: want})
		if want.exists {
			p.entries = append(p.entries, batchEntry{kindUpdateIf, []any{blob(want.value), pKey, c, blob(want.value)}})
		} else {
			p.entries = append(p.entries, batchEntry{kindCondAbsent, []any{pKey, c}})
		}
	}
	return p, nil
}

// batch returns a batch for a conditional write bounded by qctx.
func (s *Store) batch(qctx context.Context) *gocql.Batch {
	s.stmts.all.Add(1)
	s.stmts.conditional.Add(1)
	b := s.session.Batch(gocql.LoggedBatch).WithContext(qctx).SerialConsistency(s.o.SerialConsistency).RetryPolicy(neverRetry{}).
		SetRequestTimeout(s.o.LWTAttemptTimeout)
	b.SetConsistency(s.o.Consistency)
	return b
}

// neverRetry is the retry policy of every conditional statement: the
// driver never sends one again. A conditional write re-sent after its
// first attempt was applied answers "not applied" (a false negative);
// conditional settles an unknown outcome itself, by a SERIAL re-read.
type neverRetry struct{}

func (neverRetry) Attempt(gocql.RetryableQuery) bool { return false }

func (neverRetry) GetRetryType(error) gocql.RetryType { return gocql.Rethrow }

// execBatchCAS executes a conditional batch and reads [applied] by name.
func (s *Store) execBatchCAS(b *gocql.Batch) (bool, error) {
	applied, iter, err := s.session.MapExecuteBatchCAS(b, map[string]any{})
	if iter != nil {
		if cerr := iter.Close(); err == nil {
			err = cerr
		}
	}
	return applied, err
}
