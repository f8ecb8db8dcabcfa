package voedger

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/cqlseq/cqlseq/isequencer"
)

var (
	// ErrCorrupt: stored PLog bytes do not decode as a Voedger event (or a
	// row's key is not a PLog key). Errors wrapping it name the partition
	// and the offset.
	ErrCorrupt = errors.New("voedger: corrupt PLog event")

	// ErrUnsupportedCodec: the value's codec version is not 1 or 2 (codec
	// 0, Voedger's first, stored system fields differently and is not
	// read). Errors wrapping it name the partition and the offset.
	ErrUnsupportedCodec = errors.New("voedger: unsupported codec version")

	// ErrInvalidOptions wraps every problem NewReader finds in its options.
	ErrInvalidOptions = errors.New("voedger: invalid options")
)

// Voedger's predefined QName IDs of the events that carry no command.
const (
	QNameIDSysError     uint16 = 1 // sys.Error: an invalid event
	QNameIDCUD          uint16 = 2 // sys.CUD
	QNameIDSysCorrupted uint16 = 3 // sys.Corrupted: an overwritten event
)

// Codec versions this package decodes: the first byte of a value.
const (
	Codec1 byte = 1 // system fields mask; CUDs without emptied fields
	Codec2 byte = 2 // CUDs list their emptied fields
)

// System field mask bits of a row.
const (
	MaskID        uint16 = 0x0001
	MaskParentID  uint16 = 0x0002
	MaskContainer uint16 = 0x0004
	MaskIsActive  uint16 = 0x0008
	maskKnown            = MaskID | MaskParentID | MaskContainer | MaskIsActive
)

// Row is the system part of one stored row (a record, an argument object
// or a CUD). User fields are not decoded.
type Row struct {
	// QNameID is the row's type; 0 (NullQName) means no row, and then
	// nothing else is stored.
	QNameID     uint16
	Mask        uint16 // which system fields are stored
	ID          uint64 // sys.ID; 0 when absent
	ParentID    uint64 // sys.ParentID; 0 when absent
	ContainerID uint16 // sys.Container; 0 when absent
	// Inactive: the row stores sys.IsActive = false (Voedger writes the
	// field only for inactive rows).
	Inactive bool
}

// Object is an argument object: its row and its children, in stored
// (pre-order) order.
type Object struct {
	Row
	Children []Object
}

// CUD is one created or updated record of an event.
type CUD struct {
	Row
	// Emptied lists the user-field indexes an update cleared (codec 2).
	Emptied []uint16
}

// Event is one decoded Voedger PLog event.
type Event struct {
	// Partition and Offset are the row's key.
	Partition isequencer.PartitionID
	Offset    isequencer.PLogOffset

	Codec   byte
	QNameID uint16

	// From the value; Decode checks that they equal the key.
	HandlingPartition isequencer.PartitionID
	PLogOffset        isequencer.PLogOffset

	WSID         isequencer.WSID // never 0
	WLogOffset   uint64
	RegisteredAt int64 // Unix ms
	Synced       bool
	DeviceID     uint16 // when Synced
	SyncedAt     int64  // Unix ms, when Synced

	// Valid is false for sys.Error and sys.Corrupted events: they keep
	// only the fields above, the three below, and no argument or CUDs.
	Valid         bool
	Error         string
	OriginalQName string
	// OriginalBytes are the original event's bytes (a sys.Corrupted
	// event's former PLog value); empty when the event had an unlogged
	// argument. They alias the decoded value.
	OriginalBytes []byte
	// Original is OriginalBytes decoded, for a sys.Corrupted event whose
	// bytes are not empty; nil otherwise.
	Original *Event
	// OriginalErr says why Original is nil although the bytes are not
	// empty: they did not decode and the reader was told to accept that
	// (ReaderOptions.OpaqueCorrupted). Nil otherwise.
	OriginalErr error

	Argument Object // QNameID 0: none
	Unlogged Object // values masked by Voedger; QNameID 0: none
	Creates  []CUD
	Updates  []CUD
}

// ArgumentIDs returns the non-zero IDs of the argument tree in stored
// (pre-order) order: an ODoc argument's records carry IDs, an Object
// argument's rows do not.
func (e *Event) ArgumentIDs() []uint64 {
	var ids []uint64
	var walk func(o *Object)
	walk = func(o *Object) {
		if o.Mask&MaskID != 0 && o.ID != 0 {
			ids = append(ids, o.ID)
		}
		for i := range o.Children {
			walk(&o.Children[i])
		}
	}
	walk(&e.Argument)
	return ids
}

// CreatedIDs returns the IDs of the event's CUD creates, in stored order.
func (e *Event) CreatedIDs() []uint64 {
	ids := make([]uint64, 0, len(e.Creates))
	for _, c := range e.Creates {
		ids = append(ids, c.ID)
	}
	return ids
}

