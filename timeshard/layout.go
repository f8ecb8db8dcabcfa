package timeshard

import (
	"errors"
	"fmt"
	"time"
)

// Bits of an ID: the sign bit stays 0, so IDs are non-negative int64s.
const idBits = 63

// JSBits is the width of the IDs of JS53Layout: every integer up to
// 2^53-1 (JavaScript's Number.MAX_SAFE_INTEGER) is exact in an IEEE 754
// double, so such IDs survive JSON parsers that read numbers as doubles.
const JSBits = 53

// Default layout: Snowflake's split, 41 bits of milliseconds since
// 2025-01-01 UTC, 10 bits of node ID (1,024 nodes), 12 bits of counter
// (4,096 IDs per millisecond per node). The time field runs out in
// September 2094 (DefaultLayout().RunsOut()); IDs never turn negative.
var defaultEpoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// Bounds of the fields' widths.
const (
	MinTimeBits    = 32 // about 50 days
	MaxNodeBits    = 20
	MaxCounterBits = 22
)

// Layout is how an ID is built (Epoch counts to the millisecond), from the most significant bit down:
//
//	0 (64-Bits high bits) ‖ TimeBits: ms since Epoch ‖ NodeBits: node ID ‖ CounterBits: counter
//
// TimeBits + NodeBits + CounterBits must equal Bits (63 when Bits is 0).
// IDs of one layout sort by time first (to the millisecond), then by node,
// then by counter.
type Layout struct {
	Epoch       time.Time
	TimeBits    uint
	NodeBits    uint
	CounterBits uint
	// Bits is the IDs' width: every ID is below 2^Bits. 0 means 63 (any
	// non-negative int64); JSBits (53) keeps IDs exact in JavaScript.
	Bits uint
}

// DefaultLayout returns the default layout: epoch 2025-01-01 UTC, 41 time,
// 10 node and 12 counter bits.
func DefaultLayout() Layout {
	return Layout{Epoch: defaultEpoch, TimeBits: 41, NodeBits: 10, CounterBits: 12}
}

// JS53Layout returns the 53-bit layout, for IDs that JavaScript's Number
// (an IEEE 754 double) holds exactly: epoch 2025-01-01 UTC, 41 time, 5 node
// and 7 counter bits.
//
//   - 41 + 5 + 7 = 53 bits: the largest ID is 2^53-1 =
//     9,007,199,254,740,991, Number.MAX_SAFE_INTEGER.
//   - Time: 2^41 ms = 2,199,023,255,552 ms, about 69.7 years (as the
//     default layout's): IDs can be made until 2094-09-07T15:47:35.552Z
//     (RunsOut).
//   - Nodes: 2^5 = 32 node IDs, so at most 32 generators (processes) of one
//     name at a time.
//   - Counter: 2^7 = 128 IDs per millisecond per node, 128,000 per second;
//     4,096,000 per second with all 32 nodes.
//
// The bits the default layout spends on 1,024 nodes and 4,096 IDs per
// millisecond are what the 53-bit one gives up; its lifetime is the same.
func JS53Layout() Layout {
	return Layout{Epoch: defaultEpoch, TimeBits: 41, NodeBits: 5, CounterBits: 7, Bits: JSBits}
}

// leafEpoch is Meituan Leaf's twepoch: 1288834974657 ms since the Unix
// epoch (Twitter's Snowflake epoch), 2010-11-04T01:42:54.657Z.
var leafEpoch = time.UnixMilli(1288834974657).UTC()

// LeafLayout returns Meituan Leaf's snowflake layout (SnowflakeIDGenImpl):
// epoch Leaf's twepoch 1288834974657 ms (2010-11-04T01:42:54.657Z), 41
// time, 10 node (Leaf's workerId) and 12 counter (Leaf's sequence) bits,
// so an ID is ((ms - twepoch) << 22) | (node << 12) | counter, Leaf's
// formula, and Leaf's decoder reads it. Its time field runs out in
// September 2080 (RunsOut). Leaf also starts each millisecond's sequence
// at a random 0..99: Options.RandomStart = LeafRandomStart does that.
func LeafLayout() Layout {
	return Layout{Epoch: leafEpoch, TimeBits: 41, NodeBits: 10, CounterBits: 12}
}

