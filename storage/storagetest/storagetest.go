// Package storagetest is the conformance suite every storage.Storage driver
// runs, and driver benchmarks. It imports testing; production code must not
// import it.
package storagetest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/storage"
)

// Harness builds the driver under test.
type Harness struct {
	// New returns an open Store. The suite closes it; New may register
	// further cleanup with t.Cleanup. Stores returned by one Harness may
	// share data: every test uses pKeys of its own.
	New func(t testing.TB) storage.Storage
	// Advance moves the store's clock by d (a real cluster sleeps).
	Advance func(t testing.TB, d time.Duration)
}

var run atomic.Uint64

// pk returns a partition key unique to this process run and test.
func pk(t testing.TB, name string) []byte {
	return fmt.Appendf(nil, "%s/%d/%d\x00%s", t.Name(), time.Now().UnixNano(), run.Add(1), name)
}

func u16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }

// Run runs the conformance suite: each test of conformance as a named
// sub-test, on one store from h.New (the Closed test opens its own).
func Run(t *testing.T, h Harness) {
	s := suite{h: h, st: h.New(t)}
	t.Cleanup(func() { _ = s.st.Close() })
	for _, c := range conformance {
		t.Run(c.name, func(t *testing.T) { c.test(t, s) })
	}
}

// suite is what each conformance test gets: the harness and the store the
// tests share (each test uses partition keys of its own, from pk).
type suite struct {
	h  Harness
	st storage.Storage
}

// conformance lists the suite's tests, in the order Run runs them.
var conformance = []struct {
	name string
	test func(t *testing.T, s suite)
}{
	{"RoundTrip", testRoundTrip},
	{"Missing", testMissing},
	{"BinaryKeys", testBinaryKeys},
	{"Batches", testBatches},
	{"RangeAndPaging", testRangeAndPaging},
	{"RangeBounds", testRangeBounds},
	{"ReadPartitions", testReadPartitions},
	{"PartitionPrefixes", testPartitionPrefixes},
	{"MissingEverywhere", testMissingEverywhere},
	{"LargeRowsAndBatches", testLargeRowsAndBatches},
	{"ReadCallbackMayCallTheStore", testReadCallbackMayCallTheStore},
	{"Conditional", testConditional},
	{"ApplyBatchIf", testApplyBatchIf},
	{"ApplyBatchesIf", testApplyBatchesIf},
	{"Versions", testVersions},
	{"LWTRace", testLWTRace},
	{"TTL", testTTL},
	{"Cancelled", testCancelled},
	{"ReadCancelledMidway", testReadCancelledMidway},
	{"Closed", testClosed},
}

// testRoundTrip: Put then Get returns the value; Put overwrites; an empty
// value is a value.
func testRoundTrip(t *testing.T, s suite) {
	st, ctx := s.st, context.Background()
	p := pk(t, "p")
	require.NoError(t, st.Put(ctx, p, []byte("c"), []byte("v1")))
	v, ok, err := st.Get(ctx, p, []byte("c"))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, []byte("v1"), v)
	require.NoError(t, st.Put(ctx, p, []byte("c"), []byte("v2")))
	v, _, _ = st.Get(ctx, p, []byte("c"))
	assert.Equal(t, []byte("v2"), v, "Put overwrites")
	require.NoError(t, st.Put(ctx, p, []byte("empty"), []byte{}))
	v, ok, err = st.Get(ctx, p, []byte("empty"))
	require.NoError(t, err)
	assert.True(t, ok, "an empty value is a value")
	assert.Empty(t, v)
}

// testMissing: Get, QueryTTL and Read of rows never written find nothing.
func testMissing(t *testing.T, s suite) {
	st, ctx := s.st, context.Background()
	p := pk(t, "p")
	v, ok, err := st.Get(ctx, p, []byte("nope"))
	require.NoError(t, err)
	assert.False(t, ok)
	assert.Nil(t, v)
	_, ok, err = st.QueryTTL(ctx, p, []byte("nope"))
	require.NoError(t, err)
	assert.False(t, ok)
	n := 0
	require.NoError(t, st.Read(ctx, p, nil, nil, func(_, _ []byte) error { n++; return nil }))
	assert.Zero(t, n)
}

// testBinaryKeys: clustering keys with zero and 0xff bytes round-trip and
// read in byte order.
func testBinaryKeys(t *testing.T, s suite) {
	st, ctx := s.st, context.Background()
	p := append(pk(t, "p"), 0, 0, 0xff, 0)
	keys := [][]byte{{0}, {0, 0}, {0, 1}, {1}, {0xff, 0}}
	for i, k := range keys {
		require.NoError(t, st.Put(ctx, p, k, []byte{byte(i), 0}))
	}
	var got [][]byte
	require.NoError(t, st.Read(ctx, p, nil, nil, func(c, v []byte) error {
		got = append(got, bytes.Clone(c))
		return nil
	}))
	assert.Equal(t, keys, got, "clustering keys in byte order")
	for i, k := range keys {
		v, ok, err := st.Get(ctx, p, k)
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, []byte{byte(i), 0}, v)
	}
}

// testBatches: PutBatch across partitions; GetBatch reads one partition's
// rows, repeated keys too.
func testBatches(t *testing.T, s suite) {
	st, ctx := s.st, context.Background()
	require.NoError(t, st.PutBatch(ctx, nil), "empty batch")
	var rows []storage.Row
	var pkeys [][]byte
	for i := range 50 {
		pkeys = append(pkeys, pk(t, fmt.Sprint(i)))
	}
	for i := range 1200 {
		rows = append(rows, storage.Row{PKey: pkeys[i%50], CCols: u16(uint16(i)), Value: []byte(fmt.Sprint(i))})
	}
	require.NoError(t, st.PutBatch(ctx, rows))
	items := []storage.GetItem{{CCols: u16(0)}, {CCols: u16(50)}, {CCols: u16(1)}, {CCols: u16(0)}}
	require.NoError(t, st.GetBatch(ctx, pkeys[0], items))
	assert.True(t, items[0].Ok)
	assert.Equal(t, []byte("0"), items[0].Value)
	assert.Equal(t, []byte("50"), items[1].Value)
	assert.False(t, items[2].Ok, "row 1 is in another partition")
	assert.Equal(t, []byte("0"), items[3].Value, "repeated keys")
	n := 0
	for _, p := range pkeys {
		require.NoError(t, st.Read(ctx, p, nil, nil, func(_, _ []byte) error { n++; return nil }))
	}
	assert.Equal(t, 1200, n)
}

