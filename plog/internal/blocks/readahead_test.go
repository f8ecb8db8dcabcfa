package blocks

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/drivertest"
	"github.com/cqlseq/cqlseq/storage/faulty"
	"github.com/cqlseq/cqlseq/storage/mem"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// value is the row value stored at off: 8 bytes of the offset, then a few
// more so that values differ in length.
func value(off uint64) []byte {
	v := binary.BigEndian.AppendUint64(nil, off)
	return append(v, bytes.Repeat([]byte{byte(off)}, int(off%7))...)
}

// fill stores a row at each of offs in partition 1 of a fresh mem store.
func fill(t *testing.T, offs []uint64) *mem.Store {
	t.Helper()
	st := mem.New(mem.Options{})
	t.Cleanup(func() { _ = st.Close() })
	rows := make([]storage.Row, 0, len(offs))
	for _, off := range offs {
		rows = append(rows, storage.Row{
			PKey:  testLayout.AppendPKey(nil, 1, off>>loBits),
			CCols: binary.BigEndian.AppendUint16(nil, uint16(off&loMask)),
			Value: value(off),
		})
	}
	require.NoError(t, st.PutBatch(context.Background(), rows))
	return st
}

// want is what a Read from from must deliver over the stored offsets
// (sorted): the consecutive run from from (from 0: from the first stored
// offset of block 0).
func want(stored []uint64, from uint64) []uint64 {
	set := make(map[uint64]bool, len(stored))
	for _, off := range stored {
		set[off] = true
	}
	if from == 0 {
		from = Size // none in block 0: nothing
		for _, off := range stored {
			if off < Size {
				from = min(from, off)
			}
		}
		if from == Size {
			return nil
		}
	}
	var w []uint64
	for off := from; set[off]; off++ {
		w = append(w, off)
	}
	return w
}

// collect reads with r from from and checks each value.
func collect(t *testing.T, ctx context.Context, r *Reader, from uint64) ([]uint64, error) {
	t.Helper()
	var got []uint64
	err := r.Read(ctx, 1, isequencer.PLogOffset(from), func(off isequencer.PLogOffset, v []byte) error {
		if !bytes.Equal(value(uint64(off)), v) {
			return fmt.Errorf("offset %d: value %x", off, v)
		}
		got = append(got, uint64(off))
		return nil
	})
	return got, err
}

// TestReadAheadMatchesModel reads seeded random logs (several blocks, gaps
// inside blocks and at their edges, a full last block or a short one)
// from random offsets, with reads delayed at random so that read-ahead
// reads end out of order, and compares every delivery with the model: each
// row exactly once, in offset order, up to the first gap.
func TestReadAheadMatchesModel(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for round := range 12 {
		nBlocks := 1 + rng.IntN(5)
		first := uint64(rng.IntN(3)) // offset 0, 1 or 2 first
		end := uint64(nBlocks) * Size
		switch rng.IntN(3) {
		case 0: // ends inside the last block
			end -= uint64(1 + rng.IntN(Size-1))
		case 1: // ends at a block's last offset
		case 2: // ends right after a block's first offset
			end = end - Size + 1
		}
		end = max(end, first+1)
		var stored []uint64
		gap := uint64(1 << 62)
		if rng.IntN(2) == 0 {
			gap = first + uint64(rng.IntN(int(end-first)))
		}
		for off := first; off < end; off++ {
			if off != gap {
				stored = append(stored, off)
			}
		}
		st := fill(t, stored)
		slow, err := faulty.New(st, faulty.Options{Seed: seed + uint64(round), Rules: []faulty.Rule{
			{Ops: []string{faulty.OpRead}, Action: faulty.Delay, Delay: time.Millisecond, Probability: 0.5},
		}})
		require.NoError(t, err)
		for _, ahead := range []int{-1, 1, 3, DefaultReadAhead} {
			r, err := New(slow, Options{ReadAhead: ahead}, testLayout)
			require.NoError(t, err)
			for _, from := range []uint64{0, first, first + uint64(rng.IntN(int(end-first+2)))} {
				got, err := collect(t, context.Background(), r, from)
				require.NoError(t, err, "seed %d round %d ahead %d from %d", seed, round, ahead, from)
				sameOffsets(t, want(stored, from), got, fmt.Sprintf("seed %d round %d ahead %d from %d (end %d gap %d)", seed, round, ahead, from, end, gap))
			}
		}
	}
}