// maxDepth bounds the nesting of argument objects and of sys.Corrupted
// events inside each other, so that hostile bytes cannot exhaust the stack.
const maxDepth = 64

// Decode decodes value, the stored PLog value at offset off of partition
// part, into a new Event. value must be codec 1 or 2 and decode to its
// last byte; the event must name part and off, a non-zero WSID, and, for a
// sys.Corrupted event with original bytes, an original event of the same
// workspace that decodes too. Any error wraps ErrUnsupportedCodec or
// ErrCorrupt and names the partition and the offset; Decode never panics.
// The Event's byte slices alias value.
func Decode(part isequencer.PartitionID, off isequencer.PLogOffset, value []byte) (*Event, error) {
	return decodeAt(part, off, value, false)
}

// decodeAt is Decode; with opaque, original bytes of a sys.Corrupted event
// that do not decode are kept in Event.OriginalErr instead of failing.
func decodeAt(part isequencer.PartitionID, off isequencer.PLogOffset, value []byte, opaque bool) (*Event, error) {
	e, err := decodeEvent(value, 0, opaque)
	if err == nil && (e.HandlingPartition != part || e.PLogOffset != off) {
		err = fmt.Errorf("%w: the value names partition %d offset %d", ErrCorrupt, e.HandlingPartition, e.PLogOffset)
	}
	if err != nil {
		return nil, fmt.Errorf("voedger: partition %d offset %d: %w", part, off, err)
	}
	e.Partition, e.Offset = part, off
	return e, nil
}

func decodeEvent(b []byte, depth int, opaque bool) (*Event, error) {
	d := &cursor{b: b}
	e := &Event{Codec: d.u8(name{what: "codec"})}
	if d.err != nil {
		return nil, d.err
	}
	if e.Codec != Codec1 && e.Codec != Codec2 {
		return nil, fmt.Errorf("%w %d (want %d or %d)", ErrUnsupportedCodec, e.Codec, Codec1, Codec2)
	}
	if e.QNameID = d.u16(name{what: "event QName ID"}); d.err == nil && e.QNameID == 0 {
		return nil, fmt.Errorf("%w: event with the null QName", ErrCorrupt)
	}
	e.HandlingPartition = isequencer.PartitionID(d.u16(name{what: "partition"}))
	e.PLogOffset = isequencer.PLogOffset(d.u64(name{what: "PLog offset"}))
	e.WSID = isequencer.WSID(d.u64(name{what: "WSID"}))
	e.WLogOffset = d.u64(name{what: "WLog offset"})
	e.RegisteredAt = int64(d.u64(name{what: "registered-at"}))
	if e.Synced = d.bool(name{what: "sync flag"}); e.Synced {
		e.DeviceID = d.u16(name{what: "device ID"})
		e.SyncedAt = int64(d.u64(name{what: "synced-at"}))
	}
	e.Valid = d.bool(name{what: "valid flag"})
	if d.err == nil && e.WSID == 0 {
		return nil, fmt.Errorf("%w: WSID 0", ErrCorrupt)
	}
	if !e.Valid {
		e.Error = string(d.bytes(int(d.u16(name{what: "error length"})), name{what: "error text"}))
		e.OriginalQName = string(d.bytes(int(d.u16(name{what: "original QName length"})), name{what: "original QName"}))
		e.OriginalBytes = d.bytes(int(d.u32(name{what: "original bytes length"})), name{what: "original bytes"})
	} else {
		d.object(&e.Argument, 0, name{what: "argument"})
		d.object(&e.Unlogged, 0, name{what: "unlogged argument"})
		e.Creates = d.cuds(e.Codec, name{what: "create"})
		e.Updates = d.cuds(e.Codec, name{what: "update"})
	}
	if d.err != nil {
		return nil, d.err
	}
	if d.pos != len(b) {
		return nil, fmt.Errorf("%w: %d bytes after the event's end at byte %d", ErrCorrupt, len(b)-d.pos, d.pos)
	}
	if e.QNameID == QNameIDSysCorrupted && !e.Valid && len(e.OriginalBytes) > 0 {
		if depth >= maxDepth {
			return nil, fmt.Errorf("%w: sys.Corrupted events nested deeper than %d", ErrCorrupt, maxDepth)
		}
		o, err := decodeEvent(e.OriginalBytes, depth+1, opaque)
		if err == nil && o.WSID != e.WSID {
			err = fmt.Errorf("%w: sys.Corrupted event of WSID %d carries an event of WSID %d", ErrCorrupt, e.WSID, o.WSID)
		}
		switch {
		case err != nil && opaque:
			e.OriginalErr = err
		case err != nil:
			return nil, fmt.Errorf("original bytes of the sys.Corrupted event: %w", err)
		default:
			e.Original = o
		}
	}
	return e, nil
}

// cursor reads big-endian fields from b, remembering the first error.
type cursor struct {
	b   []byte
	pos int
	err error
}

