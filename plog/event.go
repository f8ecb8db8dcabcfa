package plog

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cqlseq/cqlseq/isequencer"
)

// RecordID identifies a table record of a workspace. 0 is not a valid ID.
type RecordID uint64

// SeqNumber is the largest number an event's transaction took of one
// sequence.
type SeqNumber struct {
	SeqID  isequencer.SeqID
	Number isequencer.Number
}

// Event is one entry of a partition's PLog.
type Event struct {
	// Partition and Offset are the event's key; they are not part of the
	// encoded body. Offsets start at 1.
	Partition isequencer.PartitionID
	Offset    isequencer.PLogOffset

	// WSID is the event's workspace; never 0.
	WSID isequencer.WSID
	// WSKind is the workspace's kind.
	WSKind isequencer.WSKind
	// WLogOffset is the event's offset in its workspace's log; 0 if none.
	WLogOffset uint64
	// Numbers lists, per sequence, the largest number the event's
	// transaction took (conventionally one entry per SeqID; readers take the
	// largest). Numbers are never 0.
	Numbers []SeqNumber
	// Records lists the IDs of the table records the event created, in
	// the order they were created. IDs are never 0.
	Records []RecordID
	// Payload is opaque to plog.
	Payload []byte

	// Skip > 0 makes the event a gap marker (FormatSkip): offsets
	// Offset+1 .. Offset+Skip hold no event and never will, and the next
	// event is at Offset+Skip+1. A marker has no other field: WSID 0, no
	// numbers, records or payload. `cqlseq advance` writes one to move a
	// restored PLog's next offset past the offsets handed out before the
	// restore (docs/operations.md "Backup and restore").
	Skip uint64
	// Void, on a gap marker, says why its offsets hold nothing
	// (FormatVoid): writes may have been in flight there whose outcome
	// nobody knows (an earlier owner's, or this owner's own), and the
	// marker abandons them: whatever lands at Offset+1 .. Offset+Skip is
	// read by no reader, and no command's event is there. A gap marker
	// without Void is `cqlseq advance`'s: a restore lost what was there.
	Void bool
}

// MaxSkip is the largest Event.Skip: 2^48 offsets, far above any gap a
// restore needs, so that Offset+Skip+1 cannot overflow.
const MaxSkip = 1 << 48

// NextOffset returns the offset of the event after e: Offset+1, or past a
// gap marker's skipped offsets.
func (e *Event) NextOffset() isequencer.PLogOffset {
	return e.Offset + 1 + isequencer.PLogOffset(e.Skip)
}

// Encoding format versions: the first byte of an encoded event.
const (
	// FormatV1 is:
	//
	//	u8 1
	//	uvarint WSID ‖ uvarint WSKind ‖ uvarint WLogOffset
	//	uvarint n ‖ n × (uvarint SeqID ‖ uvarint Number)
	//	uvarint m ‖ uvarint Records[0] ‖ (m-1) × varint (Records[i] - Records[i-1])
	//	uvarint len(Payload) ‖ Payload
	//
	// Record IDs are delta-encoded (zigzag varints, modular arithmetic):
	// one event's records usually have consecutive IDs, one byte each.
	FormatV1 byte = 1

	// FormatSkip is a gap marker (Event.Skip) of a restore:
	//
	//	u8 2 ‖ uvarint Skip
	FormatSkip byte = 2

	// FormatVoid is a gap marker that abandons writes in doubt
	// (Event.Void), written by an owner that takes a partition over after
	// an owner whose writes may land late (docs/design.md "Late writes"),
	// or by Settle to make an idle partition's offsets final:
	//
	//	u8 3 ‖ uvarint Skip
	FormatVoid byte = 3
)

// AppendEncoded appends the encoding of e (FormatV1, or FormatSkip for a
// gap marker) to dst. It reports an event no reader would accept: WSID 0,
// a Number 0, a record ID 0, or a gap marker above MaxSkip or with any
// other field set.
func AppendEncoded(dst []byte, e *Event) ([]byte, error) {
	if e.Skip > 0 {
		if e.Skip > MaxSkip || e.WSID != 0 || e.WSKind != 0 || e.WLogOffset != 0 || len(e.Numbers) > 0 || len(e.Records) > 0 || len(e.Payload) > 0 {
			return dst, fmt.Errorf("plog: gap marker skipping %d offsets: want 1..%d and no other field", e.Skip, uint64(MaxSkip))
		}
		format := FormatSkip
		if e.Void {
			format = FormatVoid
		}
		dst = append(dst, format)
		return binary.AppendUvarint(dst, e.Skip), nil
	}
	if e.Void {
		return dst, errors.New("plog: Void set on an event that is not a gap marker (Skip 0)")
	}
	if e.WSID == 0 {
		return dst, errors.New("plog: event with WSID 0")
	}
	dst = append(dst, FormatV1)
	dst = binary.AppendUvarint(dst, uint64(e.WSID))
	dst = binary.AppendUvarint(dst, uint64(e.WSKind))
	dst = binary.AppendUvarint(dst, e.WLogOffset)
	dst = binary.AppendUvarint(dst, uint64(len(e.Numbers)))
	for _, n := range e.Numbers {
		if n.Number == 0 {
			return dst, fmt.Errorf("plog: event of WSID %d: SeqID %d with number 0", e.WSID, n.SeqID)
		}
		dst = binary.AppendUvarint(dst, uint64(n.SeqID))
		dst = binary.AppendUvarint(dst, uint64(n.Number))
	}
	dst = binary.AppendUvarint(dst, uint64(len(e.Records)))
	var prev uint64
	for i, id := range e.Records {
		if id == 0 {
			return dst, fmt.Errorf("plog: event of WSID %d: record ID 0", e.WSID)
		}
		if i == 0 {
			dst = binary.AppendUvarint(dst, uint64(id))
		} else {
			dst = binary.AppendVarint(dst, int64(uint64(id)-prev))
		}
		prev = uint64(id)
	}
	dst = binary.AppendUvarint(dst, uint64(len(e.Payload)))
	return append(dst, e.Payload...), nil
}

