package plog_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/plog/plogtest"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/mem"
)

// paxosFault is what paxosStore does to one conditional call.
type paxosFault int

const (
	// acceptOnly: the call's round gets its proposal accepted but not
	// committed. The conditions are judged now; if they hold, the rows
	// become the partition's pending proposal, invisible to reads, and
	// the next conditional call on the partition commits them as they
	// are before running its own round. The call returns an error
	// wrapping storage.ErrUnknownOutcome either way. ApplyBatchIf only.
	acceptOnly paxosFault = iota + 1
	// failBeforeRound: the call fails before its round, with an error
	// wrapping storage.ErrUnknownOutcome: nothing changes, and a pending
	// proposal stays pending.
	failBeforeRound
)

// paxosStore models, over a storage/mem Store, the Paxos round behind a
// Cassandra lightweight transaction: each conditional call (ApplyBatchIf,
// InsertIfNotExists, CompareAndSwap, CompareAndDelete) on a partition
// first commits the proposal a round before it left accepted but not
// committed there, then runs its own. The faults queued by fail apply to
// the next conditional calls, one each. It exposes the contract only (no
// storage.MultiApplier, no storage.Wrapper), so that a FencedWriter uses
// ApplyBatchIf, as on CQL. Plain reads and unconditional writes go
// straight to the mem Store.
type paxosStore struct {
	storage.Storage
	mu struct {
		sync.Mutex
		faults  []paxosFault
		pending map[string][]storage.Row // accepted, not committed, by partition key
	}
}

func newPaxosStore(tb testing.TB) (*paxosStore, storage.Storage) {
	inner := mem.New(mem.Options{})
	tb.Cleanup(func() { _ = inner.Close() })
	s := &paxosStore{Storage: inner}
	s.mu.pending = make(map[string][]storage.Row)
	return s, inner
}

// fail queues faults for the next conditional calls, one each.
func (s *paxosStore) fail(faults ...paxosFault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.faults = append(s.mu.faults, faults...)
}

// pending reports whether partition pKey holds an uncommitted proposal.
func (s *paxosStore) pending(pKey []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.mu.pending[string(pKey)]
	return ok
}

// round runs one conditional call on pKey: run is the call itself on the
// mem Store; conds and rows are what acceptOnly holds.
func (s *paxosStore) round(ctx context.Context, op string, pKey []byte, conds []storage.Condition, rows []storage.Row, run func() (bool, error)) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var fault paxosFault
	if len(s.mu.faults) > 0 {
		fault, s.mu.faults = s.mu.faults[0], s.mu.faults[1:]
	}
	if fault == failBeforeRound {
		return false, fmt.Errorf("paxos: %s failed before its round: %w", op, storage.ErrUnknownOutcome)
	}
	if p, ok := s.mu.pending[string(pKey)]; ok {
		// A round first completes the proposal accepted before it, as
		// accepted: its conditions were judged when it was proposed.
		if _, err := s.Storage.ApplyBatchIf(ctx, pKey, nil, p); err != nil {
			return false, fmt.Errorf("paxos: %s: committing the pending proposal: %w", op, err)
		}
		delete(s.mu.pending, string(pKey))
	}
	if fault != acceptOnly {
		return run()
	}
	if rows == nil {
		return false, fmt.Errorf("paxos: %s: %w: acceptOnly is modelled for ApplyBatchIf only", op, storage.ErrInvalidArgument)
	}
	items := make([]storage.GetItem, len(conds))
	for i, c := range conds {
		items[i].CCols = c.CCols
	}
	if err := s.Storage.GetBatch(ctx, pKey, items); err != nil {
		return false, err
	}
	holds := true
	for i, c := range conds {
		holds = holds && c.Holds(items[i].Value, items[i].Ok)
	}
	if holds {
		p := make([]storage.Row, len(rows))
		for i, r := range rows {
			p[i] = storage.Row{PKey: bytes.Clone(r.PKey), CCols: bytes.Clone(r.CCols), Value: bytes.Clone(r.Value), Version: r.Version}
		}
		s.mu.pending[string(pKey)] = p
	}
	return false, fmt.Errorf("paxos: %s: proposal accepted, not committed: %w", op, storage.ErrUnknownOutcome)
}

