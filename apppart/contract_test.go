package apppart

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/plog/plogcheck"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/faulty"
	"github.com/cqlseq/cqlseq/storage/mem"
	"github.com/cqlseq/cqlseq/vvmadapter"
)

// The tests of this file play behaviours the storage contract allows
// (storage/storage.go) that broke a promise of the command flow (issue
// 49's items 1-5); storage/adversary and testenv/simulation play them at
// random.

// heldStore is one process's view of a store, as the contract allows it to
// behave: its first PutBatch that match selects (or the next one once
// hold is set) is not applied and answers an error (a write that times
// out), its rows are kept to land later (deliver), and the process dies:
// every later write fails without reaching the store. It hides the
// store's MultiApplier: the CQL path.
type heldStore struct {
	storage.Storage
	match func([]storage.Row) bool // nil: none; see hold
	mu    sync.Mutex
	hold  bool
	dead  bool
	held  [][]storage.Row
}

var errHeld = fmt.Errorf("held back: %w", storage.ErrUnavailable)

func (h *heldStore) PutBatch(ctx context.Context, rows []storage.Row) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.dead:
		return errHeld
	case h.hold || h.match != nil && h.match(rows):
		h.hold, h.dead = false, true // the process dies as the write leaves
		kept := make([]storage.Row, len(rows))
		for i, r := range rows {
			kept[i] = storage.Row{PKey: clone(r.PKey), CCols: clone(r.CCols), Value: clone(r.Value), Version: r.Version}
		}
		h.held = append(h.held, kept)
		return errHeld
	}
	return h.Storage.PutBatch(ctx, rows)
}

func (h *heldStore) Put(ctx context.Context, pKey, cCols, value []byte) error {
	if h.isDead() {
		return errHeld
	}
	return h.Storage.Put(ctx, pKey, cCols, value)
}

func (h *heldStore) ApplyBatchIf(ctx context.Context, pKey []byte, conds []storage.Condition, rows []storage.Row) (bool, error) {
	if h.isDead() {
		return false, errHeld
	}
	return h.Storage.ApplyBatchIf(ctx, pKey, conds, rows)
}

func (h *heldStore) InsertIfNotExists(ctx context.Context, pKey, cCols, value []byte, ttl time.Duration) (bool, error) {
	if h.isDead() {
		return false, errHeld
	}
	return h.Storage.InsertIfNotExists(ctx, pKey, cCols, value, ttl)
}

func (h *heldStore) CompareAndSwap(ctx context.Context, pKey, cCols, oldValue, newValue []byte, ttl time.Duration) (bool, error) {
	if h.isDead() {
		return false, errHeld
	}
	return h.Storage.CompareAndSwap(ctx, pKey, cCols, oldValue, newValue, ttl)
}

func (h *heldStore) isDead() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.dead
}

// crash makes every later write of the view fail.
func (h *heldStore) crash() {
	h.mu.Lock()
	h.dead = true
	h.mu.Unlock()
}

