package galloc

import (
	"encoding/binary"
	"fmt"
	"time"
	"unicode/utf8"
)

// PKeyPrefixGalloc is the first four bytes of every galloc row's partition
// key. It is persisted: never change it. (elections uses 1, vvmadapter 2
// and 3, plog's u16 views 19 and 20.)
const PKeyPrefixGalloc uint32 = 16

// MaxNameLen is the longest sequence name, in bytes.
const MaxNameLen = 200

// recordVersion is the first byte of an allocation record without flags;
// recordVersionFlags that of one with flags (retired, adaptive): version 1
// and a trailing flags byte. A record is written as version 1 whenever its
// flags are all clear, so that a sequence never altered stays readable by
// releases that know only version 1; those read a version 2 record as
// ErrCorrupt and hand out nothing from it.
const (
	recordVersion      = 1
	recordVersionFlags = 2
)

// Record flags (the trailing byte of a version 2 record). Persisted: never
// change them.
const (
	flagRetired  = 1 << 0
	flagAdaptive = 1 << 1
	knownFlags   = flagRetired | flagAdaptive
)

// recordFixedLen is the size of a record without its process name.
const recordFixedLen = 1 + 1 + 8*7 + 2

// PKey returns the partition key of sequence name's allocation record:
//
//	pKey  = u32 PKeyPrefixGalloc ‖ name (UTF-8)
//	cCols = u32 0 (StateCCols)
func PKey(name string) []byte {
	b := make([]byte, 0, 4+len(name))
	b = binary.BigEndian.AppendUint32(b, PKeyPrefixGalloc)
	return append(b, name...)
}

// StateCCols returns the clustering key of the allocation record.
func StateCCols() []byte { return []byte{0, 0, 0, 0} }

func validName(name string) error {
	if name == "" || len(name) > MaxNameLen || !utf8.ValidString(name) {
		return fmt.Errorf("%w: %q: want 1..%d bytes of UTF-8", ErrInvalidName, name, MaxNameLen)
	}
	return nil
}

// Record is a sequence's allocation record, as BDR's bdr.sequence_alloc
// shows it: the definition and the allocation history. Every allocation
// replaces it with a compare-and-swap. Its byte layout (all integers
// big-endian) is persisted:
//
//	u8 version (1) ‖ u8 type ‖ i64 chunk size ‖ i64 start ‖ i64 step ‖
//	u64 allocated (values allocated so far) ‖ u64 allocations ‖
//	i64 last allocation (Unix µs, 0: none) ‖ u64 nonce ‖
//	u16 len(process) ‖ process (UTF-8)
//
// Version 2 (written only when a flag is set) is version 1's layout with
// the first byte 2 and one more byte at the end:
//
//	‖ u8 flags (bit 0: retired, bit 1: adaptive; the others 0)
type Record struct {
	Type      Type
	ChunkSize int64
	Start     int64
	Step      int64
	// Allocated is the number of values allocated so far: values
	// Start .. Start+(Allocated-1)*Step belong to some process.
	Allocated uint64
	// Allocations counts the chunks allocated.
	Allocations uint64
	// LastAlloc is the time of the last allocation (zero: none yet).
	LastAlloc time.Time
	// Nonce is unique to the write that stored the record: it tells this
	// process's write from another's when an outcome must be decided by
	// reading.
	Nonce uint64
	// Process is the process that made the last allocation (or created the
	// sequence).
	Process string
	// Retired: the sequence hands out no more chunks (Alter with
	// Change.Retire). It never clears: the values allocated before stay
	// allocated, so no value can repeat.
	Retired bool
	// Adaptive: each process sizes its chunks as Leaf's dynamic step does
	// (see AdaptiveChunkSize); ChunkSize is then the smallest chunk.
	Adaptive bool
}

func (r Record) flags() byte {
	var f byte
	if r.Retired {
		f |= flagRetired
	}
	if r.Adaptive {
		f |= flagAdaptive
	}
	return f
}

// AllocatedUpTo returns the first value not yet allocated (the sequence's
// next chunk starts there), like BDR's seq_allocated_up_to. Once the
// sequence is exhausted it is past the type's maximum: ok is false.
func (r Record) AllocatedUpTo() (v int64, ok bool) {
	if r.Exhausted() {
		return 0, false
	}
	return r.Value(r.Allocated), true
}

// Exhausted reports whether every value has been allocated.
func (r Record) Exhausted() bool { return r.Allocated >= r.Capacity() }