// testRangeAndPaging: Read of 5,000 rows in order, [from, to) ranges, and a
// callback error stopping it.
func testRangeAndPaging(t *testing.T, s suite) {
	st, ctx := s.st, context.Background()
	p := pk(t, "p")
	const rows = 5000
	batch := make([]storage.Row, 0, rows)
	for i := range rows {
		batch = append(batch, storage.Row{PKey: p, CCols: u16(uint16(i)), Value: u16(uint16(i))})
	}
	require.NoError(t, st.PutBatch(ctx, batch))
	count := func(from, to []byte) (n int, first, last uint16) {
		require.NoError(t, st.Read(ctx, p, from, to, func(c, v []byte) error {
			i := binary.BigEndian.Uint16(c)
			require.Equal(t, c, v)
			if n > 0 {
				require.Equal(t, last+1, i, "ascending without gaps")
			} else {
				first = i
			}
			last = i
			n++
			return nil
		}))
		return
	}
	n, first, last := count(nil, nil)
	assert.Equal(t, rows, n)
	assert.Equal(t, uint16(0), first)
	assert.Equal(t, uint16(rows-1), last)
	n, first, last = count(u16(100), u16(4200))
	assert.Equal(t, 4100, n, "[from, to)")
	assert.Equal(t, uint16(100), first)
	assert.Equal(t, uint16(4199), last)
	n, first, _ = count(u16(4990), nil)
	assert.Equal(t, 10, n)
	assert.Equal(t, uint16(4990), first)
	n, _, last = count(nil, u16(3))
	assert.Equal(t, 3, n)
	assert.Equal(t, uint16(2), last)

	stop := errors.New("stop")
	seen := 0
	err := st.Read(ctx, p, nil, nil, func(_, _ []byte) error {
		if seen++; seen == 1500 {
			return stop
		}
		return nil
	})
	assert.ErrorIs(t, err, stop, "a callback error is returned as is")
	assert.Equal(t, 1500, seen)
}

// testRangeBounds: Read's bounds between, beyond and longer than the stored
// keys.
func testRangeBounds(t *testing.T, s suite) {
	st, ctx := s.st, context.Background()
	p := pk(t, "p")
	var batch []storage.Row
	for i := uint16(0); i < 20; i += 2 {
		batch = append(batch, storage.Row{PKey: p, CCols: u16(i), Value: u16(i)})
	}
	require.NoError(t, st.PutBatch(ctx, batch))
	keys := func(from, to []byte) []uint16 {
		var out []uint16
		require.NoError(t, st.Read(ctx, p, from, to, func(c, _ []byte) error {
			out = append(out, binary.BigEndian.Uint16(c))
			return nil
		}))
		return out
	}
	assert.Equal(t, []uint16{2, 4}, keys(u16(1), u16(5)), "bounds between stored keys")
	assert.Equal(t, []uint16{4}, keys(u16(4), u16(6)), "from is inclusive, to exclusive")
	assert.Equal(t, []uint16{4, 6}, keys(append(u16(2), 0), append(u16(6), 0)), "bounds longer than the keys")
	assert.Empty(t, keys(u16(4), u16(4)), "from == to")
	assert.Empty(t, keys(u16(8), u16(4)), "from > to")
	assert.Empty(t, keys(u16(19), nil), "from past the last key")
	assert.Empty(t, keys(nil, u16(0)), "to at the first key")
	assert.Equal(t, []uint16{0, 2}, keys([]byte{}, u16(3)), "an empty from is the lowest bound")
}

// testReadPartitions: ReadPartitions gives each partition's rows in the
// bounds, together and in clustering order, each once (a repeated key is
// read once, a missing one gives nothing), pages through a partition
// larger than a page among small ones, stops at a callback error, reads
// nothing for no keys, and refuses an empty key or more than
// storage.MaxReadPartitions.
func testReadPartitions(t *testing.T, s suite) {
	st, ctx := s.st, context.Background()
	base := pk(t, "p")
	var keys [][]byte
	var batch []storage.Row
	want := map[string][]uint16{}
	for j := range 60 {
		p := fmt.Appendf(bytes.Clone(base), "%d", j) // "…1" is a prefix of "…10"
		keys = append(keys, p)
		for i := range uint16(j % 5) {
			batch = append(batch, storage.Row{PKey: p, CCols: u16(i), Value: append(bytes.Clone(p), u16(i)...)})
			want[string(p)] = append(want[string(p)], i)
		}
	}
	big := pk(t, "big")
	const bigRows = 5000
	for i := range uint16(bigRows) {
		batch = append(batch, storage.Row{PKey: big, CCols: u16(i), Value: append(bytes.Clone(big), u16(i)...)})
		want[string(big)] = append(want[string(big)], i)
	}
	require.NoError(t, st.PutBatch(ctx, batch))

	read := func(keys [][]byte, from, to []byte) map[string][]uint16 {
		got := map[string][]uint16{}
		var last []byte
		require.NoError(t, st.ReadPartitions(ctx, keys, from, to, func(p, c, v []byte) error {
			if !bytes.Equal(p, last) {
				require.NotContains(t, got, string(p), "a partition's rows come together, once")
				last = bytes.Clone(p)
			}
			require.Equal(t, append(bytes.Clone(p), c...), v, "the row's own partition key")
			i := binary.BigEndian.Uint16(c)
			if n := len(got[string(p)]); n > 0 {
				require.Greater(t, i, got[string(p)][n-1], "ascending within a partition")
			}
			got[string(p)] = append(got[string(p)], i)
			return nil
		}))
		return got
	}
	asked := append(slices.Clone(keys), pk(t, "missing1"), keys[3], pk(t, "missing2"), keys[3], big, keys[59])
	assert.Equal(t, want, read(asked, nil, nil), "every row of every partition asked, each once")
	inBounds := map[string][]uint16{}
	for p, rows := range want {
		for _, i := range rows {
			if i >= 1 && i < 3 {
				inBounds[p] = append(inBounds[p], i)
			}
		}
	}
	assert.Equal(t, inBounds, read(asked, u16(1), u16(3)), "[from, to) in every partition")
	assert.Empty(t, read(nil, nil, nil), "no keys")
	assert.Empty(t, read([][]byte{pk(t, "missing3")}, nil, nil), "a missing partition")

	stop := errors.New("stop")
	seen := 0
	err := st.ReadPartitions(ctx, [][]byte{big, keys[4]}, nil, nil, func(_, _, _ []byte) error {
		if seen++; seen == 1500 {
			return stop
		}
		return nil
	})
	assert.ErrorIs(t, err, stop, "a callback error is returned as is")
	assert.Equal(t, 1500, seen)

	tooMany := make([][]byte, storage.MaxReadPartitions+1)
	for i := range tooMany {
		tooMany[i] = pk(t, fmt.Sprintf("none%d", i))
	}
	called := false
	cb := func(_, _, _ []byte) error { called = true; return nil }
	assert.ErrorIs(t, st.ReadPartitions(ctx, tooMany, nil, nil, cb), storage.ErrInvalidArgument, "more than MaxReadPartitions")
	assert.NoError(t, st.ReadPartitions(ctx, tooMany[:storage.MaxReadPartitions], nil, nil, cb), "MaxReadPartitions")
	assert.ErrorIs(t, st.ReadPartitions(ctx, [][]byte{keys[4], {}}, nil, nil, cb), storage.ErrInvalidArgument, "an empty key")
	assert.False(t, called, "a refused call reads nothing")
}

