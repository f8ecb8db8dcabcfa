package adversary_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/adversary"
	"github.com/cqlseq/cqlseq/storage/mem"
	"github.com/cqlseq/cqlseq/storage/storagetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	ctx  = context.Background()
	p, c = []byte("p"), []byte("c")
)

// flavours runs f for the CQL flavour and the Multi one.
func flavours(t *testing.T, f func(t *testing.T, multi bool)) {
	t.Run("cql", func(t *testing.T) { f(t, false) })
	t.Run("multi", func(t *testing.T) { f(t, true) })
}

func newCore(t *testing.T, o adversary.Options) (*adversary.Core, *mem.Store) {
	t.Helper()
	inner := mem.New(mem.Options{})
	core, err := adversary.New(inner, o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = core.Close() })
	return core, inner
}

// only returns options with every allowance off but those set in o.
func only(o adversary.Options) adversary.Options {
	for _, f := range []*float64{&o.WriteLost, &o.WriteHeld, &o.WritePartial, &o.CondLost, &o.CondHeld,
		&o.CondNotSent, &o.ReadFail, &o.Deliver, &o.Drop} {
		if *f == 0 {
			*f = adversary.Never
		}
	}
	return o
}

func get(t *testing.T, st storage.Storage, pKey, cCols []byte) (string, bool) {
	t.Helper()
	v, ok, err := st.Get(ctx, pKey, cCols)
	require.NoError(t, err)
	return string(v), ok
}

// TestConformanceQuiet: in Quiet mode a Client is the inner store.
func TestConformanceQuiet(t *testing.T) {
	flavours(t, func(t *testing.T, multi bool) {
		var mu sync.Mutex
		now := time.Unix(1_700_000_000, 0)
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		storagetest.Run(t, storagetest.Harness{
			New: func(t testing.TB) storage.Storage {
				core, err := adversary.New(mem.New(mem.Options{Now: clock}), adversary.Options{Quiet: true, Multi: multi})
				require.NoError(t, err)
				t.Cleanup(func() { _ = core.Close() })
				return core.Client("quiet")
			},
			Advance: func(_ testing.TB, d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() },
		})
	})
}