func (s *paxosStore) ApplyBatchIf(ctx context.Context, pKey []byte, conds []storage.Condition, rows []storage.Row) (bool, error) {
	if rows == nil {
		rows = []storage.Row{}
	}
	return s.round(ctx, "ApplyBatchIf", pKey, conds, rows, func() (bool, error) {
		return s.Storage.ApplyBatchIf(ctx, pKey, conds, rows)
	})
}

func (s *paxosStore) InsertIfNotExists(ctx context.Context, pKey, cCols, value []byte, ttl time.Duration) (bool, error) {
	return s.round(ctx, "InsertIfNotExists", pKey, nil, nil, func() (bool, error) {
		return s.Storage.InsertIfNotExists(ctx, pKey, cCols, value, ttl)
	})
}

func (s *paxosStore) CompareAndSwap(ctx context.Context, pKey, cCols, oldValue, newValue []byte, ttl time.Duration) (bool, error) {
	return s.round(ctx, "CompareAndSwap", pKey, nil, nil, func() (bool, error) {
		return s.Storage.CompareAndSwap(ctx, pKey, cCols, oldValue, newValue, ttl)
	})
}

func (s *paxosStore) CompareAndDelete(ctx context.Context, pKey, cCols, expected []byte) (bool, error) {
	return s.round(ctx, "CompareAndDelete", pKey, nil, nil, func() (bool, error) {
		return s.Storage.CompareAndDelete(ctx, pKey, cCols, expected)
	})
}

// TestPaxosStoreModel pins the model the in-doubt tests rely on.
func TestPaxosStoreModel(t *testing.T) {
	ctx := context.Background()
	st, inner := newPaxosStore(t)
	_, isMA := storage.AsMultiApplier(st)
	require.False(t, isMA, "the contract only, as on CQL")
	pk, other := []byte("p"), []byte("q")
	a, b := []byte("a"), []byte("b")

	st.fail(acceptOnly)
	ok, err := st.ApplyBatchIf(ctx, pk, []storage.Condition{{CCols: a}}, []storage.Row{{PKey: pk, CCols: a, Value: []byte("1")}})
	require.ErrorIs(t, err, storage.ErrUnknownOutcome)
	require.False(t, ok)
	require.True(t, st.pending(pk))
	_, found, err := st.Get(ctx, pk, a)
	require.NoError(t, err)
	require.False(t, found, "an accepted proposal is invisible to reads")

	st.fail(failBeforeRound)
	_, err = st.InsertIfNotExists(ctx, pk, b, []byte("x"), 0)
	require.ErrorIs(t, err, storage.ErrUnknownOutcome)
	require.True(t, st.pending(pk), "a call failed before its round completes nothing")
	ok, err = st.InsertIfNotExists(ctx, other, a, []byte("x"), 0)
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, st.pending(pk), "a round on another partition completes nothing here")

	ok, err = st.CompareAndSwap(ctx, pk, a, []byte("1"), []byte("2"), 0)
	require.NoError(t, err)
	require.True(t, ok, "the round commits the proposal first, then runs its own")
	require.False(t, st.pending(pk))
	v, _, err := inner.Get(ctx, pk, a)
	require.NoError(t, err)
	require.Equal(t, []byte("2"), v)

	// A proposal whose conditions do not hold when accepted commits
	// nothing.
	st.fail(acceptOnly)
	_, err = st.ApplyBatchIf(ctx, pk, []storage.Condition{{CCols: a}}, []storage.Row{{PKey: pk, CCols: a, Value: []byte("3")}})
	require.ErrorIs(t, err, storage.ErrUnknownOutcome)
	require.False(t, st.pending(pk))
	ok, err = st.CompareAndDelete(ctx, pk, a, []byte("2"))
	require.NoError(t, err)
	require.True(t, ok)
}

