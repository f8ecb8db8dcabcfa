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

// Run runs the conformance suite.
func Run(t *testing.T, h Harness) {
	st := h.New(t)
	t.Cleanup(func() { _ = st.Close() })
	ctx := context.Background()

	t.Run("RoundTrip", func(t *testing.T) {
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
	})

	t.Run("Missing", func(t *testing.T) {
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
	})

	t.Run("BinaryKeys", func(t *testing.T) {
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
	})

	t.Run("Batches", func(t *testing.T) {
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
	})

	t.Run("RangeAndPaging", func(t *testing.T) {
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
	})

	t.Run("Conditional", func(t *testing.T) {
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
	})

	t.Run("ApplyBatchIf", func(t *testing.T) {
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
	})

	t.Run("LWTRace", func(t *testing.T) {
		const racers, rounds = 8, 20
		for round := range rounds {
			p, c := pk(t, fmt.Sprint(round)), []byte("k")
			var wins atomic.Int32
			var wg sync.WaitGroup
			errs := make(chan error, racers)
			for r := range racers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ok, err := st.InsertIfNotExists(ctx, p, c, []byte{byte(r)}, 0)
					if err != nil {
						errs <- err
						return
					}
					if ok {
						wins.Add(1)
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			require.Equal(t, int32(1), wins.Load(), "round %d: InsertIfNotExists winners", round)
			cur, _, err := st.Get(ctx, p, c)
			require.NoError(t, err)
			wins.Store(0)
			errs = make(chan error, racers)
			for r := range racers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ok, err := st.CompareAndSwap(ctx, p, c, cur, []byte{byte(r), 1}, 0)
					if err != nil {
						errs <- err
						return
					}
					if ok {
						wins.Add(1)
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			require.Equal(t, int32(1), wins.Load(), "round %d: CompareAndSwap winners", round)
		}
	})

	t.Run("TTL", func(t *testing.T) {
		p := pk(t, "p")
		ok, err := st.InsertIfNotExists(ctx, p, []byte("lease"), []byte("me"), 2*time.Second)
		require.NoError(t, err)
		require.True(t, ok)
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

		h.Advance(t, 3*time.Second)
		_, ok, err = st.Get(ctx, p, []byte("lease"))
		require.NoError(t, err)
		assert.False(t, ok, "expired")
		n := 0
		require.NoError(t, st.Read(ctx, p, nil, nil, func(_, _ []byte) error { n++; return nil }))
		assert.Equal(t, 1, n, "an expired row is absent from reads")
		ok, err = st.CompareAndSwap(ctx, p, []byte("lease"), []byte("me"), []byte("me"), time.Second)
		require.NoError(t, err)
		assert.False(t, ok, "no CAS on an expired row")
		ok, err = st.InsertIfNotExists(ctx, p, []byte("lease"), []byte("you"), time.Second)
		require.NoError(t, err)
		assert.True(t, ok, "an expired row does not exist")

		for _, bad := range []time.Duration{-time.Second, 1500 * time.Millisecond, storage.MaxTTL + time.Second} {
			_, err := st.InsertIfNotExists(ctx, p, []byte("bad"), nil, bad)
			assert.ErrorIs(t, err, storage.ErrInvalidArgument, "ttl %v", bad)
		}
	})

	t.Run("Cancelled", func(t *testing.T) {
		p := pk(t, "p")
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		err := st.Put(cctx, p, []byte("c"), []byte("v"))
		require.ErrorIs(t, err, context.Canceled)
		_, err = st.InsertIfNotExists(cctx, p, []byte("c"), []byte("v"), 0)
		require.ErrorIs(t, err, context.Canceled)
		_, _, err = st.Get(cctx, p, []byte("c"))
		require.ErrorIs(t, err, context.Canceled)
		_, ok, err := st.Get(ctx, p, []byte("c"))
		require.NoError(t, err)
		assert.False(t, ok, "a cancelled call writes nothing")
	})

	t.Run("Closed", func(t *testing.T) {
		own := h.New(t)
		require.NoError(t, own.Close())
		err := own.Put(ctx, pk(t, "p"), []byte("c"), nil)
		require.ErrorIs(t, err, storage.ErrClosed)
		_, _, err = own.Get(ctx, pk(t, "p"), []byte("c"))
		require.ErrorIs(t, err, storage.ErrClosed)
	})
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
