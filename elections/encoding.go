package elections

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
)

// nonce tells one acquisition's rows from every other's, so that a holder's
// compare-and-set calls never match a later holder's rows (even one with the
// same value) and an unknown outcome can be resolved by reading.
type nonce [8]byte

func newNonce() nonce {
	var n nonce
	_, _ = rand.Read(n[:]) // crypto/rand.Read never fails (Go 1.24+)
	return n
}

// encodeLease returns a RowLease value: nonce ‖ val.
func encodeLease(n nonce, val []byte) []byte {
	b := make([]byte, 0, len(n)+len(val))
	return append(append(b, n[:]...), val...)
}

// decodeLease splits a RowLease value; val aliases b.
func decodeLease(b []byte) (n nonce, val []byte, err error) {
	if len(b) < len(n) {
		return n, nil, fmt.Errorf("%w: lease value is %d bytes, want at least %d", ErrCorrupt, len(b), len(n))
	}
	copy(n[:], b)
	return n, b[len(n):], nil
}

// encodeEpoch returns a RowEpoch value: u64 epoch ‖ nonce.
func encodeEpoch(epoch uint64, n nonce) []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(n)), epoch)
	return append(b, n[:]...)
}

func decodeEpoch(b []byte) (epoch uint64, n nonce, err error) {
	if len(b) != 8+len(n) {
		return 0, n, fmt.Errorf("%w: epoch value is %d bytes, want %d", ErrCorrupt, len(b), 8+len(n))
	}
	copy(n[:], b[8:])
	return binary.BigEndian.Uint64(b), n, nil
}
