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

	"github.com/cqlseq/cqlseq/storage"
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
		{"value versioned", encodeVersioned([]byte("v"), 1<<42|7), "02 0000040000000007 76"},
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
	v, exp, err = decodeValue(unhex(t, "02 0000040000000007 76"))
	require.NoError(t, err)
	assert.Zero(t, exp)
	assert.Equal(t, []byte("v"), v)
	assert.Equal(t, uint64(1<<42|7), rowVersion(unhex(t, "02 0000040000000007 76")))
	assert.Zero(t, rowVersion(unhex(t, "00 76")))
	for _, bad := range []string{"", "02 76", "01 1797", "03 76"} {
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
	require.NoError(t, s.PutBatch(ctx, []storage.Row{{PKey: []byte("ws\x00"), CCols: []byte{0, 2}, Value: []byte("v2"), Version: 1<<42 | 7}}))
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
		// meta: layout version 2.
		"meta 6c61796f7574 02",
		// rows: "ws" sorts before "ws\x00" (escaped 00ff).
		"rows " + "7773" + "0001" + "6c65617365" + " " + "01" + "17979cff602ff200" + "6d65",
		"rows " + "7773" + "00ff" + "0001" + "0001" + " " + "00" + "7631",
		// a versioned row: 0x02, the version, the value.
		"rows " + "7773" + "00ff" + "0001" + "0002" + " " + "02" + "0000040000000007" + "7632",
	}, got)
}

// TestOpenUpgradesLayoutVersion1 checks that a writable Open of a version 1
// file (no versioned rows) keeps its rows and records version 2, and that a
// read-only open reads version 1 as it is.
func TestOpenUpgradesLayoutVersion1(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v1.db")
	s, err := Open(path, Options{ReclaimInterval: -1})
	require.NoError(t, err)
	require.NoError(t, s.Put(ctx, []byte("p"), []byte("c"), []byte("old")))
	require.NoError(t, s.Close())
	setLayout := func(v byte) {
		db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
		require.NoError(t, err)
		require.NoError(t, db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyLayout, []byte{v}) }))
		require.NoError(t, db.Close())
	}
	readLayout := func() byte {
		db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
		require.NoError(t, err)
		defer func() { require.NoError(t, db.Close()) }()
		var v byte
		require.NoError(t, db.View(func(tx *bolt.Tx) error { v = tx.Bucket(bucketMeta).Get(keyLayout)[0]; return nil }))
		return v
	}
	setLayout(1)
	s, err = Open(path, Options{ReclaimInterval: -1})
	require.NoError(t, err)
	v, ok, err := s.Get(ctx, []byte("p"), []byte("c"))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, []byte("old"), v)
	require.NoError(t, s.Close())
	assert.Equal(t, byte(2), readLayout())

	setLayout(3)
	_, err = Open(path, Options{ReclaimInterval: -1})
	assert.ErrorIs(t, err, ErrIncompatible)
}
