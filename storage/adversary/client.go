package adversary

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cqlseq/cqlseq/storage"
)

// Client is one process's view of a Core (Core.Client): a storage.Storage
// whose every call goes through the adversary, and a storage.Wrapper whose
// Unwrap returns the inner store. With Options.Multi it is also a
// storage.MultiApplier, delegating to the inner store's ApplyBatchesIf
// (storage.Probe finds it only when the inner store is one); without, it
// is not one. Close marks the client closed (its later calls return
// storage.ErrClosed) and does not close the inner store: Core.Close does.
type Client interface {
	storage.Storage
	storage.Wrapper

	// Name returns the client's name.
	Name() string

	// Crash makes the client dead: every later call returns an error
	// wrapping ErrCrashed (and so storage.ErrUnavailable) without touching
	// the store, as a dead process sends nothing more. Its writes already
	// held stay held and may still land.
	Crash()

	// CrashAfterFaults arms a crash: the client crashes (as Crash) as it
	// answers the n-th write the adversary faults from now on (an answer
	// lost, a write held, applied in part or not sent), so that the
	// process dies without learning what became of that write: the moment
	// whose late delivery matters most. n <= 0 disarms it.
	CrashAfterFaults(n int)

	// CrashAfterFault makes the client die (as Crash) right after each
	// write the adversary faults from now on with chance p (drawn from the
	// core's seeded generator); 0 never. Not an allowance of the storage
	// contract: a simulation's model of a process.
	CrashAfterFault(p float64)
}

// client is a Client of the CQL flavour: not a storage.MultiApplier.
type client struct {
	core    *Core
	name    string
	crashed atomic.Bool
	closed  atomic.Bool
	// crashIn is how many more faulted writes the client answers before
	// it crashes (CrashAfterFaults); 0: not armed. crashP is the chance it
	// dies after each (CrashAfterFault). Guarded by core.mu.
	crashIn int
	crashP  float64
}

// multiClient is a Client of the embedded flavour: a storage.MultiApplier.
type multiClient struct{ *client }

var (
	_ storage.MultiApplier = (*multiClient)(nil)
	_ Client               = (*multiClient)(nil)
	_ Client               = (*client)(nil)
)

// call names a call in the trace.
type call struct {
	client, op string
	pKey       []byte // the (first) partition written or read, if any
	rows       int    // rows written by a batch
	batches    int    // batches of ApplyBatchesIf
}

func (k call) String() string {
	s := k.client + " " + k.op
	if k.pKey != nil {
		s += fmt.Sprintf(" %.24q", k.pKey)
	}
	if k.rows > 0 {
		s += fmt.Sprintf(" (%d rows)", k.rows)
	}
	if k.batches > 0 {
		s += fmt.Sprintf(" (%d batches)", k.batches)
	}
	return s
}

func (k call) fail(what string, err error) error {
	return fmt.Errorf("%w: %s: %s: %w", ErrInjected, k, what, err)
}

func (cl *client) Name() string { return cl.name }

func (cl *client) Unwrap() storage.Storage { return cl.core.inner }

func (cl *client) Crash() {
	c := cl.core
	c.mu.Lock()
	defer c.mu.Unlock()
	cl.crashLocked("crashed")
}

func (cl *client) crashLocked(how string) {
	if !cl.crashed.Swap(true) {
		cl.core.traceLocked("%s %s", cl.name, how)
	}
}

func (cl *client) CrashAfterFault(p float64) {
	cl.core.mu.Lock()
	defer cl.core.mu.Unlock()
	cl.crashP = p
}

func (cl *client) CrashAfterFaults(n int) {
	cl.core.mu.Lock()
	defer cl.core.mu.Unlock()
	cl.crashIn = max(n, 0)
}

// faultedLocked counts a faulted write toward an armed crash, and draws
// the chance of CrashAfterFault.
func (cl *client) faultedLocked() {
	if cl.crashIn > 0 {
		if cl.crashIn--; cl.crashIn == 0 {
			cl.crashLocked("crashed after a faulted write (CrashAfterFaults)")
			return
		}
	}
	if cl.crashP > 0 && cl.core.mu.rng.Float64() < cl.crashP {
		cl.crashLocked("crashed after a faulted write (CrashAfterFault)")
	}
}

