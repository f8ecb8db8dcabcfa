package blocks

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/storage/mem"
)

var (
	errInvalid = errors.New("test: invalid options")
	errBadKey  = errors.New("test: bad key")
)

var testLayout = Layout{
	Pkg:     "test",
	Invalid: errInvalid,
	AppendPKey: func(b []byte, part isequencer.PartitionID, block uint64) []byte {
		b = binary.BigEndian.AppendUint16(b, uint16(part))
		return binary.BigEndian.AppendUint64(b, block)
	},
	BadKey: func(isequencer.PartitionID, uint64, []byte) error { return errBadKey },
}

// newReader returns a Reader over a mem store holding a row (value: the
// offset's low byte) at each of offs of partition 1.
func newReader(t *testing.T, offs ...uint64) (*Reader, *mem.Store) {
	t.Helper()
	st := mem.New(mem.Options{})
	t.Cleanup(func() { _ = st.Close() })
	for _, off := range offs {
		put(t, st, testLayout.AppendPKey(nil, 1, off>>loBits), binary.BigEndian.AppendUint16(nil, uint16(off&loMask)), off)
	}
	r, err := New(st, Options{}, testLayout)
	require.NoError(t, err)
	return r, st
}

func put(t *testing.T, st *mem.Store, pKey, cCols []byte, off uint64) {
	t.Helper()
	require.NoError(t, st.Put(context.Background(), pKey, cCols, []byte{byte(off)}))
}

func readAll(t *testing.T, r *Reader, from isequencer.PLogOffset) ([]isequencer.PLogOffset, error) {
	t.Helper()
	var got []isequencer.PLogOffset
	err := r.Read(context.Background(), 1, from, func(off isequencer.PLogOffset, value []byte) error {
		assert.Equal(t, []byte{byte(off)}, value, "offset %d", off)
		got = append(got, off)
		return nil
	})
	return got, err
}

func TestReadAcrossBlocksToGap(t *testing.T) {
	var offs []uint64
	for off := uint64(4090); off <= 4100; off++ {
		offs = append(offs, off)
	}
	r, _ := newReader(t, append(offs, 4102)...)
	for _, tc := range []struct {
		from   isequencer.PLogOffset
		wfirst isequencer.PLogOffset
		wn     int
	}{
		{0, 4090, 11}, // the first stored row, whatever its offset
		{4090, 4090, 11},
		{4096, 4096, 5},
		{4095, 4095, 6},
		{4102, 4102, 1},
		{4089, 0, 0}, // missing: nothing read
		{4101, 0, 0},
	} {
		got, err := readAll(t, r, tc.from)
		require.NoError(t, err, "from %d", tc.from)
		require.Len(t, got, tc.wn, "from %d", tc.from)
		for i, off := range got {
			assert.Equal(t, tc.wfirst+isequencer.PLogOffset(i), off, "from %d", tc.from)
		}
	}
}

func TestReadEndsAtIncompleteBlock(t *testing.T) {
	// Block 0 ends at 4094, block 1 is complete from 4096: not read.
	var offs []uint64
	for off := uint64(4080); off < 4095; off++ {
		offs = append(offs, off)
	}
	r, _ := newReader(t, append(offs, 4096, 4097)...)
	got, err := readAll(t, r, 4080)
	require.NoError(t, err)
	assert.Len(t, got, 15)
}

func TestReadSkipsHighClusteringKeys(t *testing.T) {
	r, st := newReader(t, 1, 2)
	put(t, st, testLayout.AppendPKey(nil, 1, 0), []byte{0xFF, 0xFF}, 0) // a fence row
	got, err := readAll(t, r, 1)
	require.NoError(t, err)
	assert.Equal(t, []isequencer.PLogOffset{1, 2}, got)
}

func TestReadErrors(t *testing.T) {
	r, st := newReader(t, 1, 2, 3)
	wrow := errors.New("row")
	n := 0
	err := r.Read(context.Background(), 1, 1, func(isequencer.PLogOffset, []byte) error {
		if n++; n == 2 {
			return wrow
		}
		return nil
	})
	assert.Equal(t, wrow, err, "a row error is returned as is")

	put(t, st, testLayout.AppendPKey(nil, 1, 0), []byte{0, 0, 0}, 0) // a 3-byte clustering key
	_, err = readAll(t, r, 0)
	assert.Equal(t, errBadKey, err)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = r.Read(ctx, 1, 7, func(isequencer.PLogOffset, []byte) error { return nil })
	require.ErrorIs(t, err, context.Canceled)
	assert.EqualError(t, err, "test: reading partition 1 at offset 7: context canceled")
}

func TestNewReportsEveryProblem(t *testing.T) {
	_, err := New(nil, Options{PageTimeout: -1}, testLayout)
	require.ErrorIs(t, err, errInvalid)
	assert.EqualError(t, err, "test: invalid options: Storage is nil\ntest: invalid options: PageTimeout -1ns, must be >= 0")
}