// workload makes n seeded calls of every kind through a few clients of
// core, crashing one and starting another now and then, and checks every
// conditional answer against the inner store: ok == true only if this call
// applied the write, ok == false only if it did not.
func workload(t *testing.T, core *adversary.Core, inner storage.Storage, seed uint64, n int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	clients := []adversary.Client{core.Client("o0"), core.Client("o1"), core.Client("o2")}
	pick := func(prefix string, k int) []byte { return fmt.Appendf(nil, "%s%d", prefix, rng.IntN(k)) }
	version := uint64(0)
	for i := range n {
		cl := clients[rng.IntN(len(clients))]
		pk, v := pick("p", 3), fmt.Appendf(nil, "v%d", i)
		cur := func(cc []byte) []byte { b, _, err := inner.Get(ctx, pk, cc); require.NoError(t, err); return b }
		checkCond := func(op string, cc []byte, ok bool, err error, want []byte) {
			t.Helper()
			got, found, gerr := inner.Get(ctx, pk, cc)
			require.NoError(t, gerr)
			switch {
			case ok:
				require.NoError(t, err)
				if want == nil {
					require.False(t, found, "call %d: %s answered ok, the row must be gone", i, op)
				} else {
					require.Equal(t, string(want), string(got), "call %d: %s answered ok without applying", i, op)
				}
			case err == nil && want != nil:
				require.NotEqual(t, string(want), string(got), "call %d: %s answered not ok but applied", i, op)
			}
		}
		switch r := rng.IntN(20); {
		case r < 3:
			_ = cl.Put(ctx, pk, pick("u", 4), v)
		case r < 6:
			version++
			ver := version
			if rng.IntN(4) == 0 {
				ver = version / 2 // a late writer's lower version
			}
			rows := make([]storage.Row, 1+rng.IntN(4))
			for j := range rows {
				rows[j] = storage.Row{PKey: pick("p", 3), CCols: pick("w", 4), Value: v, Version: ver}
			}
			_ = cl.PutBatch(ctx, rows)
		case r < 8:
			cc := pick("c", 4)
			ok, err := cl.InsertIfNotExists(ctx, pk, cc, v, 0)
			checkCond("InsertIfNotExists", cc, ok, err, v)
		case r < 10:
			cc := pick("c", 4)
			old := cur(cc)
			if rng.IntN(3) == 0 {
				old = []byte("stale")
			}
			ok, err := cl.CompareAndSwap(ctx, pk, cc, old, v, 0)
			checkCond("CompareAndSwap", cc, ok, err, v)
		case r < 11:
			cc := pick("c", 4)
			ok, err := cl.CompareAndDelete(ctx, pk, cc, cur(cc))
			checkCond("CompareAndDelete", cc, ok, err, nil)
		case r < 13:
			fence := pick("c", 4)
			conds := []storage.Condition{{CCols: fence, Expected: cur(fence)}}
			rows := []storage.Row{{PKey: pk, CCols: fence, Value: v}, {PKey: pk, CCols: pick("c", 4), Value: v}}
			ok, err := cl.ApplyBatchIf(ctx, pk, conds, rows)
			checkCond("ApplyBatchIf", fence, ok, err, v)
		case r < 14:
			ma, isMulti := storage.AsMultiApplier(cl)
			if !isMulti {
				continue
			}
			fence := pick("c", 4)
			batches := []storage.CondBatch{
				{PKey: pk, Conds: []storage.Condition{{CCols: fence, Expected: cur(fence)}}, Rows: []storage.Row{{PKey: pk, CCols: fence, Value: v}}},
				{PKey: []byte("p9"), Rows: []storage.Row{{PKey: []byte("p9"), CCols: pick("c", 4), Value: v}}, Requires: []int{0}},
			}
			applied := make([]bool, 2)
			err := ma.ApplyBatchesIf(ctx, batches, applied)
			checkCond("ApplyBatchesIf", fence, applied[0], err, v)
			if err != nil {
				require.Equal(t, []bool{false, false}, applied)
			}
		case r < 15:
			_, _, _ = cl.Get(ctx, pk, pick("c", 4))
		case r < 16:
			_ = cl.GetBatch(ctx, pk, []storage.GetItem{{CCols: pick("c", 4)}, {CCols: pick("u", 4)}})
		case r < 17:
			_ = cl.Read(ctx, pk, nil, nil, func(_, _ []byte) error { return nil })
		case r < 18:
			_ = cl.ReadPartitions(ctx, [][]byte{[]byte("p0"), []byte("p1")}, nil, nil, func(_, _, _ []byte) error { return nil })
		case r < 19:
			_, _, _ = cl.QueryTTL(ctx, pk, pick("c", 4))
		default:
			switch rng.IntN(4) {
			case 0: // an owner dies, the next takes over
				j := rng.IntN(len(clients))
				clients[j].Crash()
				held := core.Held()
				require.ErrorIs(t, clients[j].Put(ctx, pk, []byte("u0"), v), adversary.ErrCrashed)
				require.Equal(t, held, core.Held())
				clients[j] = core.Client(fmt.Sprintf("o%d", i))
			case 1:
				core.DeliverSome()
			case 2:
				core.DeliverAll()
			}
		}
	}
}

// dump returns every row of the partitions the workload writes.
func dump(t *testing.T, st storage.Storage) map[string]string {
	t.Helper()
	out := map[string]string{}
	keys := [][]byte{[]byte("p0"), []byte("p1"), []byte("p2"), []byte("p9")}
	require.NoError(t, st.ReadPartitions(ctx, keys, nil, nil, func(pk, cc, v []byte) error {
		out[string(pk)+"/"+string(cc)] = string(v)
		return nil
	}))
	return out
}