// Close implements storage.Storage: the client's later calls return
// storage.ErrClosed; the inner store stays open (see Core.Close).
func (cl *client) Close() error {
	cl.closed.Store(true)
	return nil
}

// enter starts call k. It refuses the call (closed, crashed, ctx done),
// or lets it pass to the inner store untouched (pass: Quiet, or invalid
// arguments), or locks the core for the caller to play it (the caller
// unlocks), after counting it and perhaps landing one held write first.
func (cl *client) enter(ctx context.Context, k call, valid bool) (pass bool, err error) {
	c := cl.core
	if cl.closed.Load() {
		return false, fmt.Errorf("adversary: %s: %w", k, storage.ErrClosed)
	}
	c.mu.Lock()
	switch {
	case c.mu.closed:
		err = fmt.Errorf("adversary: %s: %w", k, storage.ErrClosed)
	case cl.crashed.Load():
		c.mu.stats.Refused++
		err = fmt.Errorf("%w: %s", ErrCrashed, k)
	case ctx.Err() != nil:
		c.mu.stats.Cancelled++
		err = fmt.Errorf("adversary: %s: %w", k, ctx.Err())
	case !valid:
		c.mu.stats.Invalid++
		pass = true
	case c.o.Quiet:
		c.mu.stats.Passed++
		pass = true
	default:
		c.mu.stats.Calls++
		c.landOneLocked()
		return false, nil
	}
	c.mu.Unlock()
	return pass, err
}

// read plays allowance 3 on read call k: it returns -1 to let the read
// run, or how many rows to pass to the callback before failing it (always
// 0 unless rows).
func (cl *client) read(ctx context.Context, k call, valid, rows bool) (failAfter int, err error) {
	pass, err := cl.enter(ctx, k, valid)
	if err != nil || pass {
		return -1, err
	}
	c := cl.core
	defer c.mu.Unlock()
	if c.pickLocked(c.o.ReadFail) < 0 {
		c.mu.stats.ReadOK++
		return -1, nil
	}
	c.mu.stats.ReadFailed++
	if rows {
		failAfter = c.mu.rng.IntN(4)
	}
	c.traceLocked("%s: fails after %d rows", k, failAfter)
	return failAfter, nil
}

// errStop ends an inner read that the adversary fails midway.
var errStop = errors.New("adversary: stop")

// Get implements storage.Storage.
func (cl *client) Get(ctx context.Context, pKey, cCols []byte) ([]byte, bool, error) {
	k := call{client: cl.name, op: "Get", pKey: pKey}
	switch fail, err := cl.read(ctx, k, true, false); {
	case err != nil:
		return nil, false, err
	case fail >= 0:
		return nil, false, k.fail("read failed", storage.ErrUnavailable)
	}
	return cl.core.inner.Get(ctx, pKey, cCols)
}

// GetBatch implements storage.Storage.
func (cl *client) GetBatch(ctx context.Context, pKey []byte, items []storage.GetItem) error {
	k := call{client: cl.name, op: "GetBatch", pKey: pKey}
	switch fail, err := cl.read(ctx, k, true, false); {
	case err != nil:
		return err
	case fail >= 0:
		return k.fail("read failed", storage.ErrUnavailable)
	}
	return cl.core.inner.GetBatch(ctx, pKey, items)
}

// QueryTTL implements storage.Storage.
func (cl *client) QueryTTL(ctx context.Context, pKey, cCols []byte) (time.Duration, bool, error) {
	k := call{client: cl.name, op: "QueryTTL", pKey: pKey}
	switch fail, err := cl.read(ctx, k, true, false); {
	case err != nil:
		return 0, false, err
	case fail >= 0:
		return 0, false, k.fail("read failed", storage.ErrUnavailable)
	}
	return cl.core.inner.QueryTTL(ctx, pKey, cCols)
}

// Read implements storage.Storage. A failed read passes 0 to 3 rows to cb
// first.
func (cl *client) Read(ctx context.Context, pKey, from, to []byte, cb func(cCols, value []byte) error) error {
	k := call{client: cl.name, op: "Read", pKey: pKey}
	fail, err := cl.read(ctx, k, true, true)
	switch {
	case err != nil:
		return err
	case fail < 0:
		return cl.core.inner.Read(ctx, pKey, from, to, cb)
	}
	return failRead(k, fail, func(stop func() error) error {
		return cl.core.inner.Read(ctx, pKey, from, to, func(cCols, value []byte) error {
			if err := stop(); err != nil {
				return err
			}
			return cb(cCols, value)
		})
	})
}