// Capacity returns the number of values the sequence holds in all, at
// most math.MaxUint64 (the full bigint range, 2^64 values, counts
// math.MaxUint64: its last value, math.MaxInt64, is never handed out).
func (r Record) Capacity() uint64 { return capacity(r.Type, r.Start, r.Step) }

// Value returns the value of slot i (the i-th value, from 0).
func (r Record) Value(i uint64) int64 { return r.Start + int64(i)*r.Step }

// MarshalBinary encodes the record in its persisted layout.
func (r Record) MarshalBinary() ([]byte, error) {
	if len(r.Process) > maxProcessLen {
		return nil, fmt.Errorf("galloc: process name of %d bytes, at most %d", len(r.Process), maxProcessLen)
	}
	b := make([]byte, 0, recordFixedLen+len(r.Process)+1)
	version := byte(recordVersion)
	if r.flags() != 0 {
		version = recordVersionFlags
	}
	b = append(b, version, byte(r.Type))
	b = binary.BigEndian.AppendUint64(b, uint64(r.ChunkSize))
	b = binary.BigEndian.AppendUint64(b, uint64(r.Start))
	b = binary.BigEndian.AppendUint64(b, uint64(r.Step))
	b = binary.BigEndian.AppendUint64(b, r.Allocated)
	b = binary.BigEndian.AppendUint64(b, r.Allocations)
	var last int64
	if !r.LastAlloc.IsZero() {
		last = r.LastAlloc.UnixMicro()
	}
	b = binary.BigEndian.AppendUint64(b, uint64(last))
	b = binary.BigEndian.AppendUint64(b, r.Nonce)
	b = binary.BigEndian.AppendUint16(b, uint16(len(r.Process)))
	b = append(b, r.Process...)
	if version == recordVersionFlags {
		b = append(b, r.flags())
	}
	return b, nil
}

// UnmarshalBinary decodes a persisted record; a malformed one is
// ErrCorrupt.
func (r *Record) UnmarshalBinary(b []byte) error {
	if len(b) < recordFixedLen {
		return fmt.Errorf("%w: %d bytes, want at least %d", ErrCorrupt, len(b), recordFixedLen)
	}
	if b[0] != recordVersion && b[0] != recordVersionFlags {
		return fmt.Errorf("%w: version %d, want %d or %d", ErrCorrupt, b[0], recordVersion, recordVersionFlags)
	}
	u := func(i int) uint64 { return binary.BigEndian.Uint64(b[2+8*i:]) }
	n := Record{
		Type:        Type(b[1]),
		ChunkSize:   int64(u(0)),
		Start:       int64(u(1)),
		Step:        int64(u(2)),
		Allocated:   u(3),
		Allocations: u(4),
		Nonce:       u(6),
	}
	if last := int64(u(5)); last != 0 {
		n.LastAlloc = time.UnixMicro(last).UTC()
	}
	pl := int(binary.BigEndian.Uint16(b[recordFixedLen-2:]))
	extra := 0
	if b[0] == recordVersionFlags {
		extra = 1
	}
	if len(b) != recordFixedLen+pl+extra {
		return fmt.Errorf("%w: %d bytes, want %d for a process name of %d (version %d)", ErrCorrupt, len(b), recordFixedLen+pl+extra, pl, b[0])
	}
	n.Process = string(b[recordFixedLen : recordFixedLen+pl])
	if extra == 1 {
		f := b[len(b)-1]
		if f == 0 || f&^knownFlags != 0 {
			return fmt.Errorf("%w: flags %#x", ErrCorrupt, f)
		}
		n.Retired, n.Adaptive = f&flagRetired != 0, f&flagAdaptive != 0
	}
	switch {
	case !n.Type.valid():
		return fmt.Errorf("%w: %v", ErrCorrupt, n.Type)
	case n.ChunkSize <= 0 || n.Step <= 0:
		return fmt.Errorf("%w: chunk size %d, step %d", ErrCorrupt, n.ChunkSize, n.Step)
	case n.Start < n.Type.Min() || n.Start > n.Type.Max():
		return fmt.Errorf("%w: start %d outside %v", ErrCorrupt, n.Start, n.Type)
	case n.Allocated > n.Capacity():
		return fmt.Errorf("%w: %d values allocated of %d", ErrCorrupt, n.Allocated, n.Capacity())
	}
	*r = n
	return nil
}