// TestDeterministic: the same seed and the same calls make the same
// choices; another seed makes others.
func TestDeterministic(t *testing.T) {
	flavours(t, func(t *testing.T, multi bool) {
		run := func(seed int64) (adversary.Stats, []string, map[string]string) {
			core, inner := newCore(t, adversary.Options{Seed: seed, Multi: multi})
			workload(t, core, inner, 7, 1500)
			core.DeliverAll()
			return core.Stats(), core.Trace(), dump(t, inner)
		}
		s1, t1, d1 := run(42)
		s2, t2, d2 := run(42)
		assert.Equal(t, s1, s2)
		assert.Equal(t, t1, t2)
		assert.Equal(t, d1, d2)
		assert.Len(t, t1, 200, "the trace keeps the last 200 actions")
		s3, t3, _ := run(43)
		assert.NotEqual(t, t1, t3, "another seed")
		assert.NotEqual(t, s1, s3, "another seed")
	})
}

// TestEveryAllowanceIsTaken: with the default options a few thousand calls
// take each allowance.
func TestEveryAllowanceIsTaken(t *testing.T) {
	flavours(t, func(t *testing.T, multi bool) {
		core, inner := newCore(t, adversary.Options{Seed: 1, Multi: multi})
		workload(t, core, inner, 1, 4000)
		t.Logf("held before DeliverAll: %d", core.Held())
		core.DeliverAll()
		assert.Zero(t, core.Held())
		s := core.Stats()
		t.Logf("%+v", s)
		for name, n := range map[string]uint64{
			"Calls": s.Calls, "Refused": s.Refused,
			"WriteOK": s.WriteOK, "WriteLost": s.WriteLost, "WriteHeld": s.WriteHeld,
			"CondOK": s.CondOK, "CondLost": s.CondLost, "CondHeld": s.CondHeld, "CondNotSent": s.CondNotSent,
			"ReadOK": s.ReadOK, "ReadFailed": s.ReadFailed,
			"Landed": s.Landed, "LandedBeforeCall": s.LandedBeforeCall, "Dropped": s.Dropped,
		} {
			assert.Positive(t, n, name)
		}
		if multi {
			assert.Zero(t, s.WritePartial, "a PutBatch is one transaction")
		} else {
			assert.Positive(t, s.WritePartial)
		}
		assert.Zero(t, s.Passed+s.Invalid+s.Cancelled)
	})
}

// TestLateLowerVersionReplacesNothing: a held PutBatch lands after a
// write of a higher version of one of its rows: that row keeps the higher
// version's value; the other lands. On a Multi core the batch is held as
// one write.
func TestLateLowerVersionReplacesNothing(t *testing.T) {
	flavours(t, func(t *testing.T, multi bool) {
		core, inner := newCore(t, only(adversary.Options{Multi: multi, WriteHeld: 1}))
		cl := core.Client("old")
		err := cl.PutBatch(ctx, []storage.Row{
			{PKey: p, CCols: []byte("a"), Value: []byte("v3"), Version: 3},
			{PKey: p, CCols: []byte("b"), Value: []byte("v3"), Version: 3},
		})
		require.ErrorIs(t, err, storage.ErrUnavailable)
		require.ErrorIs(t, err, adversary.ErrInjected)
		assert.Equal(t, map[bool]int{true: 1, false: 2}[multi], core.Held())
		_, ok := get(t, inner, p, []byte("a"))
		assert.False(t, ok, "held rows are invisible")
		require.NoError(t, inner.PutBatch(ctx, []storage.Row{{PKey: p, CCols: []byte("a"), Value: []byte("v5"), Version: 5}}))
		core.DeliverAll()
		assert.Zero(t, core.Held())
		v, _ := get(t, inner, p, []byte("a"))
		assert.Equal(t, "v5", v, "a late lower version replaces nothing")
		v, _ = get(t, inner, p, []byte("b"))
		assert.Equal(t, "v3", v)
		assert.Equal(t, uint64(map[bool]int{true: 1, false: 2}[multi]), core.Stats().Landed)
	})
}