// LeafRandomStart is Leaf's bound of a millisecond's first counter value
// (SnowflakeIDGenImpl: RANDOM.nextInt(100)), for Options.RandomStart.
const LeafRandomStart = 100

// IDBits returns the IDs' width: Bits, or 63 when Bits is 0.
func (l Layout) IDBits() uint {
	if l.Bits == 0 {
		return idBits
	}
	return l.Bits
}

// MaxID returns the largest ID the layout can hold (2^IDBits - 1).
func (l Layout) MaxID() int64 { return int64(1)<<l.IDBits() - 1 }

// Validate reports every problem of the layout at once; each error wraps
// ErrInvalidLayout.
func (l Layout) Validate() error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidLayout}, a...)...))
	}
	if l.Epoch.IsZero() {
		bad("Epoch is zero")
	}
	if l.Bits > idBits {
		bad("Bits %d: want at most %d (the sign bit stays 0)", l.Bits, idBits)
	} else if l.TimeBits+l.NodeBits+l.CounterBits != l.IDBits() {
		bad("TimeBits %d + NodeBits %d + CounterBits %d = %d, want %d (Bits; the sign bit stays 0)",
			l.TimeBits, l.NodeBits, l.CounterBits, l.TimeBits+l.NodeBits+l.CounterBits, l.IDBits())
	}
	if l.TimeBits < MinTimeBits || l.TimeBits > idBits {
		bad("TimeBits %d: want %d..%d", l.TimeBits, MinTimeBits, idBits)
	}
	if l.NodeBits < 1 || l.NodeBits > MaxNodeBits {
		bad("NodeBits %d: want 1..%d", l.NodeBits, MaxNodeBits)
	}
	if l.CounterBits < 1 || l.CounterBits > MaxCounterBits {
		bad("CounterBits %d: want 1..%d", l.CounterBits, MaxCounterBits)
	}
	return errors.Join(errs...)
}

// Nodes returns the number of node IDs (2^NodeBits).
func (l Layout) Nodes() uint32 { return 1 << l.NodeBits }

// PerMillisecond returns the number of IDs one node can make per
// millisecond (2^CounterBits).
func (l Layout) PerMillisecond() uint64 { return 1 << l.CounterBits }

// MaxMillis returns the largest time field: milliseconds since Epoch.
func (l Layout) MaxMillis() int64 { return 1<<l.TimeBits - 1 }

// RunsOut returns the first instant the time field cannot hold: IDs can be
// made until just before it.
func (l Layout) RunsOut() time.Time {
	return time.UnixMilli(l.Epoch.UnixMilli() + l.MaxMillis() + 1).UTC()
}

// Compose builds an ID from its fields; it does not check their ranges
// (the generator does).
func (l Layout) Compose(millis int64, node uint32, counter uint64) int64 {
	return millis<<(l.NodeBits+l.CounterBits) | int64(node)<<l.CounterBits | int64(counter)
}

// Millis returns the ID's milliseconds since Epoch.
func (l Layout) Millis(id int64) int64 { return id >> (l.NodeBits + l.CounterBits) }

// Time returns the ID's time, to the millisecond (in UTC).
func (l Layout) Time(id int64) time.Time {
	return time.UnixMilli(l.Epoch.UnixMilli() + l.Millis(id)).UTC()
}

// Node returns the ID's node ID.
func (l Layout) Node(id int64) uint32 { return uint32(id>>l.CounterBits) & (1<<l.NodeBits - 1) }

// Counter returns the ID's per-millisecond counter.
func (l Layout) Counter(id int64) uint64 { return uint64(id) & (1<<l.CounterBits - 1) }

// FromTime returns the smallest ID a generator of this layout makes at t
// (node 0, counter 0): for range queries by time. t is clamped to the
// layout's span.
func (l Layout) FromTime(t time.Time) int64 {
	ms := max(0, min(t.UnixMilli()-l.Epoch.UnixMilli(), l.MaxMillis()))
	return l.Compose(ms, 0, 0)
}