// testPartitionPrefixes: partition keys that are prefixes of each other
// never see each other's rows.
func testPartitionPrefixes(t *testing.T, s suite) {
	st, ctx := s.st, context.Background()
	base := pk(t, "p")
	pkeys := [][]byte{
		base,
		append(bytes.Clone(base), 0),
		append(bytes.Clone(base), 0, 0),
		append(bytes.Clone(base), 0, 1),
		append(bytes.Clone(base), 1),
		append(bytes.Clone(base), 0xff),
		base[:len(base)-1],
	}
	var rows []storage.Row
	for i, p := range pkeys {
		// Clustering keys that spell the tail of a longer partition key.
		for _, c := range [][]byte{{0}, {0, 0}, {0, 1}, {1}, {0xff, 0}} {
			rows = append(rows, storage.Row{PKey: p, CCols: c, Value: []byte{byte(i)}})
		}
	}
	require.NoError(t, st.PutBatch(ctx, rows))
	for i, p := range pkeys {
		n := 0
		require.NoError(t, st.Read(ctx, p, nil, nil, func(_, v []byte) error {
			n++
			assert.Equal(t, []byte{byte(i)}, v, "partition %d: a row of another partition", i)
			return nil
		}))
		assert.Equal(t, 5, n, "partition %d", i)
		items := []storage.GetItem{{CCols: []byte{0}}, {CCols: []byte{0xff, 0}}, {CCols: []byte{0, 0, 0}}}
		require.NoError(t, st.GetBatch(ctx, p, items))
		assert.Equal(t, []byte{byte(i)}, items[0].Value, "partition %d", i)
		assert.Equal(t, []byte{byte(i)}, items[1].Value, "partition %d", i)
		assert.False(t, items[2].Ok, "partition %d", i)
	}
}

// testMissingEverywhere: every call on missing rows: GetBatch resets its
// items, conditional writes fail and write nothing.
func testMissingEverywhere(t *testing.T, s suite) {
	st, ctx := s.st, context.Background()
	p := pk(t, "p")
	require.NoError(t, st.GetBatch(ctx, p, nil), "an empty GetBatch")
	items := []storage.GetItem{{CCols: []byte("a"), Ok: true, Value: []byte("stale")}, {CCols: []byte("b")}}
	require.NoError(t, st.GetBatch(ctx, p, items))
	assert.False(t, items[0].Ok, "GetBatch resets Ok")
	assert.Nil(t, items[0].Value, "GetBatch resets Value")
	assert.False(t, items[1].Ok)
	ok, err := st.CompareAndDelete(ctx, p, []byte("a"), nil)
	require.NoError(t, err)
	assert.False(t, ok, "CompareAndDelete on a missing row")
	ok, err = st.CompareAndSwap(ctx, p, []byte("a"), nil, []byte("x"), 0)
	require.NoError(t, err)
	assert.False(t, ok, "CompareAndSwap(nil) on a missing row")
	ok, err = st.ApplyBatchIf(ctx, p, []storage.Condition{{CCols: []byte("a"), Expected: []byte{}}}, []storage.Row{{PKey: p, CCols: []byte("a")}})
	require.NoError(t, err)
	assert.False(t, ok, "an expected value on a missing row fails")
	_, ok, _ = st.Get(ctx, p, []byte("a"))
	assert.False(t, ok, "nothing was written")
}