// TestHeldConditionalJudgedWhenItLands: a held InsertIfNotExists that
// lands after another insert of its row does not apply; one on a free row
// does. A held ApplyBatchesIf is judged as a whole when it lands.
func TestHeldConditionalJudgedWhenItLands(t *testing.T) {
	core, inner := newCore(t, only(adversary.Options{Multi: true, CondHeld: 1}))
	cl := core.Client("old")
	ok, err := cl.InsertIfNotExists(ctx, p, c, []byte("late"), 0)
	require.ErrorIs(t, err, storage.ErrUnknownOutcome)
	assert.False(t, ok)
	ok, err = cl.InsertIfNotExists(ctx, p, []byte("free"), []byte("late"), 0)
	require.ErrorIs(t, err, storage.ErrUnknownOutcome)
	assert.False(t, ok)
	ok, err = inner.InsertIfNotExists(ctx, p, c, []byte("first"), 0)
	require.NoError(t, err)
	require.True(t, ok)

	ma, isMulti := storage.AsMultiApplier(cl)
	require.True(t, isMulti)
	applied := []bool{true, true}
	err = ma.ApplyBatchesIf(ctx, []storage.CondBatch{
		{PKey: p, Conds: []storage.Condition{{CCols: []byte("fence")}}, Rows: []storage.Row{{PKey: p, CCols: []byte("fence"), Value: []byte("late")}}},
		{PKey: p, Rows: []storage.Row{{PKey: p, CCols: []byte("dependant"), Value: []byte("late")}}, Requires: []int{0}},
	}, applied)
	require.ErrorIs(t, err, storage.ErrUnknownOutcome)
	assert.Equal(t, []bool{false, false}, applied)
	require.NoError(t, inner.Put(ctx, p, []byte("fence"), []byte("taken")))
	assert.Equal(t, 3, core.Held())

	core.DeliverAll()
	v, _ := get(t, inner, p, c)
	assert.Equal(t, "first", v, "judged when it landed")
	v, _ = get(t, inner, p, []byte("free"))
	assert.Equal(t, "late", v)
	_, ok = get(t, inner, p, []byte("dependant"))
	assert.False(t, ok, "the held batches were judged together")
}

// allCalls makes one call of every operation on st and returns each one's
// error by name.
func allCalls(st storage.Storage, ctx context.Context) map[string]error {
	out := map[string]error{}
	_, _, out["Get"] = st.Get(ctx, p, c)
	out["GetBatch"] = st.GetBatch(ctx, p, []storage.GetItem{{CCols: c}})
	out["Put"] = st.Put(ctx, p, []byte("new"), []byte("x"))
	out["PutBatch"] = st.PutBatch(ctx, []storage.Row{{PKey: p, CCols: []byte("new"), Value: []byte("x")}})
	out["Read"] = st.Read(ctx, p, nil, nil, func(_, _ []byte) error { return nil })
	out["ReadPartitions"] = st.ReadPartitions(ctx, [][]byte{p}, nil, nil, func(_, _, _ []byte) error { return nil })
	_, out["InsertIfNotExists"] = st.InsertIfNotExists(ctx, p, []byte("new"), []byte("x"), 0)
	_, out["CompareAndSwap"] = st.CompareAndSwap(ctx, p, c, []byte("x"), []byte("y"), 0)
	_, out["CompareAndDelete"] = st.CompareAndDelete(ctx, p, c, []byte("x"))
	_, out["ApplyBatchIf"] = st.ApplyBatchIf(ctx, p, nil, []storage.Row{{PKey: p, CCols: []byte("new"), Value: []byte("x")}})
	_, _, out["QueryTTL"] = st.QueryTTL(ctx, p, c)
	if ma, ok := storage.AsMultiApplier(st); ok {
		out["ApplyBatchesIf"] = ma.ApplyBatchesIf(ctx, []storage.CondBatch{{PKey: p, Rows: []storage.Row{{PKey: p, CCols: []byte("new")}}}}, make([]bool, 1))
	}
	return out
}