// ReadPartitions implements storage.Storage, failing as Read does.
func (cl *client) ReadPartitions(ctx context.Context, pKeys [][]byte, from, to []byte, cb func(pKey, cCols, value []byte) error) error {
	k := call{client: cl.name, op: "ReadPartitions"}
	if len(pKeys) > 0 {
		k.pKey = pKeys[0]
	}
	_, invalid := storage.DistinctReadKeys(pKeys)
	fail, err := cl.read(ctx, k, invalid == nil, true)
	switch {
	case err != nil:
		return err
	case fail < 0:
		return cl.core.inner.ReadPartitions(ctx, pKeys, from, to, cb)
	}
	return failRead(k, fail, func(stop func() error) error {
		return cl.core.inner.ReadPartitions(ctx, pKeys, from, to, func(pKey, cCols, value []byte) error {
			if err := stop(); err != nil {
				return err
			}
			return cb(pKey, cCols, value)
		})
	})
}

// failRead runs read, whose callback calls stop before each row, so that
// it stops after n rows, and fails it then (or at its end). An error of
// read other than stop's (cb's own, the inner store's) is returned as is.
func failRead(k call, n int, read func(stop func() error) error) error {
	seen := 0
	err := read(func() error {
		if seen == n {
			return errStop
		}
		seen++
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return err
	}
	return k.fail(fmt.Sprintf("read failed after %d rows", seen), storage.ErrUnavailable)
}

// Put implements storage.Storage.
func (cl *client) Put(ctx context.Context, pKey, cCols, value []byte) error {
	k := call{client: cl.name, op: "Put", pKey: pKey}
	rows := []storage.Row{{PKey: pKey, CCols: cCols, Value: value}}
	return cl.write(ctx, k, rows, len(pKey) > 0, func(ctx context.Context, rows []storage.Row) error {
		return cl.core.inner.Put(ctx, rows[0].PKey, rows[0].CCols, rows[0].Value)
	})
}

// PutBatch implements storage.Storage. An empty batch is a no-op, never
// faulted.
func (cl *client) PutBatch(ctx context.Context, rows []storage.Row) error {
	k := call{client: cl.name, op: "PutBatch", rows: len(rows)}
	valid := storage.ValidateVersions(rows, false) == nil && !slices.ContainsFunc(rows, func(r storage.Row) bool { return len(r.PKey) == 0 })
	if len(rows) > 0 {
		k.pKey = rows[0].PKey
	}
	return cl.write(ctx, k, rows, valid, cl.core.inner.PutBatch)
}

// write plays allowance 1 on the unconditional write k of rows, which put
// applies to the inner store.
func (cl *client) write(ctx context.Context, k call, rows []storage.Row, valid bool, put func(context.Context, []storage.Row) error) error {
	pass, err := cl.enter(ctx, k, valid)
	if err != nil {
		return err
	}
	if pass {
		return put(ctx, rows)
	}
	c := cl.core
	defer c.mu.Unlock()
	if len(rows) == 0 {
		c.mu.stats.WriteOK++
		return put(ctx, rows)
	}
	partial := c.o.WritePartial
	if c.o.Multi || len(rows) < 2 {
		partial = Never
	}
	switch c.pickLocked(c.o.WriteLost, c.o.WriteHeld, partial) {
	case 0:
		if err := put(ctx, rows); err != nil {
			return err
		}
		c.mu.stats.WriteLost++
		c.traceLocked("%s: applied, answer lost", k)
		cl.faultedLocked()
		return k.fail("applied, answer lost", storage.ErrUnavailable)
	case 1:
		c.mu.stats.WriteHeld++
		ids := cl.holdRowsLocked(k, rows, put)
		c.traceLocked("%s: held as %s", k, ids)
		cl.faultedLocked()
		return k.fail("held back", storage.ErrUnavailable)
	case 2:
		var now, later []storage.Row
		for _, r := range rows {
			if c.mu.rng.IntN(2) == 0 {
				now = append(now, r)
			} else {
				later = append(later, r)
			}
		}
		if len(now) > 0 {
			if err := put(ctx, now); err != nil {
				return err
			}
		}
		c.mu.stats.WritePartial++
		ids := cl.holdRowsLocked(k, later, put)
		c.traceLocked("%s: %d rows applied, the rest held as %s", k, len(now), ids)
		cl.faultedLocked()
		return k.fail("partly applied", storage.ErrUnavailable)
	}
	if err := put(ctx, rows); err != nil {
		return err
	}
	c.mu.stats.WriteOK++
	return nil
}

// holdRowsLocked holds copies of rows: as one write in the Multi flavour
// (one transaction), each row on its own otherwise. It returns their ids.
func (cl *client) holdRowsLocked(k call, rows []storage.Row, put func(context.Context, []storage.Row) error) string {
	rows = cloneRows(rows)
	land := func(rows []storage.Row) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) { err := put(ctx, rows); return err == nil, err }
	}
	if cl.core.o.Multi {
		return fmt.Sprintf("h%d", cl.core.holdLocked(k.String(), land(rows)))
	}
	var ids []string
	for i := range rows {
		k := k
		k.pKey, k.rows = rows[i].PKey, 0
		id := cl.core.holdLocked(fmt.Sprintf("%s row %.16q", k, rows[i].CCols), land(rows[i:i+1]))
		ids = append(ids, fmt.Sprintf("h%d", id))
	}
	return strings.Join(ids, " ")
}