// testLargeRowsAndBatches: a 1 MiB value with a 1 KiB clustering key, and
// batches of 3,000 rows.
func testLargeRowsAndBatches(t *testing.T, s suite) {
	st, ctx := s.st, context.Background()
	p := pk(t, "p")
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	longC := bytes.Repeat([]byte{0, 0xff}, 512)
	require.NoError(t, st.Put(ctx, p, longC, big))
	v, ok, err := st.Get(ctx, p, longC)
	require.NoError(t, err)
	require.True(t, ok)
	assert.True(t, bytes.Equal(big, v), "a 1 MiB value round-trips")
	n := 0
	require.NoError(t, st.Read(ctx, p, nil, nil, func(c, v []byte) error {
		n++
		assert.Equal(t, longC, c)
		assert.Len(t, v, len(big))
		return nil
	}))
	assert.Equal(t, 1, n)

	q := pk(t, "q")
	const many = 3000
	rows := make([]storage.Row, many)
	items := make([]storage.GetItem, 0, many+many/10)
	for i := range rows {
		rows[i] = storage.Row{PKey: q, CCols: u16(uint16(2 * i)), Value: u16(uint16(i))}
		items = append(items, storage.GetItem{CCols: u16(uint16(2 * i))})
		if i%10 == 0 {
			items = append(items, storage.GetItem{CCols: u16(uint16(2*i + 1))})
		}
	}
	require.NoError(t, st.PutBatch(ctx, rows))
	require.NoError(t, st.GetBatch(ctx, q, items))
	for _, it := range items {
		i := binary.BigEndian.Uint16(it.CCols)
		if i%2 == 1 {
			assert.False(t, it.Ok, "missing key %d", i)
			continue
		}
		if assert.True(t, it.Ok, "key %d", i) {
			assert.Equal(t, u16(i/2), it.Value)
		}
	}
}

// testReadCallbackMayCallTheStore: Read's callback may write and read the
// store.
func testReadCallbackMayCallTheStore(t *testing.T, s suite) {
	st, ctx := s.st, context.Background()
	p, q := pk(t, "p"), pk(t, "q")
	const rows = 2500
	batch := make([]storage.Row, rows)
	for i := range batch {
		batch[i] = storage.Row{PKey: p, CCols: u16(uint16(i)), Value: []byte{1}}
	}
	require.NoError(t, st.PutBatch(ctx, batch))
	n := 0
	require.NoError(t, st.Read(ctx, p, nil, nil, func(c, v []byte) error {
		n++
		if n%100 != 1 {
			return nil
		}
		if err := st.Put(ctx, q, c, v); err != nil {
			return err
		}
		_, ok, err := st.Get(ctx, p, c)
		if err == nil && !ok {
			err = errors.New("a row being read is missing")
		}
		return err
	}))
	assert.Equal(t, rows, n)
	m := 0
	require.NoError(t, st.Read(ctx, q, nil, nil, func(_, _ []byte) error { m++; return nil }))
	assert.Equal(t, rows/100, m)
}

// testConditional: InsertIfNotExists, CompareAndSwap and CompareAndDelete,
// one caller.
func testConditional(t *testing.T, s suite) {
	st, ctx := s.st, context.Background()
	p, c := pk(t, "p"), []byte("c")
	ok, err := st.InsertIfNotExists(ctx, p, c, []byte("a"), 0)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = st.InsertIfNotExists(ctx, p, c, []byte("b"), 0)
	require.NoError(t, err)
	require.False(t, ok, "exists")
	v, _, _ := st.Get(ctx, p, c)
	assert.Equal(t, []byte("a"), v, "a failed insert changes nothing")

	ok, err = st.CompareAndSwap(ctx, p, c, []byte("x"), []byte("b"), 0)
	require.NoError(t, err)
	require.False(t, ok, "expected value mismatch")
	ok, err = st.CompareAndSwap(ctx, p, c, []byte("a"), []byte("b"), 0)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = st.CompareAndSwap(ctx, p, []byte("missing"), []byte("a"), []byte("b"), 0)
	require.NoError(t, err)
	require.False(t, ok, "CAS on a missing row")

	ok, err = st.CompareAndDelete(ctx, p, c, []byte("a"))
	require.NoError(t, err)
	require.False(t, ok)
	ok, err = st.CompareAndDelete(ctx, p, c, []byte("b"))
	require.NoError(t, err)
	require.True(t, ok)
	_, ok, _ = st.Get(ctx, p, c)
	require.False(t, ok, "deleted")
	ok, err = st.InsertIfNotExists(ctx, p, c, []byte("again"), 0)
	require.NoError(t, err)
	require.True(t, ok, "insert after delete")
}

// testApplyBatchIf: ApplyBatchIf is all or nothing; existence and value
// conditions.
func testApplyBatchIf(t *testing.T, s suite) {
	st, ctx := s.st, context.Background()
	p := pk(t, "p")
	rows := []storage.Row{{PKey: p, CCols: []byte("e1"), Value: []byte("1")}, {PKey: p, CCols: []byte("e2"), Value: []byte("2")}}
	ok, err := st.ApplyBatchIf(ctx, p, []storage.Condition{{CCols: []byte("e1")}, {CCols: []byte("e2")}}, rows)
	require.NoError(t, err)
	require.True(t, ok)
	rows2 := []storage.Row{{PKey: p, CCols: []byte("e2"), Value: []byte("X")}, {PKey: p, CCols: []byte("e3"), Value: []byte("3")}}
	ok, err = st.ApplyBatchIf(ctx, p, []storage.Condition{{CCols: []byte("e2")}, {CCols: []byte("e3")}}, rows2)
	require.NoError(t, err)
	require.False(t, ok, "e2 exists")
	v, _, _ := st.Get(ctx, p, []byte("e2"))
	assert.Equal(t, []byte("2"), v, "all or nothing")
	_, ok, _ = st.Get(ctx, p, []byte("e3"))
	assert.False(t, ok, "all or nothing")
	require.NoError(t, st.Put(ctx, p, []byte("fence"), []byte{7}))
	ok, err = st.ApplyBatchIf(ctx, p, []storage.Condition{{CCols: []byte("fence"), Expected: []byte{7}}, {CCols: []byte("e3")}}, rows2[1:])
	require.NoError(t, err)
	require.True(t, ok, "value condition holds")
	ok, err = st.ApplyBatchIf(ctx, p, []storage.Condition{{CCols: []byte("fence"), Expected: []byte{6}}}, []storage.Row{{PKey: p, CCols: []byte("e4"), Value: nil}})
	require.NoError(t, err)
	require.False(t, ok, "value condition fails")
}