// TestCrashedClient: a crashed client's calls fail and change nothing;
// its held write still lands.
func TestCrashedClient(t *testing.T) {
	flavours(t, func(t *testing.T, multi bool) {
		core, inner := newCore(t, only(adversary.Options{Multi: multi, WriteHeld: 1, Deliver: 1}))
		cl := core.Client("dead")
		require.ErrorIs(t, cl.Put(ctx, p, c, []byte("x")), storage.ErrUnavailable)
		cl.Crash()
		for name, err := range allCalls(cl, ctx) {
			assert.ErrorIs(t, err, adversary.ErrCrashed, name)
			assert.ErrorIs(t, err, storage.ErrUnavailable, name)
		}
		assert.Equal(t, 1, core.Held(), "nothing landed: a dead client's call is not a call")
		assert.Empty(t, dumpP(t, inner))
		core.DeliverAll()
		assert.Equal(t, map[string]string{"c": "x"}, dumpP(t, inner), "the held write landed")
		assert.Contains(t, core.Trace(), "#1 dead crashed")
	})
}

// TestCrashAfterFaults: an armed client crashes as it answers its n-th
// faulted write, conditional or not; its held writes may still land.
func TestCrashAfterFaults(t *testing.T) {
	flavours(t, func(t *testing.T, multi bool) {
		core, inner := newCore(t, only(adversary.Options{Multi: multi, WriteHeld: 1, CondLost: 1}))
		cl := core.Client("armed")
		cl.CrashAfterFaults(2)
		require.ErrorIs(t, cl.Put(ctx, p, c, []byte("x")), storage.ErrUnavailable)
		_, _, err := cl.Get(ctx, p, c)
		require.NoError(t, err, "one fault: still alive")
		_, err = cl.InsertIfNotExists(ctx, p, []byte("d"), []byte("y"), 0)
		require.ErrorIs(t, err, storage.ErrUnknownOutcome, "the second fault is answered")
		_, _, err = cl.Get(ctx, p, c)
		require.ErrorIs(t, err, adversary.ErrCrashed, "and the client is dead after it")
		core.DeliverAll()
		assert.Equal(t, map[string]string{"c": "x", "d": "y"}, dumpP(t, inner), "its held write landed")
		assert.Contains(t, strings.Join(core.Trace(), "\n"), "armed crashed after a faulted write")

		disarmed := core.Client("disarmed")
		disarmed.CrashAfterFaults(1)
		disarmed.CrashAfterFaults(0)
		for range 3 {
			require.ErrorIs(t, disarmed.Put(ctx, p, c, []byte("z")), storage.ErrUnavailable)
		}
		_, _, err = disarmed.Get(ctx, p, c)
		require.NoError(t, err, "disarmed: never crashes")
	})
}

// TestCrashAfterFault: a client with CrashAfterFault 1 dies right after
// its first faulted write; one with 0 (the default) does not.
func TestCrashAfterFault(t *testing.T) {
	core, _ := newCore(t, only(adversary.Options{WriteHeld: 1}))
	dies, lives := core.Client("dies"), core.Client("lives")
	dies.CrashAfterFault(1)
	for _, cl := range []adversary.Client{dies, lives} {
		require.ErrorIs(t, cl.Put(ctx, p, c, []byte("x")), storage.ErrUnavailable)
	}
	_, _, err := dies.Get(ctx, p, c)
	require.ErrorIs(t, err, adversary.ErrCrashed)
	_, _, err = lives.Get(ctx, p, c)
	require.NoError(t, err)
}

func dumpP(t *testing.T, st storage.Storage) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, st.Read(ctx, p, nil, nil, func(cc, v []byte) error { out[string(cc)] = string(v); return nil }))
	return out
}

