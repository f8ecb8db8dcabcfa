package vvmadapter

import (
	"context"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/mem"
)

// TestGoldenLayouts pins the persisted byte layouts.
func TestGoldenLayouts(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		{"WSKey", WSKey(0x01020304, 0x1122334455667788), "00000003" + "01020304" + "1122334455667788"},
		{"SeqCCols", SeqCCols(0xA1B2), "a1b2"},
		{"PartKey", PartKey(7, 0x0102), "00000002" + "00000007" + "0102"},
		{"PartCCols offset", PartCCols(PLogOffsetCC), "00000000"},
		{"PartCCols epoch", PartCCols(EpochCC), "00000001"},
		{"PartCCols floors", PartCCols(FloorsCC), "00000002"},
		{"floors", EncodeFloors([]Floor{{SeqID: 5, Number: 0x0102030405060708}, {SeqID: 1, Number: 9}, {SeqID: 5, Number: 3}}),
			"0001" + "0000000000000009" + "0005" + "0102030405060708"},
		{"value", EncodeU64(0x0102030405060708), "0102030405060708"},
	} {
		assert.Equal(t, tc.want, hex.EncodeToString(tc.got), tc.name)
	}
}

func TestAdapterRoundTrip(t *testing.T) {
	st := mem.New(mem.Options{})
	defer st.Close()
	ctx := context.Background()
	a := New(st, 5)
	dst := make([]isequencer.Number, 3)
	require.NoError(t, a.GetNumbersMax(ctx, 1, []isequencer.SeqID{1, 2, 3}, dst))
	assert.Equal(t, []isequencer.Number{0, 0, 0}, dst, "missing numbers are 0")
	_, ok, err := a.GetPLogOffset(ctx, 1)
	require.NoError(t, err)
	assert.False(t, ok)

	require.NoError(t, a.putCells(ctx, 0, []isequencer.SeqValue{
		{Key: isequencer.NumberKey{WSID: 1, SeqID: 2}, Value: 200},
		{Key: isequencer.NumberKey{WSID: 2, SeqID: 2}, Value: 300},
	}))
	require.NoError(t, a.putPLogOffset(ctx, nil, 1, 42))
	require.NoError(t, a.GetNumbersMax(ctx, 1, []isequencer.SeqID{1, 2, 3}, dst))
	assert.Equal(t, []isequencer.Number{0, 200, 0}, dst)
	off, ok, err := a.GetPLogOffset(ctx, 1)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, isequencer.PLogOffset(42), off)

	other := New(st, 6)
	require.NoError(t, other.GetNumbersMax(ctx, 1, []isequencer.SeqID{2}, dst[:1]))
	assert.Zero(t, dst[0], "apps do not share numbers")

	// A corrupt value is an error naming the row, not a panic.
	require.NoError(t, st.Put(ctx, WSKey(5, 9), SeqCCols(1), []byte{1, 2, 3}))
	err = a.GetNumbersMax(ctx, 9, []isequencer.SeqID{1}, dst[:1])
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrBadCell)
	assert.Contains(t, err.Error(), "WSID 9: vvmadapter: bad number cell: SeqID 1: value is 3 bytes")
}

// TestStoredRows pins the rows the adapter writes, byte for byte, as read
// back from the storage.
func TestStoredRows(t *testing.T) {
	st := mem.New(mem.Options{})
	defer st.Close()
	ctx := context.Background()
	a := New(st, 0x0A0B0C0D)
	require.NoError(t, a.putCells(ctx, 0, []isequencer.SeqValue{
		{Key: isequencer.NumberKey{WSID: 0x0102030405060708, SeqID: 0x0304}, Value: 0xF1F2F3F4F5F6F7F8},
	}))
	require.NoError(t, a.putPLogOffset(ctx, nil, 0xBEEF, 0x1122))

	type kv struct{ c, v string }
	read := func(pKey string) (got []kv) {
		pk, err := hex.DecodeString(pKey)
		require.NoError(t, err)
		require.NoError(t, st.Read(ctx, pk, nil, nil, func(c, v []byte) error {
			got = append(got, kv{hex.EncodeToString(c), hex.EncodeToString(v)})
			return nil
		}))
		return got
	}
	assert.Equal(t, []kv{{"0304", "f1f2f3f4f5f6f7f8"}}, read("00000003"+"0a0b0c0d"+"0102030405060708"))
	assert.Equal(t, []kv{{"00000000", "0000000000001122"}}, read("00000002"+"0a0b0c0d"+"beef"))
}

func TestBadInput(t *testing.T) {
	st := mem.New(mem.Options{})
	defer st.Close()
	ctx := context.Background()
	a := New(st, 1)

	err := a.GetNumbersMax(ctx, 1, []isequencer.SeqID{1, 2}, make([]isequencer.Number, 1))
	require.ErrorIs(t, err, storage.ErrInvalidArgument)

	require.NoError(t, st.Put(ctx, PartKey(1, 3), PartCCols(PLogOffsetCC), []byte{1}))
	_, ok, err := a.GetPLogOffset(ctx, 3)
	require.Error(t, err)
	assert.False(t, ok)
	assert.Contains(t, err.Error(), "partition 3")

	require.NoError(t, st.Close())
	_, _, err = a.GetPLogOffset(ctx, 3)
	require.ErrorIs(t, err, storage.ErrClosed)
	require.ErrorIs(t, a.putPLogOffset(ctx, nil, 3, 1), storage.ErrClosed)
	require.ErrorIs(t, a.putCells(ctx, 0, []isequencer.SeqValue{{Key: isequencer.NumberKey{WSID: 1, SeqID: 1}, Value: 1}}), storage.ErrClosed)
	require.ErrorIs(t, a.GetNumbersMax(ctx, 1, []isequencer.SeqID{1}, make([]isequencer.Number, 1)), storage.ErrClosed)
}

// TestGoldenNumberCells pins the decoding of both number cell layouts
// from their bytes, and the rows that are neither.
func TestGoldenNumberCells(t *testing.T) {
	dec := func(c, v string) (NumberCell, error) {
		cb, err := hex.DecodeString(c)
		require.NoError(t, err)
		vb, err := hex.DecodeString(v)
		require.NoError(t, err)
		return DecodeNumberCell(cb, vb)
	}
	for _, tc := range []struct {
		c, v string
		want NumberCell
	}{
		{"a1b2", "0102030405060708", NumberCell{SeqID: 0xA1B2, Number: 0x0102030405060708}},
		{"a1b2" + "0000000000000005", "00000000000000ff", NumberCell{SeqID: 0xA1B2, Epoch: 5, Number: 255}},
		{"0001" + "ffffffffffffffff", "0000000000000001", NumberCell{SeqID: 1, Epoch: 1<<64 - 1, Number: 1}},
	} {
		got, err := dec(tc.c, tc.v)
		require.NoError(t, err, tc.c)
		assert.Equal(t, tc.want, got, tc.c)
	}
	for _, tc := range []struct{ c, v, werr string }{
		{"", "0000000000000001", "clustering key  is 0 bytes"},
		{"000102", "0000000000000001", "clustering key 000102 is 3 bytes"},
		{"0001" + "0000000000000000", "0000000000000001", "an epoch cell of epoch 0"},
		{"0001", "01", "SeqID 1: value is 1 bytes, want 8"},
		{"0001" + "0000000000000002", "", "SeqID 1@epoch 2: value is 0 bytes"},
	} {
		_, err := dec(tc.c, tc.v)
		require.ErrorIs(t, err, ErrBadCell, tc.c)
		assert.Contains(t, err.Error(), tc.werr)
	}
}