// testApplyBatchesIf: a storage.MultiApplier's ApplyBatchesIf: batches
// judged in order, Requires, invalid calls and a cancelled one write nothing
// (skipped for a driver that is not one).
func testApplyBatchesIf(t *testing.T, s suite) {
	st, ctx := s.st, context.Background()
	ma, ok := storage.AsMultiApplier(st)
	if !ok {
		t.Skip("the driver is not a storage.MultiApplier")
	}
	ev, rec := pk(t, "events"), pk(t, "records")
	require.NoError(t, st.Put(ctx, ev, []byte("e2"), []byte("old")))
	row := func(p []byte, cc, v string) storage.Row {
		return storage.Row{PKey: p, CCols: []byte(cc), Value: []byte(v)}
	}
	batches := []storage.CondBatch{
		{PKey: ev, Conds: []storage.Condition{{CCols: []byte("e1")}}, Rows: []storage.Row{row(ev, "e1", "1")}},
		{PKey: rec, Conds: []storage.Condition{{CCols: []byte("r1")}}, Rows: []storage.Row{row(rec, "r1", "1")}, Requires: []int{0}},
		// Refused: e2 exists; its dependant is skipped, not its
		// neighbours.
		{PKey: ev, Conds: []storage.Condition{{CCols: []byte("e2")}}, Rows: []storage.Row{row(ev, "e2", "2")}},
		{PKey: rec, Conds: []storage.Condition{{CCols: []byte("r2")}}, Rows: []storage.Row{row(rec, "r2", "2")}, Requires: []int{2}},
		// Judged after the batches before it: r1 now exists.
		{PKey: rec, Conds: []storage.Condition{{CCols: []byte("r1")}}, Rows: []storage.Row{row(rec, "r1", "X")}},
		// No conditions: always applied; a value condition.
		{PKey: rec, Rows: []storage.Row{row(rec, "r3", "3")}},
		{PKey: ev, Conds: []storage.Condition{{CCols: []byte("e1"), Expected: []byte("1")}}, Rows: []storage.Row{row(ev, "e3", "3")}, Requires: []int{0, 5}},
	}
	applied := make([]bool, len(batches))
	require.NoError(t, ma.ApplyBatchesIf(ctx, batches, applied))
	assert.Equal(t, []bool{true, true, false, false, false, true, true}, applied)
	want := map[string]map[string]string{
		string(ev):  {"e1": "1", "e2": "old", "e3": "3"},
		string(rec): {"r1": "1", "r3": "3"},
	}
	for p, rows := range want {
		got := map[string]string{}
		require.NoError(t, st.Read(ctx, []byte(p), nil, nil, func(cc, v []byte) error { got[string(cc)] = string(v); return nil }))
		assert.Equal(t, rows, got)
	}

	for name, bad := range map[string][]storage.CondBatch{
		"requires itself":    {{PKey: ev, Requires: []int{0}}},
		"requires later":     {{PKey: ev, Requires: []int{1}}, {PKey: ev}},
		"empty partition":    {{Rows: []storage.Row{row(nil, "x", "")}}},
		"row elsewhere":      {{PKey: ev, Rows: []storage.Row{row(rec, "r9", "9")}}},
		"after a good batch": {{PKey: ev, Rows: []storage.Row{row(ev, "e9", "9")}}, {PKey: ev, Requires: []int{-1}}},
	} {
		applied := make([]bool, len(bad))
		err := ma.ApplyBatchesIf(ctx, bad, applied)
		assert.ErrorIs(t, err, storage.ErrInvalidArgument, name)
		assert.NotContains(t, applied, true, name)
	}
	_, ok, err := st.Get(ctx, ev, []byte("e9"))
	require.NoError(t, err)
	assert.False(t, ok, "an invalid call writes nothing")
	assert.ErrorIs(t, ma.ApplyBatchesIf(ctx, batches, nil), storage.ErrInvalidArgument, "applied of another length")

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	assert.ErrorIs(t, ma.ApplyBatchesIf(cctx, []storage.CondBatch{{PKey: ev, Rows: []storage.Row{row(ev, "e8", "8")}}}, make([]bool, 1)), context.Canceled)
	_, ok, err = st.Get(ctx, ev, []byte("e8"))
	require.NoError(t, err)
	assert.False(t, ok, "a cancelled call writes nothing")
}

// testVersions: of the unconditional writes of a row, the highest
// Version stays whatever the order of the calls; an unversioned write
// never replaces a versioned row; versions are refused above MaxVersion
// and in batches with conditions.
func testVersions(t *testing.T, s suite) {
	st, ctx := s.st, context.Background()
	p, q := pk(t, "versions"), pk(t, "other")
	put := func(cc string, v string, version uint64) {
		t.Helper()
		require.NoError(t, st.PutBatch(ctx, []storage.Row{{PKey: p, CCols: []byte(cc), Value: []byte(v), Version: version}}))
	}
	get := func(cc string) string {
		t.Helper()
		v, ok, err := st.Get(ctx, p, []byte(cc))
		require.NoError(t, err)
		require.True(t, ok, cc)
		return string(v)
	}
	put("a", "v5", 5)
	put("a", "v3", 3) // a late write of an earlier version
	assert.Equal(t, "v5", get("a"), "a lower version arriving later changes nothing")
	put("a", "v7", 7)
	assert.Equal(t, "v7", get("a"))
	require.NoError(t, st.Put(ctx, p, []byte("a"), []byte("unversioned")))
	assert.Equal(t, "v7", get("a"), "an unversioned write orders below every versioned one")
	put("a", "max", storage.MaxVersion)
	assert.Equal(t, "max", get("a"))

	require.NoError(t, st.Put(ctx, p, []byte("b"), []byte("plain")))
	put("b", "v1", 1)
	assert.Equal(t, "v1", get("b"), "a versioned write replaces an unversioned row")

	// One call, rows of two partitions, each ordered on its own.
	require.NoError(t, st.PutBatch(ctx, []storage.Row{
		{PKey: p, CCols: []byte("c"), Value: []byte("c9"), Version: 9},
		{PKey: q, CCols: []byte("c"), Value: []byte("q9"), Version: 9},
	}))
	require.NoError(t, st.PutBatch(ctx, []storage.Row{
		{PKey: p, CCols: []byte("c"), Value: []byte("c8"), Version: 8},
		{PKey: q, CCols: []byte("c"), Value: []byte("q10"), Version: 10},
	}))
	assert.Equal(t, "c9", get("c"))
	v, _, err := st.Get(ctx, q, []byte("c"))
	require.NoError(t, err)
	assert.Equal(t, "q10", string(v))

	err = st.PutBatch(ctx, []storage.Row{{PKey: p, CCols: []byte("d"), Value: []byte("x"), Version: storage.MaxVersion + 1}})
	assert.ErrorIs(t, err, storage.ErrInvalidArgument, "a version above MaxVersion")
	_, err = st.ApplyBatchIf(ctx, p, []storage.Condition{{CCols: []byte("e")}}, []storage.Row{{PKey: p, CCols: []byte("e"), Value: []byte("x"), Version: 1}})
	assert.ErrorIs(t, err, storage.ErrInvalidArgument, "a versioned row in a batch with conditions")
	ok, err := st.ApplyBatchIf(ctx, p, nil, []storage.Row{{PKey: p, CCols: []byte("a"), Value: []byte("late"), Version: 6}})
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "max", get("a"), "a batch without conditions honours versions")
	if ma, ok := storage.AsMultiApplier(st); ok {
		applied := make([]bool, 1)
		require.NoError(t, ma.ApplyBatchesIf(ctx, []storage.CondBatch{{PKey: p, Rows: []storage.Row{{PKey: p, CCols: []byte("c"), Value: []byte("c1"), Version: 1}}}}, applied))
		assert.Equal(t, "c9", get("c"), "ApplyBatchesIf honours versions")
	}
}