func (d *cursor) take(n int, what name) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || len(d.b)-d.pos < n {
		d.err = fmt.Errorf("%w: %s: needs %d bytes at byte %d, %d left", ErrCorrupt, what, n, d.pos, len(d.b)-d.pos)
		return nil
	}
	s := d.b[d.pos : d.pos+n : d.pos+n]
	d.pos += n
	return s
}

func (d *cursor) u8(what name) byte {
	if s := d.take(1, what); s != nil {
		return s[0]
	}
	return 0
}

func (d *cursor) u16(what name) uint16 {
	if s := d.take(2, what); s != nil {
		return binary.BigEndian.Uint16(s)
	}
	return 0
}

func (d *cursor) u32(what name) uint32 {
	if s := d.take(4, what); s != nil {
		return binary.BigEndian.Uint32(s)
	}
	return 0
}

func (d *cursor) u64(what name) uint64 {
	if s := d.take(8, what); s != nil {
		return binary.BigEndian.Uint64(s)
	}
	return 0
}

func (d *cursor) bool(what name) bool {
	switch v := d.u8(what); {
	case d.err != nil:
	case v > 1:
		d.err = fmt.Errorf("%w: %s: byte %d at byte %d, want 0 or 1", ErrCorrupt, what, v, d.pos-1)
	default:
		return v == 1
	}
	return false
}

func (d *cursor) bytes(n int, what name) []byte {
	if n == 0 || d.err != nil {
		return nil
	}
	return d.take(n, what)
}

// row reads a row's system fields and skips its user fields.
func (d *cursor) row(r *Row, what name) {
	if r.QNameID = d.u16(what.with(" QName ID")); r.QNameID == 0 || d.err != nil {
		return
	}
	if r.Mask = d.u16(what.with(" system fields mask")); d.err == nil && r.Mask&^maskKnown != 0 {
		d.err = fmt.Errorf("%w: %s: system fields mask %#04x has unknown bits", ErrCorrupt, what, r.Mask)
		return
	}
	if r.Mask&MaskID != 0 {
		r.ID = d.u64(what.with(" ID"))
	}
	if r.Mask&MaskParentID != 0 {
		r.ParentID = d.u64(what.with(" parent ID"))
	}
	if r.Mask&MaskContainer != 0 {
		r.ContainerID = d.u16(what.with(" container ID"))
	}
	if r.Mask&MaskIsActive != 0 {
		r.Inactive = !d.bool(what.with(" IsActive"))
	}
	d.take(int(d.u32(what.with(" user fields length"))), what.with(" user fields"))
}

// object reads an argument object and its children.
func (d *cursor) object(o *Object, depth int, what name) {
	if depth > maxDepth {
		d.err = fmt.Errorf("%w: %s: objects nested deeper than %d", ErrCorrupt, what, maxDepth)
		return
	}
	if d.row(&o.Row, what); o.QNameID == 0 || d.err != nil {
		return
	}
	n := int(d.u16(what.with(" children count")))
	if d.err != nil || n == 0 {
		return
	}
	// Each child takes at least 2 bytes: do not trust n for the allocation.
	o.Children = make([]Object, 0, min(n, (len(d.b)-d.pos)/2))
	for i := 0; i < n && d.err == nil; i++ {
		o.Children = append(o.Children, Object{})
		d.object(&o.Children[i], depth+1, what.child())
	}
}

// cuds reads a count and that many CUD rows.
func (d *cursor) cuds(codec byte, what name) []CUD {
	n := int(d.u16(what.with("s count")))
	if d.err != nil || n == 0 {
		return nil
	}
	out := make([]CUD, 0, min(n, (len(d.b)-d.pos)/2))
	for i := 0; i < n && d.err == nil; i++ {
		var c CUD
		if d.row(&c.Row, what); d.err == nil && c.QNameID == 0 {
			d.err = fmt.Errorf("%w: %s %d has the null QName", ErrCorrupt, what, i)
		}
		if codec >= Codec2 {
			if k := int(d.u16(what.with(" emptied fields count"))); k > 0 {
				idx := d.take(2*k, what.with(" emptied field indexes"))
				for j := 0; j+1 < len(idx); j += 2 {
					c.Emptied = append(c.Emptied, binary.BigEndian.Uint16(idx[j:]))
				}
			}
		}
		out = append(out, c)
	}
	return out
}

// name names a field in error messages. Decoding passes names by value
// and builds the text (String) only when it reports an error: building
// it for every field read was most of the decoding's allocation.
type name struct {
	what  string // the part, such as "argument" or "create"
	depth int    // how deep in the argument's children (" child" each)
	field string // the field of the part, such as " QName ID"
}

// with returns n naming field of its part.
func (n name) with(field string) name { n.field = field; return n }

// child returns n naming a child object of its part.
func (n name) child() name { n.depth++; return n }

func (n name) String() string {
	return n.what + strings.Repeat(" child", n.depth) + n.field
}
