package elections

import (
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLayoutGolden pins the persisted bytes of leadership rows.
func TestLayoutGolden(t *testing.T) {
	assert.Equal(t, "0000000100000007", hex.EncodeToString(PKey(7)), "u32 prefix 1 ‖ u32 key")
	assert.Equal(t, "00000001ffffffff", hex.EncodeToString(PKey(0xffffffff)))
	assert.Equal(t, "00000000", hex.EncodeToString(CCols(RowLease)))
	assert.Equal(t, "00000001", hex.EncodeToString(CCols(RowEpoch)))

	n := nonce{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4}
	lease := encodeLease(n, []byte{10, 0, 0, 1})
	assert.Equal(t, "deadbeef010203040a000001", hex.EncodeToString(lease), "nonce ‖ value")
	gn, val, err := decodeLease(lease)
	require.NoError(t, err)
	assert.Equal(t, n, gn)
	assert.Equal(t, []byte{10, 0, 0, 1}, val)
	_, val, err = decodeLease(n[:])
	require.NoError(t, err)
	assert.Empty(t, val, "an empty value")

	epoch := encodeEpoch(0x0102030405060708, n)
	assert.Equal(t, "0102030405060708deadbeef01020304", hex.EncodeToString(epoch), "u64 epoch ‖ nonce")
	ge, gn, err := decodeEpoch(epoch)
	require.NoError(t, err)
	assert.Equal(t, uint64(0x0102030405060708), ge)
	assert.Equal(t, n, gn)
}

func TestDecodeCorrupt(t *testing.T) {
	_, _, err := decodeLease([]byte{1, 2, 3})
	assert.ErrorIs(t, err, ErrCorrupt)
	for _, b := range [][]byte{nil, make([]byte, 15), make([]byte, 17)} {
		_, _, err = decodeEpoch(b)
		assert.ErrorIs(t, err, ErrCorrupt, "%d bytes", len(b))
	}
}

func TestNonceIsRandom(t *testing.T) {
	seen := map[nonce]bool{}
	for range 1000 {
		n := newNonce()
		require.False(t, seen[n])
		seen[n] = true
	}
}
