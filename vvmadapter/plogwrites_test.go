package vvmadapter

import (
	"context"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/storage/mem"
)

// TestGoldenPLogWritesRow pins the row's key and values; a later owner's
// record replaces an earlier one's whatever their order of arrival.
func TestGoldenPLogWritesRow(t *testing.T) {
	ctx := context.Background()
	st := mem.New(mem.Options{})
	defer st.Close()
	a := New(st, 1)
	_, ok, err := a.GetPLogWrites(ctx, 2)
	require.NoError(t, err)
	assert.False(t, ok, "none recorded")
	first, err := a.TakeOver(ctx, 2)
	require.NoError(t, err)
	second, err := a.TakeOver(ctx, 2)
	require.NoError(t, err)
	require.NoError(t, second.PutPLogWrites(ctx, PLogWritesConditional))
	require.NoError(t, first.PutPLogWrites(ctx, PLogWritesVersioned), "a deposed owner's late record")
	w, ok, err := a.GetPLogWrites(ctx, 2)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, PLogWritesConditional, w, "the later owner's record stays")

	v, ok, err := st.Get(ctx, PartKey(1, 2), PartCCols(PLogWritesCC))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "00000002"+"00000001"+"0002", hex.EncodeToString(PartKey(1, 2)))
	assert.Equal(t, "00000003", hex.EncodeToString(PartCCols(PLogWritesCC)))
	assert.Equal(t, "00", hex.EncodeToString(v))
	third, err := a.TakeOver(ctx, 2)
	require.NoError(t, err)
	require.NoError(t, third.PutPLogWrites(ctx, PLogWritesVersioned))
	v, _, err = st.Get(ctx, PartKey(1, 2), PartCCols(PLogWritesCC))
	require.NoError(t, err)
	assert.Equal(t, "01", hex.EncodeToString(v))

	require.NoError(t, st.Put(ctx, PartKey(1, 3), PartCCols(PLogWritesCC), []byte{7}))
	_, _, err = a.GetPLogWrites(ctx, 3)
	require.Error(t, err, "an unknown value is refused")
}