// testLWTRace: racing conditional writes: one winner, whose write the store
// holds.
func testLWTRace(t *testing.T, s suite) {
	st, ctx := s.st, context.Background()
	const racers, rounds = 8, 20
	for round := range rounds {
		p, c := pk(t, fmt.Sprint(round)), []byte("k")
		res := race(racers, func(r int) (bool, error) {
			return st.InsertIfNotExists(ctx, p, c, []byte{byte(r)}, 0)
		})
		cur, _, err := st.Get(ctx, p, c)
		require.NoError(t, err)
		res.requireOneWinner(t, fmt.Sprintf("round %d: InsertIfNotExists", round), int(cur[0]))

		res = race(racers, func(r int) (bool, error) {
			return st.CompareAndSwap(ctx, p, c, cur, []byte{byte(r), 1}, 0)
		})
		cur, _, err = st.Get(ctx, p, c)
		require.NoError(t, err)
		res.requireOneWinner(t, fmt.Sprintf("round %d: CompareAndSwap", round), int(cur[0]))

		res = race(racers, func(int) (bool, error) {
			return st.CompareAndDelete(ctx, p, c, cur)
		})
		_, ok, err := st.Get(ctx, p, c)
		require.NoError(t, err)
		require.False(t, ok, "round %d: deleted", round)
		res.requireOneWinner(t, fmt.Sprintf("round %d: CompareAndDelete", round), -1)

		// Each racer claims the fence and writes rows of its own: one
		// racer's rows, and only those, must exist.
		res = race(racers, func(r int) (bool, error) {
			rows := []storage.Row{{PKey: p, CCols: []byte("fence"), Value: []byte{byte(r)}}}
			for i := range 3 {
				rows = append(rows, storage.Row{PKey: p, CCols: []byte{'r', byte(r), byte(i)}, Value: []byte{byte(r)}})
			}
			return st.ApplyBatchIf(ctx, p, []storage.Condition{{CCols: []byte("fence")}}, rows)
		})
		fence, ok, err := st.Get(ctx, p, []byte("fence"))
		require.NoError(t, err)
		require.True(t, ok)
		res.requireOneWinner(t, fmt.Sprintf("round %d: ApplyBatchIf", round), int(fence[0]))
		n := 0
		require.NoError(t, st.Read(ctx, p, []byte("r"), []byte("s"), func(c, v []byte) error {
			n++
			assert.Equal(t, fence, v, "round %d: row %x of a losing batch", round, c)
			return nil
		}))
		require.Equal(t, 3, n, "round %d: the winner's rows", round)
	}
}