// TestReadAheadEmptyTailOneRead: a log that ends where the read starts,
// or in the block it starts in, costs one storage.Read whatever the
// read-ahead.
func TestReadAheadEmptyTailOneRead(t *testing.T) {
	st := drivertest.NewCounting(fill(t, spanOffs(1, 3*Size+5)))
	r, err := New(st, Options{ReadAhead: 8}, testLayout)
	require.NoError(t, err)
	for _, tc := range []struct {
		from   uint64
		wn     int
		wreads int64
	}{
		{3*Size + 5, 0, 1},                // the tail is empty
		{3 * Size, 5, 1},                  // ends in the block the read starts in
		{10 * Size, 0, 1},                 // far past the end
		{2*Size + 7, Size - 7 + 5, 1 + 8}, // one complete block: a window of reads
	} {
		st.Reset()
		got, err := collect(t, context.Background(), r, tc.from)
		require.NoError(t, err)
		assert.Len(t, got, tc.wn, "from %d", tc.from)
		assert.Equal(t, tc.wreads, st.Calls(faulty.OpRead), "from %d: storage reads", tc.from)
	}
}

// sameOffsets fails t at the first difference of got from w.
func sameOffsets(t *testing.T, w, got []uint64, what string) {
	t.Helper()
	for i := range min(len(w), len(got)) {
		if w[i] != got[i] {
			require.Failf(t, "offsets differ", "at index %d: want %d, got %d (%s)", i, w[i], got[i], what)
		}
	}
	require.Equal(t, len(w), len(got), what)
}

func spanOffs(from, to uint64) []uint64 {
	var offs []uint64
	for off := from; off < to; off++ {
		offs = append(offs, off)
	}
	return offs
}

// flaky fails chosen storage.Reads after passing some of their rows: the
// rows before the failure reach the Reader, which must not deliver them
// twice when it retries.
type flaky struct {
	storage.Storage
	fail func(pKey []byte, call int) (afterRows int, fail bool)
	call atomic.Int64
}

var errFlaky = fmt.Errorf("test: flaky read: %w", storage.ErrUnavailable)

func (f *flaky) Read(ctx context.Context, pKey, from, to []byte, cb func(cCols, value []byte) error) error {
	after, fail := f.fail(pKey, int(f.call.Add(1)))
	if !fail {
		return f.Storage.Read(ctx, pKey, from, to, cb)
	}
	n := 0
	err := f.Storage.Read(ctx, pKey, from, to, func(cCols, value []byte) error {
		if n == after {
			return errFlaky
		}
		n++
		return cb(cCols, value)
	})
	if err == nil { // fewer rows than after: fail at the end
		err = errFlaky
	}
	return err
}

// TestReadAheadRetriesWithoutRedelivery fails the reads of blocks in the
// middle of the read-ahead window halfway through, once or twice each:
// every row is still delivered exactly once, in order.
func TestReadAheadRetriesWithoutRedelivery(t *testing.T) {
	stored := spanOffs(1, 9*Size+100)
	inner := drivertest.NewCounting(fill(t, stored))
	failures := map[uint64]int{2: 1, 3: 2, 5: 1, 8: 2} // block: failed attempts
	var mu sync.Mutex
	f := &flaky{Storage: inner, fail: func(pKey []byte, _ int) (int, bool) {
		b := binary.BigEndian.Uint64(pKey[2:])
		mu.Lock()
		defer mu.Unlock()
		if failures[b] == 0 {
			return 0, false
		}
		failures[b]--
		return 1000 + int(b)*10, true
	}}
	r, err := New(f, Options{ReadAhead: 4}, testLayout)
	require.NoError(t, err)
	got, err := collect(t, context.Background(), r, 1)
	require.NoError(t, err)
	sameOffsets(t, stored, got, "")
	for b, left := range failures {
		assert.Zero(t, left, "block %d: every planned failure happened", b)
	}
}

