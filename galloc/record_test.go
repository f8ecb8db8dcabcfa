package galloc_test

import (
	"encoding/hex"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/galloc"
)

// TestRecordLayoutGolden pins the persisted layout of keys and records.
func TestRecordLayoutGolden(t *testing.T) {
	assert.Equal(t, "000000106f7264657273", hex.EncodeToString(galloc.PKey("orders")))
	assert.Equal(t, "00000000", hex.EncodeToString(galloc.StateCCols()))
	r := galloc.Record{
		Type: galloc.Integer, ChunkSize: 1_000_000, Start: 333, Step: 1,
		Allocated: 4_000_000, Allocations: 4,
		LastAlloc: time.Date(2020, 5, 21, 20, 2, 15, 957835000, time.UTC),
		Nonce:     0x0102030405060708, Process: "n1",
	}
	b, err := r.MarshalBinary()
	require.NoError(t, err)
	const golden = "01" + "02" + "00000000000f4240" + "000000000000014d" + "0000000000000001" +
		"00000000003d0900" + "0000000000000004" + "0005a62dfd3d7d4b" + "0102030405060708" + "0002" + "6e31"
	assert.Equal(t, golden, hex.EncodeToString(b))
	var got galloc.Record
	require.NoError(t, got.UnmarshalBinary(b))
	assert.Equal(t, r, got)
	upTo, ok := got.AllocatedUpTo()
	assert.True(t, ok)
	assert.Equal(t, int64(4_000_333), upTo, "BDR's example: start 333, 4 chunks of 1,000,000")
}

func TestRecordRejectsCorruption(t *testing.T) {
	r := galloc.Record{Type: galloc.SmallInt, ChunkSize: 10, Start: 1, Step: 1, Process: "p"}
	b, err := r.MarshalBinary()
	require.NoError(t, err)
	for name, mut := range map[string]func([]byte) []byte{
		"short":           func(b []byte) []byte { return b[:10] },
		"version":         func(b []byte) []byte { b[0] = 9; return b },
		"type":            func(b []byte) []byte { b[1] = 0; return b },
		"trailing":        func(b []byte) []byte { return append(b, 0) },
		"over allocation": func(b []byte) []byte { b[26+6] = 0xff; return b },
	} {
		c := mut(append([]byte(nil), b...))
		var got galloc.Record
		assert.ErrorIs(t, got.UnmarshalBinary(c), galloc.ErrCorrupt, name)
	}
}
