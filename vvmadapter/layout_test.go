package vvmadapter

import (
	"context"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/drivertest"
	"github.com/cqlseq/cqlseq/storage/faulty"
	"github.com/cqlseq/cqlseq/storage/mem"
)

// TestClaimPartitionCount: the first claim records the count, the same
// count is accepted again, another one is refused (issue 20 item 1), per
// application.
func TestClaimPartitionCount(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st storage.Storage) {
		ctx := context.Background()
		a, other := New(st, 7), New(st, 8)
		_, ok, err := a.ReadPartitionCount(ctx)
		require.NoError(t, err)
		assert.False(t, ok)
		require.NoError(t, a.ClaimPartitionCount(ctx, 4))
		require.NoError(t, a.ClaimPartitionCount(ctx, 4), "the same count again")
		err = a.ClaimPartitionCount(ctx, 2)
		require.ErrorIs(t, err, ErrPartitionCountChanged)
		assert.EqualError(t, err, "vvmadapter: the application's partition count changed: app 7 was run with 4 partitions, not 2")
		n, ok, err := a.ReadPartitionCount(ctx)
		require.NoError(t, err)
		assert.True(t, ok)
		assert.Equal(t, uint64(4), n, "a refused claim changes nothing")
		require.NoError(t, other.ClaimPartitionCount(ctx, 2), "each application has its own count")
		assert.ErrorIs(t, a.ClaimPartitionCount(ctx, 0), storage.ErrInvalidArgument)
	})
}

func TestClaimPartitionCountUnknownOutcome(t *testing.T) {
	ctx := context.Background()
	inner := mem.New(mem.Options{})
	defer inner.Close()
	st, err := faulty.New(inner, faulty.Options{Rules: []faulty.Rule{{
		Ops: []string{faulty.OpInsertIfNotExists}, Action: faulty.Fail, Err: storage.ErrUnknownOutcome, AfterCall: true, Times: 1,
	}}})
	require.NoError(t, err)
	require.NoError(t, New(st, 1).ClaimPartitionCount(ctx, 3), "an applied insert whose reply was lost is decided by reading")

	require.NoError(t, st.SetRules(faulty.Rule{Ops: []string{faulty.OpInsertIfNotExists}, Action: faulty.Fail, Err: storage.ErrUnknownOutcome, Times: 1}))
	err = New(st, 2).ClaimPartitionCount(ctx, 3)
	require.ErrorIs(t, err, storage.ErrUnknownOutcome, "an insert that did not apply is not taken for a claim")
}

func TestGoldenLayoutRow(t *testing.T) {
	assert.Equal(t, "00000004"+"0a0b0c0d", hex.EncodeToString(AppKey(0x0A0B0C0D)))
	st := mem.New(mem.Options{})
	defer st.Close()
	require.NoError(t, New(st, 1).ClaimPartitionCount(context.Background(), 4))
	v, ok, err := st.Get(context.Background(), AppKey(1), PartCCols(PartitionCountCC))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "00000004"+"00000001", hex.EncodeToString(AppKey(1)))
	assert.Equal(t, "0000000000000004", hex.EncodeToString(v))
}
