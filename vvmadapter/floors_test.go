package vvmadapter

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/storage/mem"
)

func TestFloorsRoundTrip(t *testing.T) {
	ctx := context.Background()
	st := mem.New(mem.Options{})
	a := New(st, 7)
	got, err := a.GetFloors(ctx, 3)
	require.NoError(t, err)
	require.Nil(t, got, "none stored")

	first, err := a.TakeOver(ctx, 3)
	require.NoError(t, err)
	second, err := a.TakeOver(ctx, 3)
	require.NoError(t, err)
	require.NoError(t, second.PutFloors(ctx, []Floor{{SeqID: 2, Number: 500}, {SeqID: 1, Number: 40}}))
	// A deposed owner's late write replaces nothing.
	require.NoError(t, first.PutFloors(ctx, []Floor{{SeqID: 1, Number: 1}}))
	got, err = a.GetFloors(ctx, 3)
	require.NoError(t, err)
	require.Equal(t, []Floor{{SeqID: 1, Number: 40}, {SeqID: 2, Number: 500}}, got)

	other, err := New(st, 7).GetFloors(ctx, 4)
	require.NoError(t, err)
	require.Nil(t, other, "another partition's floors are its own")
}

func TestDecodeFloorsRefusesBadValues(t *testing.T) {
	for name, b := range map[string][]byte{
		"short":         {0, 1, 0, 0},
		"not ascending": append(EncodeFloors([]Floor{{SeqID: 2, Number: 1}}), EncodeFloors([]Floor{{SeqID: 1, Number: 1}})...),
		"repeated":      append(EncodeFloors([]Floor{{SeqID: 2, Number: 1}}), EncodeFloors([]Floor{{SeqID: 2, Number: 5}})...),
	} {
		_, err := DecodeFloors(b, "floors")
		require.Error(t, err, name)
	}
	f, err := DecodeFloors(nil, "floors")
	require.NoError(t, err)
	require.Empty(t, f)
}