// testTTL: rows with a TTL expire for every call; renewals; invalid TTLs are
// refused.
func testTTL(t *testing.T, s suite) {
	st, ctx := s.st, context.Background()
	h := s.h
	p := pk(t, "p")
	insert := func(c string, ttl time.Duration) {
		t.Helper()
		ok, err := st.InsertIfNotExists(ctx, p, []byte(c), []byte("me"), ttl)
		require.NoError(t, err)
		require.True(t, ok, c)
	}
	insert("lease", 2*time.Second)
	ttl, ok, err := st.QueryTTL(ctx, p, []byte("lease"))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Greater(t, ttl, time.Duration(0))
	assert.LessOrEqual(t, ttl, 2*time.Second)
	require.NoError(t, st.Put(ctx, p, []byte("plain"), []byte("x")))
	ttl, ok, err = st.QueryTTL(ctx, p, []byte("plain"))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Zero(t, ttl, "no expiry")
	ok, err = st.CompareAndSwap(ctx, p, []byte("lease"), []byte("me"), []byte("me"), 2*time.Second)
	require.NoError(t, err)
	require.True(t, ok, "renewal")
	insert("renewed", 2*time.Second)
	ok, err = st.CompareAndSwap(ctx, p, []byte("renewed"), []byte("me"), []byte("me"), 10*time.Second)
	require.NoError(t, err)
	require.True(t, ok, "renewal with a longer TTL")
	insert("overwritten", 2*time.Second)
	require.NoError(t, st.Put(ctx, p, []byte("overwritten"), []byte("x")), "a Put writes a row without TTL")
	for _, c := range []string{"cad", "cond-nil", "cond-val"} {
		insert(c, 2*time.Second)
	}

	h.Advance(t, 3*time.Second)
	_, ok, err = st.Get(ctx, p, []byte("lease"))
	require.NoError(t, err)
	assert.False(t, ok, "expired")
	items := []storage.GetItem{{CCols: []byte("lease")}, {CCols: []byte("plain")}, {CCols: []byte("renewed")}, {CCols: []byte("cad")}}
	require.NoError(t, st.GetBatch(ctx, p, items))
	assert.Equal(t, []bool{false, true, true, false}, []bool{items[0].Ok, items[1].Ok, items[2].Ok, items[3].Ok}, "GetBatch")
	_, ok, err = st.QueryTTL(ctx, p, []byte("lease"))
	require.NoError(t, err)
	assert.False(t, ok, "QueryTTL of an expired row")
	ttl, ok, err = st.QueryTTL(ctx, p, []byte("renewed"))
	require.NoError(t, err)
	assert.True(t, ok, "the renewed row lives")
	assert.Greater(t, ttl, time.Duration(0))
	assert.LessOrEqual(t, ttl, 7*time.Second)
	ttl, ok, err = st.QueryTTL(ctx, p, []byte("overwritten"))
	require.NoError(t, err)
	assert.True(t, ok, "the overwritten row lives")
	assert.Zero(t, ttl)
	var live []string
	require.NoError(t, st.Read(ctx, p, nil, nil, func(c, _ []byte) error { live = append(live, string(c)); return nil }))
	assert.Equal(t, []string{"overwritten", "plain", "renewed"}, live, "expired rows are absent from reads")

	ok, err = st.CompareAndSwap(ctx, p, []byte("lease"), []byte("me"), []byte("me"), time.Second)
	require.NoError(t, err)
	assert.False(t, ok, "no CAS on an expired row")
	ok, err = st.CompareAndDelete(ctx, p, []byte("cad"), []byte("me"))
	require.NoError(t, err)
	assert.False(t, ok, "no CompareAndDelete of an expired row")
	ok, err = st.ApplyBatchIf(ctx, p, []storage.Condition{{CCols: []byte("cond-val"), Expected: []byte("me")}}, []storage.Row{{PKey: p, CCols: []byte("cond-val"), Value: []byte("new")}})
	require.NoError(t, err)
	assert.False(t, ok, "an expected value on an expired row fails")
	ok, err = st.ApplyBatchIf(ctx, p, []storage.Condition{{CCols: []byte("cond-nil")}}, []storage.Row{{PKey: p, CCols: []byte("cond-nil"), Value: []byte("new")}})
	require.NoError(t, err)
	assert.True(t, ok, "an expired row does not exist for ApplyBatchIf")
	v, ok, err := st.Get(ctx, p, []byte("cond-nil"))
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, []byte("new"), v)
	// The new row's TTL must outlive the Get below: CQL counts a TTL from
	// the write's whole second, so a row written with a TTL of 1 s may
	// expire at once (see storage.Storage).
	ok, err = st.InsertIfNotExists(ctx, p, []byte("lease"), []byte("you"), 10*time.Second)
	require.NoError(t, err)
	assert.True(t, ok, "an expired row does not exist")
	v, _, err = st.Get(ctx, p, []byte("lease"))
	require.NoError(t, err)
	assert.Equal(t, []byte("you"), v)

	for _, bad := range []time.Duration{-time.Second, 1500 * time.Millisecond, storage.MaxTTL + time.Second} {
		_, err := st.InsertIfNotExists(ctx, p, []byte("bad"), nil, bad)
		assert.ErrorIs(t, err, storage.ErrInvalidArgument, "InsertIfNotExists ttl %v", bad)
		_, err = st.CompareAndSwap(ctx, p, []byte("plain"), []byte("x"), []byte("y"), bad)
		assert.ErrorIs(t, err, storage.ErrInvalidArgument, "CompareAndSwap ttl %v", bad)
	}
	_, ok, _ = st.Get(ctx, p, []byte("bad"))
	assert.False(t, ok, "a rejected TTL writes nothing")
	v, _, _ = st.Get(ctx, p, []byte("plain"))
	assert.Equal(t, []byte("x"), v, "a rejected TTL writes nothing")
}

// testCancelled: every call with a cancelled or expired context fails with
// its error and writes nothing.
func testCancelled(t *testing.T, s suite) {
	st, ctx := s.st, context.Background()
	p, c := pk(t, "p"), []byte("c")
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	calls := map[string]error{}
	_, _, calls["Get"] = st.Get(cctx, p, c)
	calls["GetBatch"] = st.GetBatch(cctx, p, []storage.GetItem{{CCols: c}})
	calls["Put"] = st.Put(cctx, p, c, []byte("v"))
	calls["PutBatch"] = st.PutBatch(cctx, []storage.Row{{PKey: p, CCols: c, Value: []byte("v")}})
	calls["Read"] = st.Read(cctx, p, nil, nil, func(_, _ []byte) error { return nil })
	calls["ReadPartitions"] = st.ReadPartitions(cctx, [][]byte{p}, nil, nil, func(_, _, _ []byte) error { return nil })
	_, calls["InsertIfNotExists"] = st.InsertIfNotExists(cctx, p, c, []byte("v"), 0)
	_, calls["CompareAndSwap"] = st.CompareAndSwap(cctx, p, c, nil, []byte("v"), 0)
	_, calls["CompareAndDelete"] = st.CompareAndDelete(cctx, p, c, nil)
	_, calls["ApplyBatchIf"] = st.ApplyBatchIf(cctx, p, nil, []storage.Row{{PKey: p, CCols: c, Value: []byte("v")}})
	_, _, calls["QueryTTL"] = st.QueryTTL(cctx, p, c)
	for name, err := range calls {
		assert.ErrorIs(t, err, context.Canceled, name)
	}
	dctx, dcancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer dcancel()
	err := st.Put(dctx, p, c, []byte("v"))
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	_, ok, err := st.Get(ctx, p, c)
	require.NoError(t, err)
	assert.False(t, ok, "a cancelled call writes nothing")
}

// testReadCancelledMidway: a Read whose context is cancelled mid-way stops
// with context.Canceled.
func testReadCancelledMidway(t *testing.T, s suite) {
	st, ctx := s.st, context.Background()
	p := pk(t, "p")
	const rows = 3000
	batch := make([]storage.Row, rows)
	for i := range batch {
		batch[i] = storage.Row{PKey: p, CCols: u16(uint16(i)), Value: []byte{1}}
	}
	require.NoError(t, st.PutBatch(ctx, batch))
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	seen := 0
	err := st.Read(cctx, p, nil, nil, func(_, _ []byte) error {
		if seen++; seen == 10 {
			cancel()
		}
		return nil
	})
	assert.ErrorIs(t, err, context.Canceled)
	assert.Less(t, seen, rows, "the read stopped after the cancel")
}