// deliver applies the held writes to the store now.
func (h *heldStore) deliver(t *testing.T) {
	t.Helper()
	h.mu.Lock()
	held := h.held
	h.held = nil
	h.mu.Unlock()
	require.NotEmpty(t, held, "no write was held back")
	for _, rows := range held {
		require.NoError(t, h.Storage.PutBatch(context.Background(), rows))
	}
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

// TestALateTrust2WriteReplacesNoLaterEvent is issue 49's item 1: a trust2
// owner's event write times out (its answer lost, the write held back) and
// the owner dies; the next owner, in each mode, acknowledges its own
// command; then the dead owner's write lands. The next owner's
// acknowledged event must still be read where it was acknowledged, and
// the PLog must hold no number twice.
func TestALateTrust2WriteReplacesNoLaterEvent(t *testing.T) {
	for _, mode := range []plog.Mode{plog.ModeTrust0, plog.ModeTrust1, plog.ModeFenced, plog.ModeTrust2} {
		t.Run("trust2 then "+mode.String(), func(t *testing.T) {
			inner := mem.New(mem.Options{})
			t.Cleanup(func() { inner.Close() })
			a := &heldStore{Storage: inner}
			ownerA := open(t, openOptions(a, plog.ModeTrust2))
			_, err := do(t, ownerA, cmdFor(1))
			require.NoError(t, err)

			a.mu.Lock()
			a.hold = true
			a.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			resA, err := ownerA.Do(ctx, cmdFor(2))
			cancel()
			require.Equal(t, Unknown, OutcomeOf(err), "%v", err)
			a.crash()
			require.NoError(t, ownerA.Close())

			ownerB := open(t, openOptions(inner, mode))
			cmdB := cmdFor(3)
			resB, err := do(t, ownerB, cmdB)
			require.NoError(t, err)
			t.Logf("owner A's unknown event at offset %d; owner B (%v) acknowledged offset %d", resA.Offset, mode, resB.Offset)
			require.NoError(t, ownerB.Close())

			a.deliver(t) // owner A's late write lands

			ownerC := open(t, openOptions(inner, plog.ModeTrust0))
			got, err := ownerC.Settle(settleCtx(t), cmdB, resB)
			require.NoError(t, err)
			assert.Equal(t, Stored, got, "owner B's acknowledged event at offset %d was replaced by owner A's late write", resB.Offset)
			gotA, errA := ownerC.Settle(settleCtx(t), cmdFor(2), resA)
			t.Logf("owner A's command settles %v (%v)", gotA, errA)
			checkPLog(t, inner)
		})
	}
}

// checkPLog fails t if the partition's PLog and stored numbers hold a
// finding of plogcheck (a number twice, backwards, a regression).
func checkPLog(t *testing.T, st storage.Storage) {
	t.Helper()
	rd, err := plog.NewReader(st, plog.ReaderOptions{})
	require.NoError(t, err)
	r, err := plogcheck.Partition(context.Background(), rd, testPart, plogcheck.PartitionOptions{Stored: vvmadapter.New(st, testApp)})
	require.NoError(t, err)
	for _, f := range r.Listed {
		t.Errorf("plogcheck: %v: %s", f.Kind, f.Text)
	}
}

// TestARecordConflictAnswersTheStoredEventStored is issue 49's item 2: in
// trust0 a reused record ID refuses the record, not the event, which is
// stored: Do must not answer it NotStored ("never will be"), and its
// answer must agree with the next owner's Settle.
func TestARecordConflictAnswersTheStoredEventStored(t *testing.T) {
	for name, wrap := range map[string]func(storage.Storage) storage.Storage{
		"multi-applier": func(st storage.Storage) storage.Storage { return st },
		"cql path":      func(st storage.Storage) storage.Storage { return &heldStore{Storage: st} },
	} {
		t.Run(name, func(t *testing.T) {
			inner := mem.New(mem.Options{})
			t.Cleanup(func() { inner.Close() })
			const ws = 7
			// Another writer's record row holds the record ID the
			// workspace's first command takes.
			id := plog.RecordID(firstRecordID)
			require.NoError(t, inner.Put(context.Background(), plog.RecordPKey(ws, id), plog.RecordCCols(id), plog.RecordValue(99)))

			p := open(t, openOptions(wrap(inner), plog.ModeTrust0))
			cmd := cmdFor(ws)
			res, err := do(t, p, cmd)
			require.ErrorIs(t, err, plog.ErrConflict)
			require.ErrorIs(t, err, ErrStopped)
			_, stored := readEvent(t, inner, res.Offset)
			require.True(t, stored, "the event is stored without its record")
			answered := OutcomeOf(err)
			require.NoError(t, p.Close())

			next := open(t, openOptions(inner, plog.ModeTrust1))
			settled, err := next.Settle(settleCtx(t), cmd, res)
			require.NoError(t, err)
			assert.Equal(t, Stored, settled)
			assert.Equal(t, settled, answered, "Do answered %v, the next owner settles %v: %v", answered, settled, err)
		})
	}
}

// TestSettleReadsAsTheReadersRead is issue 49's item 3: an event stored
// inside a gap marker's gap (a Paxos proposal of the lost period completing
// after `cqlseq advance`) is read by no reader: Settle must not answer it
// stored.
func TestSettleReadsAsTheReadersRead(t *testing.T) {
	st := mem.New(mem.Options{})
	defer st.Close()
	ctx := context.Background()
	p := newPartition(t, st)
	_, err := do(t, p, Command{WSKind: kind, WSID: 1, Seqs: []isequencer.SeqID{seqRec}, Payload: []byte("first")})
	require.NoError(t, err)
	require.NoError(t, p.Close())

	put := func(e *plog.Event) {
		b, err := plog.AppendEncoded(nil, e)
		require.NoError(t, err)
		require.NoError(t, st.Put(ctx, plog.EventPKey(testPart, e.Offset), plog.EventCCols(e.Offset), b))
	}
	put(&plog.Event{Offset: 2, Skip: 10}) // advance's gap: 3..12 hold nothing
	cmd := Command{WSKind: kind, WSID: 1, Seqs: []isequencer.SeqID{seqRec}, Payload: []byte("lost period")}
	res := Result{Offset: 5, Numbers: []isequencer.Number{100}}
	put(&plog.Event{Offset: 5, WSID: 1, WSKind: kind, Numbers: []plog.SeqNumber{{SeqID: seqRec, Number: 100}}, Payload: cmd.Payload})

	q := newPartition(t, st)
	got, err := q.Settle(settleCtx(t), cmd, res)
	assert.NotEqual(t, Stored, got, "offset 5 lies in the gap of the marker at 2: no reader reads it (%v)", err)
	require.ErrorIs(t, err, ErrRestored)
}

// TestDoHonoursCtxDuringTheNumbersRead is issue 49's item 4: a command of
// a workspace whose numbers are not cached reads them; with the store's
// reads slow, Do returns when its ctx ends, before taking an offset.
func TestDoHonoursCtxDuringTheNumbersRead(t *testing.T) {
	const slow = 3 * time.Second
	inner := mem.New(mem.Options{})
	defer inner.Close()
	st, err := faulty.New(inner, faulty.Options{})
	require.NoError(t, err)
	p := open(t, openOptions(st, plog.ModeTrust0))
	_, err = do(t, p, cmdFor(1))
	require.NoError(t, err)
	require.NoError(t, st.SetRules(faulty.Rule{
		Ops: []string{faulty.OpGet, faulty.OpGetBatch, faulty.OpRead, faulty.OpReadPartitions}, Action: faulty.Delay, Delay: slow,
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	began := time.Now()
	res, err := p.Do(ctx, cmdFor(2)) // WSID 2: not cached
	took := time.Since(began)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, NoEvent, OutcomeOf(err), "no offset taken: nothing to settle (%v)", err)
	assert.Zero(t, res.Offset)
	assert.Less(t, took, slow/2, "Do waited for the read after its ctx ended")
	st.Clear()
	r, err := do(t, p, cmdFor(2))
	require.NoError(t, err)
	assert.Equal(t, isequencer.PLogOffset(2), r.Offset, "the offset was not taken")
}

// TestAnIdlePartitionSettles is issue 49's item 5: a command's write was
// not applied (Unknown) and no other command arrives: Settle makes the
// offset final itself and answers NotStored, in each mode whose writes
// leave an unknown outcome.
func TestAnIdlePartitionSettles(t *testing.T) {
	for _, mode := range []plog.Mode{plog.ModeTrust0, plog.ModeTrust1, plog.ModeFenced} {
		t.Run(mode.String(), func(t *testing.T) {
			inner := mem.New(mem.Options{})
			t.Cleanup(func() { inner.Close() })
			st, err := faulty.New(inner, faulty.Options{})
			require.NoError(t, err)
			p := open(t, openOptions(st, mode))
			_, err = do(t, p, cmdFor(1))
			require.NoError(t, err)
			require.NoError(t, st.SetRules(faulty.Rule{
				Ops: []string{faulty.OpApplyBatchesIf}, Times: 1, Action: faulty.Fail, Err: errors.New("disk on fire"),
			}))
			cmd := cmdFor(1)
			res, err := do(t, p, cmd)
			require.Equal(t, Unknown, OutcomeOf(err), "%v", err)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			got, err := p.Settle(ctx, cmd, res)
			require.NoError(t, err)
			assert.Equal(t, NotStored, got)
			next, err := do(t, p, cmdFor(1))
			require.NoError(t, err)
			assert.Greater(t, next.Offset, res.Offset)
			checkPLog(t, inner)
		})
	}
}

// TestAHeldSealMarkerReplacesNoLaterEvent: an owner opening after a
// versioned writer dies as its seal's versioned marker is sent (held);
// an earlier owner's record "conditional", held too, lands after; the next
// owner, of a conditional mode, must still seal against the held marker,
// which then lands, and its acknowledged event must stay. Before the
// record was written "versioned" ahead of the marker, the next owner read
// "conditional", wrote its first event where the held marker then landed,
// and lost it (found by make simulate, seed 12177).
func TestAHeldSealMarkerReplacesNoLaterEvent(t *testing.T) {
	ctx := context.Background()
	inner := mem.New(mem.Options{})
	t.Cleanup(func() { inner.Close() })
	pkPart := vvmadapter.PartKey(testApp, testPart)
	isRecord := func(w vvmadapter.PLogWrites) func([]storage.Row) bool {
		return func(rows []storage.Row) bool {
			return len(rows) == 1 && bytes.Equal(rows[0].PKey, pkPart) &&
				bytes.Equal(rows[0].CCols, vvmadapter.PartCCols(vvmadapter.PLogWritesCC)) && bytes.Equal(rows[0].Value, []byte{byte(w)})
		}
	}
	isVoidMarker := func(rows []storage.Row) bool {
		for _, r := range rows {
			var e plog.Event
			if plog.Decode(testPart, 0, r.Value, &e) == nil && e.Void {
				return true
			}
		}
		return false
	}

	w := open(t, openOptions(inner, plog.ModeTrust2)) // the versioned writer
	_, err := do(t, w, cmdFor(1))
	require.NoError(t, err)
	require.NoError(t, w.Close())

	// X seals (versioned), then dies as its record "conditional" is sent.
	dies := func(st storage.Storage, mode plog.Mode) {
		t.Helper()
		octx, cancel := context.WithTimeout(ctx, time.Second) // its writes fail until then
		defer cancel()
		p, err := Open(octx, openOptions(st, mode))
		if err == nil {
			_ = p.Close()
		}
		require.Error(t, err)
	}
	x := &heldStore{Storage: inner, match: isRecord(vvmadapter.PLogWritesConditional)}
	dies(x, plog.ModeFenced)
	// Y reads "versioned", seals, and dies as its marker is sent.
	y := &heldStore{Storage: inner, match: isVoidMarker}
	dies(y, plog.ModeTrust1)
	x.deliver(t) // X's record lands late

	z := open(t, openOptions(inner, plog.ModeTrust1))
	cmd := cmdFor(2)
	res, err := do(t, z, cmd)
	require.NoError(t, err)
	require.NoError(t, z.Close())
	y.deliver(t) // Y's marker lands late

	next := open(t, openOptions(inner, plog.ModeTrust0))
	got, err := next.Settle(settleCtx(t), cmd, res)
	require.NoError(t, err)
	assert.Equal(t, Stored, got, "the acknowledged event at offset %d was replaced by the held seal marker", res.Offset)
	checkPLog(t, inner)
}
