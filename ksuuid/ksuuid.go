// Package ksuuid owns K-sortable 128-bit IDs: UUID version 7 as RFC 9562
// defines it (48 bits of Unix milliseconds, version, 12 bits of
// sub-millisecond precision, variant, 62 random bits), so that they fit
// every uuid column and tool, sort by creation time as bytes, as strings
// and as CQL's timeuuid-free uuid type compares them, and need no
// coordination between processes.
//
// Choice: the encoding, parsing and generation are github.com/google/uuid's
// (already in cqlseq's module graph through gocql, BSD-3, maintained by
// Google), not hand-written. Its NewV7 fills rand_a with the clock's
// sub-millisecond fraction (RFC 9562 section 6.2, method 3) and guarantees
// that within one process each UUID's (milliseconds, rand_a) is greater
// than the previous one's, also when the clock steps back or two calls fall
// in the same 256 ns: so New is strictly increasing per process. Across
// processes, IDs are ordered by time to the millisecond (and by the clocks'
// agreement); uniqueness across processes rests on the 62 random bits
// (crypto/rand), as for every UUIDv7. BDR's KSUUID v2 has its own layout
// without a version; UUIDv7 is its standard successor.
package ksuuid

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// ID is a UUIDv7.
type ID = uuid.UUID

// ErrNotV7 is returned by Parse for a valid UUID that is not a version 7
// RFC 9562 UUID.
var ErrNotV7 = errors.New("ksuuid: not an RFC 9562 version 7 UUID")

// New returns a new UUIDv7 for the current time. Within one process every
// ID is greater than the one before.
func New() (ID, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.Nil, fmt.Errorf("ksuuid: %w", err)
	}
	return id, nil
}

// At returns a UUIDv7 for time t with random rand_a and rand_b: for
// back-dated IDs. IDs made by At are not ordered within t's millisecond.
// t must lie in 1970..10889 (48 bits of milliseconds).
func At(t time.Time) (ID, error) {
	var id ID
	if _, err := rand.Read(id[6:]); err != nil {
		return uuid.Nil, fmt.Errorf("ksuuid: %w", err)
	}
	if err := setTime(&id, t); err != nil {
		return uuid.Nil, err
	}
	return id, nil
}

// Min returns the smallest UUIDv7 of t's millisecond (every other bit 0):
// the lower bound of a range query by time.
func Min(t time.Time) (ID, error) {
	var id ID
	if err := setTime(&id, t); err != nil {
		return uuid.Nil, err
	}
	return id, nil
}

const maxMillis = 1<<48 - 1

func setTime(id *ID, t time.Time) error {
	ms := t.UnixMilli()
	if ms < 0 || ms > maxMillis {
		return fmt.Errorf("ksuuid: time %v outside UUIDv7's range", t)
	}
	for i := range 6 {
		id[i] = byte(ms >> (40 - 8*i))
	}
	id[6] = 0x70 | id[6]&0x0f
	id[8] = 0x80 | id[8]&0x3f
	return nil
}

// Time returns the ID's Unix time, to the millisecond (UTC).
func Time(id ID) time.Time {
	var ms int64
	for i := range 6 {
		ms = ms<<8 | int64(id[i])
	}
	return time.UnixMilli(ms).UTC()
}

// Compare returns -1, 0 or 1 as a sorts before, equal to or after b: the
// byte order, which for UUIDv7 is the time order to the millisecond (and,
// within one process's New, the creation order).
func Compare(a, b ID) int { return bytes.Compare(a[:], b[:]) }

// Parse reads the textual forms uuid.Parse accepts (canonical
// xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, urn:uuid:, braces, 32 hex digits)
// and accepts only version 7 RFC 9562 UUIDs.
func Parse(s string) (ID, error) {
	id, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil, fmt.Errorf("ksuuid: %w", err)
	}
	if id.Version() != 7 || id.Variant() != uuid.RFC4122 {
		return uuid.Nil, fmt.Errorf("%w: %s (version %d, %v)", ErrNotV7, s, id.Version(), id.Variant())
	}
	return id, nil
}

// Format returns the canonical lower-case form, which sorts as the ID does.
func Format(id ID) string { return id.String() }