// Decode decodes b, the stored body of the event at offset off of
// partition part, into e. It reuses e's Numbers and Records; e.Payload
// aliases b. Any error wraps ErrCorrupt and names the partition and the
// offset; Decode never panics on bad bytes.
func Decode(part isequencer.PartitionID, off isequencer.PLogOffset, b []byte, e *Event) error {
	if err := decode(b, e); err != nil {
		return fmt.Errorf("%w: partition %d offset %d: %w", ErrCorrupt, part, off, err)
	}
	e.Partition, e.Offset = part, off
	return nil
}

// decoder reads varints from b, remembering the first error.
type decoder struct {
	b   []byte
	pos int
	err error
}

func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.pos:])
	if n <= 0 {
		d.fail(what, n)
		return 0
	}
	d.pos += n
	return v
}

func (d *decoder) varint(what string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b[d.pos:])
	if n <= 0 {
		d.fail(what, n)
		return 0
	}
	d.pos += n
	return v
}

func (d *decoder) fail(what string, n int) {
	if n == 0 {
		d.err = fmt.Errorf("truncated at byte %d reading %s", d.pos, what)
	} else {
		d.err = fmt.Errorf("varint overflow at byte %d reading %s", d.pos, what)
	}
}

func (d *decoder) remaining() int { return len(d.b) - d.pos }

func decode(b []byte, e *Event) error {
	if len(b) == 0 {
		return errors.New("empty body")
	}
	if b[0] == FormatSkip || b[0] == FormatVoid {
		return decodeSkip(b, e)
	}
	if b[0] != FormatV1 {
		return fmt.Errorf("unknown format version %d", b[0])
	}
	d := decoder{b: b, pos: 1}
	ws := d.uvarint("WSID")
	kind := d.uvarint("WSKind")
	wlog := d.uvarint("WLogOffset")
	nNums := d.uvarint("number count")
	if d.err != nil {
		return d.err
	}
	switch {
	case ws == 0:
		return errors.New("WSID 0")
	case kind > 0xFFFF:
		return fmt.Errorf("WSKind %d out of range", kind)
	case nNums > uint64(d.remaining()/2): // each pair takes at least 2 bytes
		return fmt.Errorf("number count %d exceeds the %d bytes left", nNums, d.remaining())
	}
	nums := e.Numbers[:0]
	for range nNums {
		id := d.uvarint("SeqID")
		n := d.uvarint("number")
		if d.err != nil {
			return d.err
		}
		if id > 0xFFFF {
			return fmt.Errorf("SeqID %d out of range", id)
		}
		if n == 0 {
			return fmt.Errorf("SeqID %d with number 0", id)
		}
		nums = append(nums, SeqNumber{SeqID: isequencer.SeqID(id), Number: isequencer.Number(n)})
	}
	nRecs := d.uvarint("record count")
	if d.err != nil {
		return d.err
	}
	if nRecs > uint64(d.remaining()) { // each record takes at least 1 byte
		return fmt.Errorf("record count %d exceeds the %d bytes left", nRecs, d.remaining())
	}
	recs := e.Records[:0]
	var prev uint64
	for i := range nRecs {
		var id uint64
		if i == 0 {
			id = d.uvarint("record ID")
		} else {
			id = prev + uint64(d.varint("record ID delta"))
		}
		if d.err != nil {
			return d.err
		}
		if id == 0 {
			return fmt.Errorf("record ID 0 at index %d", i)
		}
		recs = append(recs, RecordID(id))
		prev = id
	}
	nPay := d.uvarint("payload length")
	if d.err != nil {
		return d.err
	}
	if nPay > uint64(d.remaining()) {
		return fmt.Errorf("payload length %d exceeds the %d bytes left", nPay, d.remaining())
	}
	end := d.pos + int(nPay)
	if end != len(b) {
		return fmt.Errorf("%d trailing bytes", len(b)-end)
	}
	*e = Event{
		WSID:       isequencer.WSID(ws),
		WSKind:     isequencer.WSKind(kind),
		WLogOffset: wlog,
		Numbers:    nums,
		Records:    recs,
		Payload:    b[d.pos:end:end],
	}
	return nil
}

func decodeSkip(b []byte, e *Event) error {
	d := decoder{b: b, pos: 1}
	n := d.uvarint("skipped offsets")
	switch {
	case d.err != nil:
		return d.err
	case n == 0 || n > MaxSkip:
		return fmt.Errorf("gap marker skipping %d offsets, want 1..%d", n, uint64(MaxSkip))
	case d.pos != len(b):
		return fmt.Errorf("%d trailing bytes", len(b)-d.pos)
	}
	*e = Event{Numbers: e.Numbers[:0], Records: e.Records[:0], Skip: n, Void: b[0] == FormatVoid}
	return nil
}