// TestReadAheadErrorAfterRetries: a block whose reads keep failing ends
// the read with the storage error, naming the first offset not delivered,
// after every row before it was delivered once; no read is left running.
func TestReadAheadErrorAfterRetries(t *testing.T) {
	stored := spanOffs(1, 6*Size)
	f := &flaky{Storage: fill(t, stored), fail: func(pKey []byte, _ int) (int, bool) {
		return 100, binary.BigEndian.Uint64(pKey[2:]) == 3
	}}
	for _, retries := range []int{-1, 2} {
		r, err := New(f, Options{ReadAhead: 4, Retries: retries}, testLayout)
		require.NoError(t, err)
		f.call.Store(0)
		got, err := collect(t, context.Background(), r, 1)
		require.ErrorIs(t, err, storage.ErrUnavailable)
		// Each attempt passes 100 rows on before it fails; the next one
		// starts after them.
		wend := uint64(3*Size + 100*(max(retries, 0)+1))
		assert.EqualError(t, err, fmt.Sprintf("test: reading partition 1 at offset %d: %v", wend, errFlaky))
		sameOffsets(t, spanOffs(1, wend), got, fmt.Sprintf("retries %d", retries))
	}
}

// TestReadAheadCancel: cancelling ctx during a long replay whose reads are
// slow and whose consumer is slow returns within 100 ms, with every read
// it started ended (goleak, TestMain).
func TestReadAheadCancel(t *testing.T) {
	st := fill(t, spanOffs(1, 8*Size))
	slow, err := faulty.New(st, faulty.Options{Rules: []faulty.Rule{
		{Ops: []string{faulty.OpRead}, Action: faulty.Delay, Delay: 30 * time.Millisecond},
	}})
	require.NoError(t, err)
	r, err := New(slow, Options{ReadAhead: 4}, testLayout)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var delivered atomic.Int64
	began := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- r.Read(ctx, 1, 1, func(isequencer.PLogOffset, []byte) error {
			if n := delivered.Add(1); n == Size+1 {
				close(began) // the read-ahead window is in flight
			} else if n > Size+1 {
				time.Sleep(100 * time.Microsecond) // a slow consumer
			}
			return nil
		})
	}()
	select {
	case <-began:
	case err := <-done:
		t.Fatalf("ended before the second block: %v", err)
	}
	stopped := time.Now()
	cancel()
	select {
	case err := <-done:
		elapsed := time.Since(stopped)
		assert.Less(t, elapsed, 100*time.Millisecond)
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(time.Second):
		t.Fatal("Read did not return within 1 s")
	}
	assert.Less(t, delivered.Load(), int64(8*Size-1), "stopped before the end")
}

// TestReadAheadRowErrorStopsReads: a row error stops the read at once and
// is returned as is, and the read-ahead reads are ended.
func TestReadAheadRowErrorStopsReads(t *testing.T) {
	st := fill(t, spanOffs(1, 8*Size))
	r, err := New(st, Options{ReadAhead: 4}, testLayout)
	require.NoError(t, err)
	wrow := errors.New("row")
	n := 0
	err = r.Read(context.Background(), 1, 1, func(isequencer.PLogOffset, []byte) error {
		if n++; n == Size+10 {
			return wrow
		}
		return nil
	})
	assert.Same(t, wrow, err)
	assert.Equal(t, Size+10, n)
}
