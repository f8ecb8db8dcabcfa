package timeshard

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/cqlseq/cqlseq/elections"
	"github.com/cqlseq/cqlseq/storage"
)

// A generator name's layout row records the layout its IDs are made in,
// so that a process opened with another layout (another epoch or bit
// split) is refused when its IDs could be smaller than IDs already made:
//
//	pKey  = NodePKey(name, LayoutNode)
//	cCols = u32 3
//	value = EncodeLayout(layout)
//
// Open writes it when it is missing, and replaces it when the change
// passes CheckLayoutChange.

// LayoutNode is the node field of the layout row's partition key: above
// every node ID (NodeBits is at most MaxNodeBits), so no lease or
// high-water row shares its partition. It is persisted: never change it.
const LayoutNode uint32 = math.MaxUint32

// rowLayout is the clustering key of the layout row (after elections'
// lease and epoch rows and the high-water row).
const rowLayout elections.Row = 3

// layoutRecordVersion is the first byte of EncodeLayout's value.
const layoutRecordVersion = 1

// layoutRecordLen is the length of EncodeLayout's value.
const layoutRecordLen = 13

// LayoutChangeMargin is how far ahead CheckLayoutChange looks at the
// previous layout: the new layout's first ID must exceed every ID the
// previous one can make until this long after the change. Processes still
// making IDs in the previous layout must stop within it (a rolling change
// of a cluster's layout finishes within a day); a process opened later
// with the previous layout is refused.
const LayoutChangeMargin = 24 * time.Hour

// EncodeLayout returns the layout row's value (persisted: never change
// it), 13 bytes:
//
//	u8 version (1) ‖ u8 TimeBits ‖ u8 NodeBits ‖ u8 CounterBits ‖ u8 IDBits ‖
//	i64 Epoch in milliseconds since the Unix epoch (big-endian)
//
// Layouts that make the same IDs (Bits 0 and 63; epochs within one
// millisecond) encode alike.
func EncodeLayout(l Layout) []byte {
	b := []byte{layoutRecordVersion, byte(l.TimeBits), byte(l.NodeBits), byte(l.CounterBits), byte(l.IDBits())}
	return binary.BigEndian.AppendUint64(b, uint64(l.Epoch.UnixMilli()))
}

// DecodeLayout reads EncodeLayout's value; Bits is 0 for 63-bit IDs. A
// value of another length or version, or not a valid layout, is an error.
func DecodeLayout(b []byte) (Layout, error) {
	if len(b) != layoutRecordLen || b[0] != layoutRecordVersion {
		return Layout{}, fmt.Errorf("timeshard: layout record of %d bytes, version %d: want %d bytes, version %d",
			len(b), firstByte(b), layoutRecordLen, layoutRecordVersion)
	}
	l := Layout{
		Epoch:    time.UnixMilli(int64(binary.BigEndian.Uint64(b[5:]))).UTC(),
		TimeBits: uint(b[1]), NodeBits: uint(b[2]), CounterBits: uint(b[3]), Bits: uint(b[4]),
	}
	if l.Bits == idBits {
		l.Bits = 0
	}
	if err := l.Validate(); err != nil {
		return Layout{}, fmt.Errorf("timeshard: layout record: %w", err)
	}
	return l, nil
}

func firstByte(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	return int(b[0])
}

// CheckLayoutChange reports whether a generator name whose IDs were made
// in layout prev may make them in next from at on: nil when both make the
// same IDs, or when next's smallest ID at at (next.FromTime(at)) exceeds
// the largest ID prev can make until at+LayoutChangeMargin (the last node
// and counter of that millisecond, or of prev's last one). Then every ID
// of next made from at on is above every ID of prev made before
// at+LayoutChangeMargin: IDs neither repeat nor go back across the change.
// Otherwise the error wraps ErrLayoutChange and says by how much.
//
// Moving the epoch earlier by more than LayoutChangeMargin with the same
// split passes (Leaf's epoch, 2010, after cqlseq's, 2025: every ID grows
// by about 15 years of milliseconds); moving it later, or to fewer bits,
// is refused.
func CheckLayoutChange(prev, next Layout, at time.Time) error {
	if bytes.Equal(EncodeLayout(prev), EncodeLayout(next)) {
		return nil
	}
	until := at.Add(LayoutChangeMargin)
	ms := until.UnixMilli() - prev.Epoch.UnixMilli()
	if ms < 0 {
		return nil // prev can make no ID before its epoch
	}
	pmax := prev.Compose(min(ms, prev.MaxMillis()), prev.Nodes()-1, prev.PerMillisecond()-1)
	nmin := next.FromTime(at)
	if nmin > pmax {
		return nil
	}
	return fmt.Errorf("%w: from %v to %v: the new layout's first ID at %v, %d, is not above %d, the largest the previous layout can make by %v (LayoutChangeMargin %v later): new IDs would repeat or sort before ones already made",
		ErrLayoutChange, describeLayout(prev), describeLayout(next), at.UTC().Format(time.RFC3339), nmin, pmax,
		until.UTC().Format(time.RFC3339), LayoutChangeMargin)
}

// describeLayout is a layout as the errors name it: epoch and split.
func describeLayout(l Layout) string {
	return fmt.Sprintf("epoch %s, %d/%d/%d bits", l.Epoch.UTC().Format("2006-01-02T15:04:05.000Z07:00"), l.TimeBits, l.NodeBits, l.CounterBits)
}

// ReadLayout returns the layout recorded for generator name; ok is false
// when none is (no generator of name was opened since layout rows exist).
func ReadLayout(ctx context.Context, st storage.Storage, name string) (l Layout, ok bool, err error) {
	v, ok, err := st.Get(ctx, NodePKey(name, LayoutNode), elections.CCols(rowLayout))
	if err != nil || !ok {
		return Layout{}, false, err
	}
	l, err = DecodeLayout(v)
	return l, err == nil, err
}

// checkLayoutRecord records l as generator name's layout, or refuses it
// (ErrLayoutChange) when the recorded one differs and the change does not
// pass CheckLayoutChange at now. Writes are conditional: of two processes
// recording different layouts at once, the second checks against the
// first's.
func checkLayoutRecord(ctx context.Context, st storage.Storage, name string, l Layout, now time.Time) error {
	pk, cc, want := NodePKey(name, LayoutNode), elections.CCols(rowLayout), EncodeLayout(l)
	for range 5 {
		v, ok, err := st.Get(ctx, pk, cc)
		if err != nil {
			return fmt.Errorf("timeshard: reading the layout of %q: %w", name, err)
		}
		var done bool
		switch {
		case !ok:
			done, err = st.InsertIfNotExists(ctx, pk, cc, want, 0)
		case bytes.Equal(v, want):
			return nil
		default:
			prev, derr := DecodeLayout(v)
			if derr != nil {
				return fmt.Errorf("timeshard: generator %q: %w", name, derr)
			}
			if cerr := CheckLayoutChange(prev, l, now); cerr != nil {
				return fmt.Errorf("timeshard: generator %q: %w", name, cerr)
			}
			done, err = st.CompareAndSwap(ctx, pk, cc, v, want, 0)
		}
		switch {
		case errors.Is(err, storage.ErrUnknownOutcome):
			continue // read again: the write may have been applied
		case err != nil:
			return fmt.Errorf("timeshard: recording the layout of %q: %w", name, err)
		case done:
			return nil
		}
	}
	return fmt.Errorf("timeshard: recording the layout of %q: the row kept changing", name)
}