// inDoubtSetup writes offset 1 of partition 1 with a FencedWriter of epoch
// 1 over a paxosStore, establishing the fence of block 0.
func inDoubtSetup(t *testing.T, maxEvents int) (*paxosStore, storage.Storage, *plog.FencedWriter) {
	st, inner := newPaxosStore(t)
	w := plogtest.NewWriter(t, st, 1, 1, maxEvents, 1<<20)
	require.NoError(t, w.WriteGroup(context.Background(), plogtest.Group(plogtest.OwnerOf(1, 1), 1, 1)))
	return st, inner, w
}

// TestFencedInDoubtEarlierEncodingSurfaces: batch b at offset 2 is accepted
// but not committed (outcome unknown); batch c at offset 2, a different
// event, fails before its round (outcome unknown); the round of batch d at
// offset 2 commits b first and is refused. b's bytes are one of the
// writer's in-doubt encodings of offset 2, though not the last one: the
// writer returns ErrOwnEventStored, is not stopped, and writes on after
// offset 2.
func TestFencedInDoubtEarlierEncodingSurfaces(t *testing.T) {
	ctx := context.Background()
	st, inner, w := inDoubtSetup(t, 0)
	b, c, d := plogtest.OwnerOf(1, 2), plogtest.OwnerOf(1, 3), plogtest.OwnerOf(1, 4)

	st.fail(acceptOnly)
	require.ErrorIs(t, w.WriteGroup(ctx, plogtest.Group(b, 2, 1)), storage.ErrUnknownOutcome)
	require.True(t, st.pending(plog.EventPKey(1, 2)))
	require.Len(t, plogtest.ReadLog(t, inner, 1, 1), 1, "b is accepted, not committed: not read")

	st.fail(failBeforeRound)
	require.ErrorIs(t, w.WriteGroup(ctx, plogtest.Group(c, 2, 1)), storage.ErrUnknownOutcome)
	require.True(t, st.pending(plog.EventPKey(1, 2)), "c's call had no round")

	err := w.WriteGroup(ctx, plogtest.Group(d, 2, 1))
	require.ErrorIs(t, err, plog.ErrOwnEventStored, "b is the writer's own event")
	require.NotErrorIs(t, err, plog.ErrConflict)
	require.NoError(t, w.Stopped())
	got := plogtest.ReadLog(t, inner, 1, 1)
	require.Len(t, got, 2)
	assert.Equal(t, b, got[1].Owner, "d's round committed b at offset 2")

	require.NoError(t, w.WriteGroup(ctx, plogtest.Group(d, 3, 2)), "after the replay, at the offsets after b")
	got = plogtest.ReadLog(t, inner, 1, 1)
	require.Len(t, got, 4)
	assert.Equal(t, []plogtest.Owner{plogtest.OwnerOf(1, 1), b, d, d}, owners(got))
}

// TestFencedInDoubtForeignEventConflicts: with several in-doubt encodings
// kept at offset 2, an event the writer never sent there (another
// proposer's proposal, accepted before the writer's next round commits it)
// is a conflict that stops the writer. So is a chunk of which only some
// offsets hold the writer's own events.
func TestFencedInDoubtForeignEventConflicts(t *testing.T) {
	ctx := context.Background()
	b, c, d, f := plogtest.OwnerOf(1, 2), plogtest.OwnerOf(1, 3), plogtest.OwnerOf(1, 4), plogtest.OwnerOf(1, 9)

	t.Run("foreign", func(t *testing.T) {
		st, inner, w := inDoubtSetup(t, 0)
		st.fail(failBeforeRound, failBeforeRound)
		require.ErrorIs(t, w.WriteGroup(ctx, plogtest.Group(b, 2, 1)), storage.ErrUnknownOutcome)
		require.ErrorIs(t, w.WriteGroup(ctx, plogtest.Group(c, 2, 1)), storage.ErrUnknownOutcome)
		acceptForeign(t, st, 2, f)

		err := w.WriteGroup(ctx, plogtest.Group(d, 2, 1))
		require.ErrorIs(t, err, plog.ErrConflict)
		assert.Contains(t, err.Error(), "offsets [2], in a block fenced with this writer's epoch 1")
		require.ErrorIs(t, w.Stopped(), plog.ErrConflict)
		require.ErrorIs(t, w.WriteGroup(ctx, plogtest.Group(d, 3, 1)), plog.ErrConflict, "stopped")
		got := plogtest.ReadLog(t, inner, 1, 1)
		require.Len(t, got, 2)
		assert.Equal(t, f, got[1].Owner, "nothing overwritten")
	})

	t.Run("own and foreign in one chunk", func(t *testing.T) {
		st, _, w := inDoubtSetup(t, 0)
		st.fail(acceptOnly)
		require.ErrorIs(t, w.WriteGroup(ctx, plogtest.Group(b, 2, 1)), storage.ErrUnknownOutcome)
		st.fail(failBeforeRound)
		require.ErrorIs(t, w.WriteGroup(ctx, plogtest.Group(c, 2, 2)), storage.ErrUnknownOutcome)
		// b commits at 2 (the writer's own), f at 3 (never sent there).
		acceptForeign(t, st, 3, f)
		err := w.WriteGroup(ctx, plogtest.Group(d, 2, 2))
		require.ErrorIs(t, err, plog.ErrConflict)
		assert.Contains(t, err.Error(), "offsets [2 3]")
		require.ErrorIs(t, w.Stopped(), plog.ErrConflict)
	})
}

