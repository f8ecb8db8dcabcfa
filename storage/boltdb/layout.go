package boltdb

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// The file's layout, version 2. Three buckets at the top level:
//
//	"meta"    "layout" -> 0x01                        the layout version
//	"rows"    rowKey(pKey, cCols) -> rowValue         one key per row
//	"expiry"  expiryKey(expires, rowKey) -> (empty)   an index of rows with a TTL
//
// rowKey is escape(pKey) || 0x00 0x01 || cCols, where escape writes each
// 0x00 byte of pKey as 0x00 0xFF and copies every other byte. The pair
// 0x00 0x01 never occurs inside escape(pKey), so the rows of a partition are
// exactly the keys that start with escape(pKey) || 0x00 0x01: one contiguous
// range ordered by cCols, which no other partition key (not even one that
// extends pKey) can enter, and an empty cCols is still a non-empty bbolt key.
//
// rowValue is a one-byte format tag, then the format's header, then the
// value:
//
//	0x00 || value                                 the row does not expire
//	0x01 || expires (int64, 8 bytes BE) || value   the row expires at expires
//	0x02 || version (uint64, 8 bytes BE) || value  a versioned row (storage.Row.Version > 0), no expiry
//
// expires is Unix time in nanoseconds of Options.Now; the row is absent to
// every read from that instant on.
//
// expiryKey is uint64(expires) XOR 1<<63 (8 bytes BE, so that keys sort by
// time) followed by the rowKey. The index may hold stale entries (a row that
// was overwritten or deleted since): the reclaimer deletes a row only when its
// own header still carries the entry's expiry, and drops the entry either way.
//
// Version 1 is version 2 without format 0x02: a writable Open upgrades a
// version 1 file by rewriting its layout version (a build that reads only
// version 1 then refuses the file instead of misreading a versioned row).
const layoutVersion = 2

// layoutVersionV1 is the layout this build still opens (and upgrades).
const layoutVersionV1 = 1

var (
	bucketMeta   = []byte("meta")
	bucketRows   = []byte("rows")
	bucketExpiry = []byte("expiry")
	keyLayout    = []byte("layout")
)

const (
	fmtPlain   = 0x00 // rowValue without expiry
	fmtExpires = 0x01 // rowValue with an 8-byte expiry
	fmtVersion = 0x02 // rowValue with an 8-byte version

	expiryKeyLen = 8
	// maxRowKey leaves room for the expiry index prefix within bbolt's key
	// limit.
	maxRowKey = bolt.MaxKeySize - expiryKeyLen
	// maxValue leaves room for the largest rowValue header.
	maxValue = bolt.MaxValueSize - 1 - 8
)

// partPrefix returns escape(pKey) || 0x00 0x01, with spare capacity for
// extra bytes.
func partPrefix(pKey []byte, extra int) []byte {
	n := len(pKey) + 2
	for _, b := range pKey {
		if b == 0 {
			n++
		}
	}
	out := make([]byte, 0, n+extra)
	for _, b := range pKey {
		if b == 0 {
			out = append(out, 0x00, 0xFF)
		} else {
			out = append(out, b)
		}
	}
	return append(out, 0x00, 0x01)
}

// rowKey returns the bbolt key of a row.
func rowKey(pKey, cCols []byte) []byte {
	return append(partPrefix(pKey, len(cCols)), cCols...)
}

// partEnd returns the first key after every key that starts with prefix (a
// partPrefix, which ends in 0x01).
func partEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	end[len(end)-1]++
	return end
}

// encodeValue returns the rowValue of value; expires 0 means no expiry.
func encodeValue(value []byte, expires int64) []byte {
	if expires == 0 {
		out := make([]byte, 0, 1+len(value))
		return append(append(out, fmtPlain), value...)
	}
	out := make([]byte, 0, 9+len(value))
	out = append(out, fmtExpires)
	out = binary.BigEndian.AppendUint64(out, uint64(expires))
	return append(out, value...)
}

// encodeVersioned returns the rowValue of a versioned row (version > 0).
func encodeVersioned(value []byte, version uint64) []byte {
	out := make([]byte, 0, 9+len(value))
	out = append(out, fmtVersion)
	out = binary.BigEndian.AppendUint64(out, version)
	return append(out, value...)
}

// rowVersion returns the version of a rowValue: 0 unless it is versioned.
func rowVersion(v []byte) uint64 {
	if len(v) >= 9 && v[0] == fmtVersion {
		return binary.BigEndian.Uint64(v[1:9])
	}
	return 0
}

// decodeValue splits a rowValue. The returned value aliases v.
func decodeValue(v []byte) (value []byte, expires int64, err error) {
	switch {
	case len(v) >= 1 && v[0] == fmtPlain:
		return v[1:], 0, nil
	case len(v) >= 9 && v[0] == fmtExpires:
		return v[9:], int64(binary.BigEndian.Uint64(v[1:9])), nil
	case len(v) >= 9 && v[0] == fmtVersion:
		return v[9:], 0, nil
	case len(v) == 0:
		return nil, 0, fmt.Errorf("%w: empty row value", ErrCorrupt)
	default:
		return nil, 0, fmt.Errorf("%w: row value format 0x%02x, %d bytes", ErrCorrupt, v[0], len(v))
	}
}

// expiryKey returns the expiry index key of a row.
func expiryKey(expires int64, rk []byte) []byte {
	out := make([]byte, 0, expiryKeyLen+len(rk))
	out = binary.BigEndian.AppendUint64(out, uint64(expires)^1<<63)
	return append(out, rk...)
}

// splitExpiryKey is the inverse of expiryKey; rk aliases k.
func splitExpiryKey(k []byte) (expires int64, rk []byte, ok bool) {
	if len(k) < expiryKeyLen {
		return 0, nil, false
	}
	return int64(binary.BigEndian.Uint64(k) ^ 1<<63), k[expiryKeyLen:], true
}