// testClosed: every call on a closed store fails with storage.ErrClosed; a
// second Close returns nil or ErrClosed.
func testClosed(t *testing.T, s suite) {
	ctx := context.Background()
	h := s.h
	own := h.New(t)
	require.NoError(t, own.Close())
	p, c := pk(t, "p"), []byte("c")
	calls := map[string]error{}
	_, _, calls["Get"] = own.Get(ctx, p, c)
	calls["GetBatch"] = own.GetBatch(ctx, p, []storage.GetItem{{CCols: c}})
	calls["Put"] = own.Put(ctx, p, c, nil)
	calls["PutBatch"] = own.PutBatch(ctx, []storage.Row{{PKey: p, CCols: c}})
	calls["Read"] = own.Read(ctx, p, nil, nil, func(_, _ []byte) error { return nil })
	calls["ReadPartitions"] = own.ReadPartitions(ctx, [][]byte{p}, nil, nil, func(_, _, _ []byte) error { return nil })
	_, calls["InsertIfNotExists"] = own.InsertIfNotExists(ctx, p, c, nil, 0)
	_, calls["CompareAndSwap"] = own.CompareAndSwap(ctx, p, c, nil, nil, 0)
	_, calls["CompareAndDelete"] = own.CompareAndDelete(ctx, p, c, nil)
	_, calls["ApplyBatchIf"] = own.ApplyBatchIf(ctx, p, nil, []storage.Row{{PKey: p, CCols: c}})
	_, _, calls["QueryTTL"] = own.QueryTTL(ctx, p, c)
	if ma, ok := storage.AsMultiApplier(own); ok {
		calls["ApplyBatchesIf"] = ma.ApplyBatchesIf(ctx, []storage.CondBatch{{PKey: p}}, make([]bool, 1))
	}
	for name, err := range calls {
		assert.ErrorIs(t, err, storage.ErrClosed, name)
	}
	if err := own.Close(); err != nil {
		assert.ErrorIs(t, err, storage.ErrClosed, "a second Close returns nil or ErrClosed")
	}
}

// raceResult is what each racer of a race got.
type raceResult struct {
	won  []bool
	errs []error
}

// race runs fn for racers 0..n-1 at once and returns what each got.
func race(n int, fn func(r int) (bool, error)) raceResult {
	res := raceResult{won: make([]bool, n), errs: make([]error, n)}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res.won[r], res.errs[r] = fn(r)
		}()
	}
	close(start)
	wg.Wait()
	return res
}

// requireOneWinner checks a race of conditional writes: no error other
// than storage.ErrUnknownOutcome (a replicated cluster's Paxos contention
// can leave an outcome unknown: the contract's honest answer), at most one
// racer told it won, and the stored state is the winner's (holder: the
// racer whose write the store holds; -1 when the writes are alike): the
// racer told it won, or, when none was, one whose outcome is unknown.
func (res raceResult) requireOneWinner(t *testing.T, what string, holder int) {
	t.Helper()
	var winners, unknown []int
	for r, err := range res.errs {
		switch {
		case err == nil && res.won[r]:
			winners = append(winners, r)
		case errors.Is(err, storage.ErrUnknownOutcome):
			unknown = append(unknown, r)
		case err != nil:
			require.NoError(t, err, "%s: racer %d", what, r)
		}
	}
	require.LessOrEqual(t, len(winners), 1, "%s: winners %v", what, winners)
	switch {
	case len(winners) == 1:
		require.True(t, holder < 0 || holder == winners[0], "%s: racer %d was told it won, the store holds racer %d's write", what, winners[0], holder)
	case len(unknown) == 0:
		require.Failf(t, "no winner", "%s: no racer won and none has an unknown outcome", what)
	default:
		require.True(t, holder < 0 || slices.Contains(unknown, holder), "%s: no racer was told it won; the store holds racer %d's write, not one of the unknown outcomes %v", what, holder, unknown)
	}
	if len(unknown) > 0 {
		t.Logf("%s: %d unknown outcomes (racers %v)", what, len(unknown), unknown)
	}
}

// RunBenchmarks runs the driver benchmarks: Put, PutBatch of 500 numbers
// across 500 workspaces, Get, and Read of 4,096 clustering rows.
func RunBenchmarks(b *testing.B, h Harness) {
	st := h.New(b)
	b.Cleanup(func() { _ = st.Close() })
	ctx := context.Background()
	val := make([]byte, 8)
	b.Run("Put", func(b *testing.B) {
		p := pk(b, "p")
		i := 0
		for b.Loop() {
			if err := st.Put(ctx, p, u16(uint16(i)), val); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("PutBatch500ws", func(b *testing.B) {
		base := pk(b, "ws")
		rows := make([]storage.Row, 500)
		for i := range rows {
			rows[i] = storage.Row{PKey: binary.BigEndian.AppendUint64(bytes.Clone(base), uint64(i)), CCols: u16(1), Value: val}
		}
		for b.Loop() {
			if err := st.PutBatch(ctx, rows); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Get", func(b *testing.B) {
		p := pk(b, "p")
		if err := st.Put(ctx, p, u16(1), val); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, ok, err := st.Get(ctx, p, u16(1)); err != nil || !ok {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("Read4096", func(b *testing.B) {
		p := pk(b, "p")
		rows := make([]storage.Row, 4096)
		for i := range rows {
			rows[i] = storage.Row{PKey: p, CCols: u16(uint16(i)), Value: val}
		}
		if err := st.PutBatch(ctx, rows); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			n := 0
			if err := st.Read(ctx, p, nil, nil, func(_, _ []byte) error { n++; return nil }); err != nil || n != 4096 {
				b.Fatal(n, err)
			}
		}
	})
}