// acceptForeign leaves owner's event at offset off of partition 1 accepted
// but not committed, as another proposer's round under the fence of epoch
// 1 would.
func acceptForeign(t *testing.T, st *paxosStore, off isequencer.PLogOffset, owner plogtest.Owner) {
	t.Helper()
	enc, err := plog.AppendEncoded(nil, plogtest.Event(owner, off))
	require.NoError(t, err)
	pk, cc := plog.EventPKey(1, off), plog.EventCCols(off)
	st.fail(acceptOnly)
	_, err = st.ApplyBatchIf(context.Background(), pk,
		[]storage.Condition{{CCols: plog.FenceCCols(), Expected: plogtest.EpochBytes(1)}, {CCols: cc}},
		[]storage.Row{{PKey: pk, CCols: cc, Value: enc}})
	require.ErrorIs(t, err, storage.ErrUnknownOutcome)
	require.True(t, st.pending(pk))
}

func owners(s []plogtest.Stored) []plogtest.Owner {
	out := make([]plogtest.Owner, len(s))
	for i, e := range s {
		out[i] = e.Owner
	}
	return out
}

// TestFencedInDoubtPerOffsetBound: the writer keeps up to
// MaxInDoubtPerOffset distinct in-doubt encodings of an offset, the
// earliest among them; an encoding past the bound is not kept, and should
// it be stored, the writer stops with ErrConflict rather than take it for
// its own. The same encoding sent again takes no second place.
func TestFencedInDoubtPerOffsetBound(t *testing.T) {
	ctx := context.Background()
	owner := func(k int) plogtest.Owner { return plogtest.OwnerOf(1, 10+k) }
	d := plogtest.OwnerOf(1, 4)
	require.Less(t, 10+plog.MaxInDoubtPerOffset+1, 256, "owners of partition 1")

	t.Run("within", func(t *testing.T) {
		st, inner, w := inDoubtSetup(t, 0)
		st.fail(acceptOnly) // the earliest of MaxInDoubtPerOffset
		for k := range plog.MaxInDoubtPerOffset {
			if k > 0 {
				st.fail(failBeforeRound)
			}
			require.ErrorIs(t, w.WriteGroup(ctx, plogtest.Group(owner(k), 2, 1)), storage.ErrUnknownOutcome)
		}
		require.ErrorIs(t, w.WriteGroup(ctx, plogtest.Group(d, 2, 1)), plog.ErrOwnEventStored)
		require.NoError(t, w.Stopped())
		assert.Equal(t, owner(0), plogtest.ReadLog(t, inner, 1, 1)[1].Owner)
	})

	t.Run("past", func(t *testing.T) {
		st, inner, w := inDoubtSetup(t, 0)
		for k := range plog.MaxInDoubtPerOffset {
			st.fail(failBeforeRound)
			require.ErrorIs(t, w.WriteGroup(ctx, plogtest.Group(owner(k), 2, 1)), storage.ErrUnknownOutcome)
		}
		st.fail(acceptOnly) // sent by the writer, not kept
		require.ErrorIs(t, w.WriteGroup(ctx, plogtest.Group(owner(plog.MaxInDoubtPerOffset), 2, 1)), storage.ErrUnknownOutcome)
		require.ErrorIs(t, w.WriteGroup(ctx, plogtest.Group(d, 2, 1)), plog.ErrConflict)
		require.ErrorIs(t, w.Stopped(), plog.ErrConflict)
		assert.Equal(t, owner(plog.MaxInDoubtPerOffset), plogtest.ReadLog(t, inner, 1, 1)[1].Owner)
	})

	t.Run("repeats kept once", func(t *testing.T) {
		st, _, w := inDoubtSetup(t, 0)
		for range plog.MaxInDoubtPerOffset + 1 {
			st.fail(failBeforeRound)
			require.ErrorIs(t, w.WriteGroup(ctx, plogtest.Group(owner(0), 2, 1)), storage.ErrUnknownOutcome)
		}
		st.fail(acceptOnly) // the second distinct encoding of offset 2
		require.ErrorIs(t, w.WriteGroup(ctx, plogtest.Group(owner(1), 2, 1)), storage.ErrUnknownOutcome)
		require.ErrorIs(t, w.WriteGroup(ctx, plogtest.Group(d, 2, 1)), plog.ErrOwnEventStored)
		require.NoError(t, w.Stopped())
	})
}

