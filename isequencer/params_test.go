package isequencer

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestValidateBoundsMaxNumUnflushedValues: the ring is sized from
// MaxNumUnflushedValues, so a huge value must be refused before New sizes
// it (issue 20 item 4: 2^61 spun forever in the sizing loop, 2^40 ran out
// of memory).
func TestValidateBoundsMaxNumUnflushedValues(t *testing.T) {
	for _, n := range []int{MaxMaxNumUnflushedValues + 1, 1 << 40, 1 << 61, math.MaxInt} {
		p := Params{SeqTypes: testSeqTypes(), SeqStorage: newMockStorage(), MaxNumUnflushedValues: n}
		p.EnsureDefaults()
		err := p.Validate()
		require.ErrorIs(t, err, ErrInvalidParams, "%d", n)
		assert.ErrorContains(t, err, "must be <= 1048576")
		_, _, err = New(&p)
		require.ErrorIs(t, err, ErrInvalidParams, "New refuses %d without sizing anything", n)
	}
	p := Params{SeqTypes: testSeqTypes(), SeqStorage: newMockStorage(), MaxNumUnflushedValues: MaxMaxNumUnflushedValues}
	p.EnsureDefaults()
	require.NoError(t, p.Validate(), "the bound itself is valid")
}