// TestCancelledAndInvalidCalls: a done ctx fails a call that does nothing;
// invalid arguments reach the inner store unplayed.
func TestCancelledAndInvalidCalls(t *testing.T) {
	flavours(t, func(t *testing.T, multi bool) {
		core, inner := newCore(t, only(adversary.Options{Multi: multi, WriteHeld: 1, CondHeld: 1, ReadFail: 1, Deliver: 1}))
		cl := core.Client("o")
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		cancelled := allCalls(cl, cctx)
		for name, err := range cancelled {
			assert.ErrorIs(t, err, context.Canceled, name)
		}
		assert.Zero(t, core.Held())
		assert.Empty(t, dumpP(t, inner))

		bad := map[string]error{}
		bad["PutBatch version"] = cl.PutBatch(ctx, []storage.Row{{PKey: p, CCols: c, Version: storage.MaxVersion + 1}})
		_, bad["InsertIfNotExists ttl"] = cl.InsertIfNotExists(ctx, p, c, nil, -time.Second)
		_, bad["CompareAndSwap ttl"] = cl.CompareAndSwap(ctx, p, c, nil, nil, time.Millisecond)
		_, bad["ApplyBatchIf versioned"] = cl.ApplyBatchIf(ctx, p, []storage.Condition{{CCols: c}}, []storage.Row{{PKey: p, CCols: c, Version: 1}})
		_, bad["ApplyBatchIf elsewhere"] = cl.ApplyBatchIf(ctx, p, nil, []storage.Row{{PKey: []byte("q"), CCols: c}})
		bad["ReadPartitions empty key"] = cl.ReadPartitions(ctx, [][]byte{{}}, nil, nil, func(_, _, _ []byte) error { return nil })
		if ma, ok := storage.AsMultiApplier(cl); ok {
			bad["ApplyBatchesIf"] = ma.ApplyBatchesIf(ctx, []storage.CondBatch{{PKey: p, Requires: []int{0}}}, make([]bool, 1))
		}
		for name, err := range bad {
			assert.ErrorIs(t, err, storage.ErrInvalidArgument, name)
			assert.NotErrorIs(t, err, adversary.ErrInjected, name)
		}
		assert.Zero(t, core.Held())
		s := core.Stats()
		assert.Equal(t, uint64(len(bad)), s.Invalid)
		assert.Equal(t, uint64(len(cancelled)), s.Cancelled)
		assert.Zero(t, s.Calls)
	})
}

// TestFailedReads: a failed Read passes at most 3 rows, then fails.
func TestFailedReads(t *testing.T) {
	core, inner := newCore(t, only(adversary.Options{ReadFail: 1}))
	for i := range 10 {
		require.NoError(t, inner.Put(ctx, p, []byte{byte(i)}, nil))
	}
	cl := core.Client("o")
	for range 20 {
		n := 0
		err := cl.Read(ctx, p, nil, nil, func(_, _ []byte) error { n++; return nil })
		require.ErrorIs(t, err, storage.ErrUnavailable)
		require.LessOrEqual(t, n, 3)
		_, _, err = cl.Get(ctx, p, []byte{0})
		require.ErrorIs(t, err, storage.ErrUnavailable)
	}
	mine := errors.New("mine")
	for range 20 {
		err := cl.Read(ctx, p, nil, nil, func(_, _ []byte) error { return mine })
		if !errors.Is(err, storage.ErrUnavailable) {
			assert.Same(t, mine, err, "a callback's error is returned as is")
		}
	}
}

// TestCopiesHeldBytes: a held write keeps its own copy of the caller's
// bytes.
func TestCopiesHeldBytes(t *testing.T) {
	core, inner := newCore(t, only(adversary.Options{WriteHeld: 1, CondHeld: 1}))
	cl := core.Client("o")
	pk, cc, v := []byte("p"), []byte("c"), []byte("value")
	require.Error(t, cl.Put(ctx, pk, cc, v))
	cc2, v2 := []byte("d"), []byte("other")
	_, err := cl.InsertIfNotExists(ctx, pk, cc2, v2, 0)
	require.Error(t, err)
	copy(pk, "X")
	copy(cc, "X")
	copy(cc2, "X")
	copy(v, "XXXXX")
	copy(v2, "XXXXX")
	core.DeliverAll()
	assert.Equal(t, map[string]string{"c": "value", "d": "other"}, dumpP(t, inner))
}

