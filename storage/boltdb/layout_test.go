package boltdb

import (
	"context"
	"encoding/hex"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	require.NoError(t, err)
	return b
}

// expires5s is 1,700,000,005 s after the epoch in ns: the golden clock
// (1,700,000,000 s) plus a 5 s TTL.
const expires5s = int64(1_700_000_005_000_000_000)

func TestGoldenEncoding(t *testing.T) {
	tests := []struct {
		name string
		got  []byte
		want string
	}{
		{"rowKey zero bytes escaped", rowKey([]byte("a\x00b"), []byte{0, 1}), "61 00ff 62 0001 0001"},
		{"rowKey empty cCols", rowKey([]byte("ab"), nil), "6162 0001"},
		{"rowKey trailing zero in pKey", rowKey([]byte{0x61, 0}, []byte{0x62}), "61 00ff 0001 62"},
		{"partEnd", partEnd(partPrefix([]byte("ab"), 0)), "6162 0002"},
		{"value plain", encodeValue([]byte("v"), 0), "00 76"},
		{"value plain empty", encodeValue(nil, 0), "00"},
		{"value expiring", encodeValue([]byte("v"), expires5s), "01 17979cff602ff200 76"},
		{"expiry key", expiryKey(expires5s, []byte{0x61, 0, 1}), "97979cff602ff200 610001"},
		{"expiry key before 1970", expiryKey(-1, []byte{0x61}), "7fffffffffffffff 61"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, spaced(tt.got, tt.want), tt.name)
	}

	v, exp, err := decodeValue(unhex(t, "01 17979cff602ff200 76"))
	require.NoError(t, err)
	assert.Equal(t, expires5s, exp)
	assert.Equal(t, []byte("v"), v)
	for _, bad := range []string{"", "02 76", "01 1797"} {
		_, _, err := decodeValue(unhex(t, bad))
		assert.ErrorIs(t, err, ErrCorrupt, "%q", bad)
	}
	e, rk, ok := splitExpiryKey(unhex(t, "97979cff602ff200 610001"))
	require.True(t, ok)
	assert.Equal(t, expires5s, e)
	assert.Equal(t, []byte{0x61, 0, 1}, rk)
}

// spaced renders b in hex, grouped like want, so failures read like the
// layout comment.
func spaced(b []byte, want string) string {
	h := hex.EncodeToString(b)
	var out strings.Builder
	for i, group := range strings.Fields(want) {
		if i > 0 {
			out.WriteByte(' ')
		}
		n := min(len(group), len(h))
		out.WriteString(h[:n])
		h = h[n:]
	}
	if h != "" {
		out.WriteString(" +" + h)
	}
	return out.String()
}

// TestGoldenFile pins the bytes a Store leaves in the file.
func TestGoldenFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "golden.db")
	now := func() time.Time { return time.Unix(1_700_000_000, 0) }
	s, err := Open(path, Options{Now: now, ReclaimInterval: -1})
	require.NoError(t, err)
	require.NoError(t, s.Put(ctx, []byte("ws\x00"), []byte{0, 1}, []byte("v1")))
	ok, err := s.InsertIfNotExists(ctx, []byte("ws"), []byte("lease"), []byte("me"), 5*time.Second)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, s.Close())

	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	require.NoError(t, err)
	defer func() { require.NoError(t, db.Close()) }()
	var got []string
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			return b.ForEach(func(k, v []byte) error {
				got = append(got, string(name)+" "+hex.EncodeToString(k)+" "+hex.EncodeToString(v))
				return nil
			})
		})
	}))
	assert.Equal(t, []string{
		// expiry: expires XOR 1<<63, then the rowKey of ws/lease.
		"expiry 97979cff602ff200" + "7773" + "0001" + "6c65617365 ",
		// meta: layout version 1.
		"meta 6c61796f7574 01",
		// rows: "ws" sorts before "ws\x00" (escaped 00ff).
		"rows " + "7773" + "0001" + "6c65617365" + " " + "01" + "17979cff602ff200" + "6d65",
		"rows " + "7773" + "00ff" + "0001" + "0001" + " " + "00" + "7631",
	}, got)
}