// condFunc is a conditional write on the inner store: ok reports whether
// it applied.
type condFunc func(ctx context.Context) (ok bool, err error)

// cond plays allowance 2 on the conditional write k: now is the write on
// the caller's arguments, later returns it on copies of them (to hold).
func (cl *client) cond(ctx context.Context, k call, valid bool, now condFunc, later func() condFunc) (bool, error) {
	pass, err := cl.enter(ctx, k, valid)
	if err != nil {
		return false, err
	}
	if pass {
		return now(ctx)
	}
	c := cl.core
	defer c.mu.Unlock()
	switch c.pickLocked(c.o.CondLost, c.o.CondHeld, c.o.CondNotSent) {
	case 0:
		ok, err := now(ctx)
		if err != nil {
			return false, err
		}
		c.mu.stats.CondLost++
		c.traceLocked("%s: applied=%v, answer lost", k, ok)
		cl.faultedLocked()
		return false, k.fail("answer lost", storage.ErrUnknownOutcome)
	case 1:
		c.mu.stats.CondHeld++
		id := c.holdLocked(k.String(), later())
		c.traceLocked("%s: held as h%d", k, id)
		cl.faultedLocked()
		return false, k.fail("held back", storage.ErrUnknownOutcome)
	case 2:
		c.mu.stats.CondNotSent++
		c.traceLocked("%s: not sent", k)
		cl.faultedLocked()
		return false, k.fail("not sent", storage.ErrUnavailable)
	}
	ok, err := now(ctx)
	if err != nil {
		return false, err
	}
	c.mu.stats.CondOK++
	return ok, nil
}

// InsertIfNotExists implements storage.Storage.
func (cl *client) InsertIfNotExists(ctx context.Context, pKey, cCols, value []byte, ttl time.Duration) (bool, error) {
	f := func(p, c, v []byte) condFunc {
		return func(ctx context.Context) (bool, error) { return cl.core.inner.InsertIfNotExists(ctx, p, c, v, ttl) }
	}
	k := call{client: cl.name, op: "InsertIfNotExists", pKey: pKey}
	return cl.cond(ctx, k, storage.ValidateTTL(ttl) == nil && len(pKey) > 0, f(pKey, cCols, value),
		func() condFunc { return f(bytes.Clone(pKey), bytes.Clone(cCols), bytes.Clone(value)) })
}