// TestMultiApplierOnlyWhenMulti: Probe finds a MultiApplier through a
// client only with Options.Multi over a MultiApplier.
func TestMultiApplierOnlyWhenMulti(t *testing.T) {
	type plain struct{ storage.Storage } // hides mem's ApplyBatchesIf
	for _, tc := range []struct {
		name  string
		multi bool
		inner storage.Storage
		want  bool
	}{
		{"multi over mem", true, mem.New(mem.Options{}), true},
		{"cql over mem", false, mem.New(mem.Options{}), false},
		{"multi over a plain store", true, &plain{mem.New(mem.Options{})}, false},
	} {
		core, err := adversary.New(tc.inner, adversary.Options{Multi: tc.multi})
		require.NoError(t, err)
		cl := core.Client("o")
		assert.Same(t, tc.inner, cl.Unwrap(), tc.name)
		_, isMulti := cl.(storage.MultiApplier)
		assert.Equal(t, tc.multi, isMulti, tc.name)
		ma, ok := storage.AsMultiApplier(cl)
		assert.Equal(t, tc.want, ok, tc.name)
		assert.Equal(t, tc.want, storage.Probe(cl).PutBatchOneTransaction(), tc.name)
		if ok {
			assert.Same(t, cl, ma.(adversary.Client), tc.name)
		}
		if isMulti && !ok {
			err := cl.(storage.MultiApplier).ApplyBatchesIf(ctx, []storage.CondBatch{{PKey: p}}, make([]bool, 1))
			assert.ErrorIs(t, err, storage.ErrNotMultiApplier)
		}
		require.NoError(t, core.Close())
	}
}

// TestClose: a client's Close leaves the store open; Core.Close closes it.
func TestClose(t *testing.T) {
	core, err := adversary.New(mem.New(mem.Options{}), adversary.Options{Quiet: true})
	require.NoError(t, err)
	a, b := core.Client("a"), core.Client("b")
	require.NoError(t, a.Close())
	assert.ErrorIs(t, a.Put(ctx, p, c, nil), storage.ErrClosed)
	require.NoError(t, b.Put(ctx, p, c, []byte("v")))
	require.NoError(t, core.Close())
	_, _, err = b.Get(ctx, p, c)
	assert.ErrorIs(t, err, storage.ErrClosed)
	_, _, err = b.Unwrap().Get(ctx, p, c)
	assert.ErrorIs(t, err, storage.ErrClosed, "the inner store is closed")
}

// TestOptions: invalid options are refused, each problem reported.
func TestOptions(t *testing.T) {
	_, err := adversary.New(mem.New(mem.Options{}), adversary.Options{
		WriteLost: 2, ReadFail: math.NaN(), CondLost: 0.5, CondHeld: 0.5, CondNotSent: 0.5,
	})
	require.ErrorIs(t, err, adversary.ErrInvalidOptions)
	require.ErrorIs(t, err, storage.ErrInvalidArgument)
	for _, want := range []string{"WriteLost 2", "ReadFail NaN", "CondLost+CondHeld+CondNotSent", "WriteLost+WriteHeld+WritePartial"} {
		assert.Contains(t, err.Error(), want)
	}
	assert.Contains(t, err.Error(), "adversary: ")
	_, err = adversary.New(nil, adversary.Options{})
	assert.ErrorIs(t, err, storage.ErrInvalidArgument)

	var o adversary.Options
	o.EnsureDefaults()
	assert.Equal(t, adversary.Options{WriteLost: 0.05, WriteHeld: 0.05, WritePartial: 0.05, CondLost: 0.05,
		CondHeld: 0.05, CondNotSent: 0.05, ReadFail: 0.05, Deliver: 0.05, Drop: 0.25}, o)
	o = adversary.Options{WriteHeld: adversary.Never}
	o.EnsureDefaults()
	assert.Equal(t, adversary.Never, o.WriteHeld, "Never stays")
	o = only(adversary.Options{WriteHeld: 1})
	assert.NoError(t, o.Validate())
}