// TestFencedInDoubtTotalBound: the writer keeps MaxInDoubt in-doubt
// encodings in all; past that, an encoding is not kept even at an offset
// with none, and should it be stored the writer stops with ErrConflict. A
// batch applied up to an offset frees the places of the encodings at and
// below it.
func TestFencedInDoubtTotalBound(t *testing.T) {
	ctx := context.Background()
	n := (plog.MaxInDoubt + plog.MaxInDoubtPerOffset - 1) / plog.MaxInDoubtPerOffset
	require.Less(t, n+2, 4096, "offsets 2..n+2 in block 0")
	last := isequencer.PLogOffset(n + 2)
	f, d := plogtest.OwnerOf(1, 9), plogtest.OwnerOf(1, 4)
	// fill leaves MaxInDoubt encodings in doubt at offsets 2..n+1, at most
	// MaxInDoubtPerOffset at each.
	fill := func(t *testing.T, st *paxosStore, w *plog.FencedWriter) {
		for k, left := 0, plog.MaxInDoubt; left > 0; k++ {
			st.fail(failBeforeRound)
			g := plogtest.Group(plogtest.OwnerOf(1, 10+k), 2, min(n, left))
			require.ErrorIs(t, w.WriteGroup(ctx, g), storage.ErrUnknownOutcome)
			left -= len(g)
		}
	}

	t.Run("past", func(t *testing.T) {
		st, _, w := inDoubtSetup(t, n)
		fill(t, st, w)
		st.fail(acceptOnly) // sent by the writer, not kept
		require.ErrorIs(t, w.WriteGroup(ctx, plogtest.Group(f, last, 1)), storage.ErrUnknownOutcome)
		err := w.WriteGroup(ctx, plogtest.Group(d, last, 1))
		require.ErrorIs(t, err, plog.ErrConflict)
		assert.Contains(t, err.Error(), fmt.Sprintf("offsets [%d]", last))
		require.ErrorIs(t, w.Stopped(), plog.ErrConflict)
	})

	t.Run("freed by an applied batch", func(t *testing.T) {
		st, _, w := inDoubtSetup(t, n)
		fill(t, st, w)
		require.NoError(t, w.WriteGroup(ctx, plogtest.Group(d, 2, n)), "settles offsets 2..n+1")
		st.fail(acceptOnly)
		require.ErrorIs(t, w.WriteGroup(ctx, plogtest.Group(f, last, 1)), storage.ErrUnknownOutcome)
		require.ErrorIs(t, w.WriteGroup(ctx, plogtest.Group(d, last, 1)), plog.ErrOwnEventStored)
		require.NoError(t, w.Stopped())
	})
}