// CompareAndSwap implements storage.Storage.
func (cl *client) CompareAndSwap(ctx context.Context, pKey, cCols, oldValue, newValue []byte, ttl time.Duration) (bool, error) {
	f := func(p, c, o, n []byte) condFunc {
		return func(ctx context.Context) (bool, error) { return cl.core.inner.CompareAndSwap(ctx, p, c, o, n, ttl) }
	}
	k := call{client: cl.name, op: "CompareAndSwap", pKey: pKey}
	return cl.cond(ctx, k, storage.ValidateTTL(ttl) == nil && len(pKey) > 0, f(pKey, cCols, oldValue, newValue),
		func() condFunc {
			return f(bytes.Clone(pKey), bytes.Clone(cCols), bytes.Clone(oldValue), bytes.Clone(newValue))
		})
}

// CompareAndDelete implements storage.Storage.
func (cl *client) CompareAndDelete(ctx context.Context, pKey, cCols, expected []byte) (bool, error) {
	f := func(p, c, e []byte) condFunc {
		return func(ctx context.Context) (bool, error) { return cl.core.inner.CompareAndDelete(ctx, p, c, e) }
	}
	k := call{client: cl.name, op: "CompareAndDelete", pKey: pKey}
	return cl.cond(ctx, k, len(pKey) > 0, f(pKey, cCols, expected),
		func() condFunc { return f(bytes.Clone(pKey), bytes.Clone(cCols), bytes.Clone(expected)) })
}

// ApplyBatchIf implements storage.Storage.
func (cl *client) ApplyBatchIf(ctx context.Context, pKey []byte, conds []storage.Condition, rows []storage.Row) (bool, error) {
	f := func(b storage.CondBatch) condFunc {
		return func(ctx context.Context) (bool, error) {
			return cl.core.inner.ApplyBatchIf(ctx, b.PKey, b.Conds, b.Rows)
		}
	}
	b := storage.CondBatch{PKey: pKey, Conds: conds, Rows: rows}
	k := call{client: cl.name, op: "ApplyBatchIf", pKey: pKey, rows: len(rows)}
	valid := storage.ValidateBatches([]storage.CondBatch{b}, make([]bool, 1)) == nil
	return cl.cond(ctx, k, valid, f(b), func() condFunc { return f(cloneBatches([]storage.CondBatch{b})[0]) })
}

// ApplyBatchesIf implements storage.MultiApplier over an inner store that
// is one; over any other it refuses the call (storage.ErrNotMultiApplier,
// not played). A held call is judged as a whole when it lands. On an error
// applied is all false.
func (m *multiClient) ApplyBatchesIf(ctx context.Context, batches []storage.CondBatch, applied []bool) error {
	ma, ok := m.core.inner.(storage.MultiApplier)
	if !ok {
		clear(applied)
		return fmt.Errorf("adversary: %w", storage.ErrNotMultiApplier)
	}
	f := func(batches []storage.CondBatch, applied []bool) condFunc {
		return func(ctx context.Context) (bool, error) {
			err := ma.ApplyBatchesIf(ctx, batches, applied)
			return slices.Contains(applied, true), err
		}
	}
	k := call{client: m.name, op: "ApplyBatchesIf", batches: len(batches)}
	if len(batches) > 0 {
		k.pKey = batches[0].PKey
	}
	_, err := m.cond(ctx, k, storage.ValidateBatches(batches, applied) == nil, f(batches, applied),
		func() condFunc { return f(cloneBatches(batches), make([]bool, len(batches))) })
	if err != nil {
		clear(applied)
	}
	return err
}

func cloneRows(rows []storage.Row) []storage.Row {
	out := make([]storage.Row, len(rows))
	for i, r := range rows {
		out[i] = storage.Row{PKey: bytes.Clone(r.PKey), CCols: bytes.Clone(r.CCols), Value: bytes.Clone(r.Value), Version: r.Version}
	}
	return out
}

func cloneBatches(batches []storage.CondBatch) []storage.CondBatch {
	out := make([]storage.CondBatch, len(batches))
	for i, b := range batches {
		conds := make([]storage.Condition, len(b.Conds))
		for j, c := range b.Conds {
			conds[j] = storage.Condition{CCols: bytes.Clone(c.CCols), Expected: bytes.Clone(c.Expected)}
		}
		out[i] = storage.CondBatch{PKey: bytes.Clone(b.PKey), Conds: conds, Rows: cloneRows(b.Rows), Requires: slices.Clone(b.Requires)}
	}
	return out
}
