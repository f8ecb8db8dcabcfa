package galloc

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"time"
)

// Type is the integer type a sequence's values must fit, as BDR's galloc
// sequences take it from the column type. It sets the default chunk size and
// the largest value.
type Type uint8

// Types. Values are persisted in the allocation record: never change them.
const (
	// SmallInt values fit int16; default chunk 1,000.
	SmallInt Type = 1
	// Integer values fit int32; default chunk 1,000,000.
	Integer Type = 2
	// BigInt values fit int64; default chunk 1,000,000,000.
	BigInt Type = 3
)

func (t Type) String() string {
	switch t {
	case SmallInt:
		return "smallint"
	case Integer:
		return "integer"
	case BigInt:
		return "bigint"
	}
	return fmt.Sprintf("Type(%d)", uint8(t))
}

// Max returns the largest value of the type.
func (t Type) Max() int64 {
	switch t {
	case SmallInt:
		return math.MaxInt16
	case Integer:
		return math.MaxInt32
	}
	return math.MaxInt64
}

// Min returns the smallest value of the type.
func (t Type) Min() int64 {
	switch t {
	case SmallInt:
		return math.MinInt16
	case Integer:
		return math.MinInt32
	}
	return math.MinInt64
}

// DefaultChunkSize returns BDR's chunk size for the type.
func (t Type) DefaultChunkSize() int64 {
	switch t {
	case SmallInt:
		return 1_000
	case Integer:
		return 1_000_000
	}
	return 1_000_000_000
}

func (t Type) valid() bool { return t >= SmallInt && t <= BigInt }

// Defaults of Options.
const (
	DefaultType         = BigInt
	DefaultStart        = 1
	DefaultStep         = 1
	DefaultPrefetchAt   = 0.5
	DefaultMaxAttempts  = 32
	DefaultBackoffBase  = time.Millisecond
	DefaultBackoffMax   = 200 * time.Millisecond
	DefaultFetchTimeout = 10 * time.Second
	maxProcessLen       = 200
)

// Options configure a Sequence. The definition fields (Type, ChunkSize,
// Start, Step) are stored with the sequence by the first process that
// opens it; every later Open must give the same ones.
type Options struct {
	// Type bounds the values. Default BigInt.
	Type Type
	// ChunkSize is the number of values one allocation reserves: at least
	// 1 and at most the number of values the type holds from Start on.
	// EnsureDefaults turns 0 into Type.DefaultChunkSize(); Validate rejects
	// 0.
	ChunkSize int64
	// Start is the first value; it must lie within Type. Default 1 (0
	// means the default unless StartZero is set).
	Start int64
	// StartZero makes Start 0 the first value (Start 0 otherwise means
	// the default, 1).
	StartZero bool
	// Step is the difference between consecutive values (the offset
	// between them): values are Start, Start+Step, Start+2*Step, ...
	// Default 1; it must be positive.
	Step int64

	// Adaptive turns on Leaf's dynamic step for a sequence Open creates
	// (AdaptiveChunkSize): it is stored with the sequence, and Alter
	// changes it; Open does not compare it with a stored sequence's.
	Adaptive bool
	// StoredChunkSize makes Open take the stored sequence's chunk size
	// instead of comparing it with ChunkSize (which then only matters when
	// Open creates the sequence): for a process that follows Alter, as the
	// ID service does.
	StoredChunkSize bool

	// PrefetchAt is the fraction of the current chunk handed out after
	// which the reserved chunk is fetched in the background, in (0, 1].
	// Default 0.5.
	PrefetchAt float64
	// NoPrefetch fetches a chunk only when the current one is exhausted
	// (one chunk held at a time; callers wait for every fetch).
	NoPrefetch bool

	// MaxAttempts bounds the compare-and-swap attempts of one chunk
	// allocation; beyond it the allocation fails with ErrContention.
	// Default 32.
	MaxAttempts int
	// BackoffBase and BackoffMax bound the jittered exponential pause
	// between attempts. Defaults 1 ms and 200 ms.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// FetchTimeout bounds one chunk allocation (all its attempts).
	// Default 10 s.
	FetchTimeout time.Duration

	// Process names this process in the allocation record. Default
	// "host:pid:random".
	Process string
	// Now is the clock of the record's last allocation time. Default
	// time.Now.
	Now func() time.Time
	// Logger receives background allocation failures. Default
	// slog.Default().
	Logger *slog.Logger
}

// EnsureDefaults fills zero fields with their defaults.
func (o *Options) EnsureDefaults() {
	if o.Type == 0 {
		o.Type = DefaultType
	}
	if o.ChunkSize == 0 && o.Type.valid() {
		o.ChunkSize = o.Type.DefaultChunkSize()
	}
	if o.Start == 0 && !o.StartZero {
		o.Start = DefaultStart
	}
	if o.Step == 0 {
		o.Step = DefaultStep
	}
	if o.PrefetchAt == 0 {
		o.PrefetchAt = DefaultPrefetchAt
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.BackoffBase == 0 {
		o.BackoffBase = DefaultBackoffBase
	}
	if o.BackoffMax == 0 {
		o.BackoffMax = DefaultBackoffMax
	}
	if o.FetchTimeout == 0 {
		o.FetchTimeout = DefaultFetchTimeout
	}
	if o.Process == "" {
		o.Process = defaultProcess()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

func defaultProcess() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "unknown-host"
	}
	if len(h) > 64 {
		h = h[:64]
	}
	return h + ":" + strconv.Itoa(os.Getpid()) + ":" + strconv.FormatUint(rand.Uint64()&0xffffffff, 16)
}

// Validate reports every invalid field at once; each error wraps
// ErrInvalidOptions (and ErrStartOutOfRange for a Start outside Type).
func (o *Options) Validate() error {
	var errs []error
	bad := func(sentinel error, format string, a ...any) {
		if sentinel != ErrInvalidOptions {
			format = "%w: " + format
			a = append([]any{sentinel}, a...)
		}
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, a...)...))
	}
	if !o.Type.valid() {
		bad(ErrInvalidOptions, "%v: want SmallInt, Integer or BigInt", o.Type)
	}
	if o.ChunkSize <= 0 {
		bad(ErrInvalidOptions, "ChunkSize %d: must be at least 1", o.ChunkSize)
	}
	if o.Step <= 0 {
		bad(ErrInvalidOptions, "Step %d: must be positive", o.Step)
	}
	if o.Type.valid() {
		if o.Start < o.Type.Min() || o.Start > o.Type.Max() {
			bad(ErrStartOutOfRange, "Start %d is outside %v [%d, %d]", o.Start, o.Type, o.Type.Min(), o.Type.Max())
		} else if o.ChunkSize > 0 && o.Step > 0 {
			if n := capacity(o.Type, o.Start, o.Step); uint64(o.ChunkSize) > n {
				bad(ErrInvalidOptions, "ChunkSize %d exceeds the %d values %v holds from Start %d by Step %d", o.ChunkSize, n, o.Type, o.Start, o.Step)
			}
		}
	}
	if math.IsNaN(o.PrefetchAt) || o.PrefetchAt <= 0 || o.PrefetchAt > 1 {
		bad(ErrInvalidOptions, "PrefetchAt %v: must be in (0, 1]", o.PrefetchAt)
	}
	if o.MaxAttempts < 1 {
		bad(ErrInvalidOptions, "MaxAttempts %d: must be at least 1", o.MaxAttempts)
	}
	if o.BackoffBase <= 0 || o.BackoffMax < o.BackoffBase {
		bad(ErrInvalidOptions, "BackoffBase %v, BackoffMax %v: want 0 < base <= max", o.BackoffBase, o.BackoffMax)
	}
	if o.FetchTimeout <= 0 {
		bad(ErrInvalidOptions, "FetchTimeout %v: must be positive", o.FetchTimeout)
	}
	if o.Process == "" || len(o.Process) > maxProcessLen {
		bad(ErrInvalidOptions, "Process %q: want 1..%d bytes", o.Process, maxProcessLen)
	}
	if o.Now == nil {
		bad(ErrInvalidOptions, "Now is nil")
	}
	if o.Logger == nil {
		bad(ErrInvalidOptions, "Logger is nil")
	}
	return errors.Join(errs...)
}

// capacity returns how many values of t lie in Start, Start+Step, ...
// (at least 1 when start is within t), saturated at math.MaxUint64: the
// one sequence of 2^64 values (BigInt from math.MinInt64 by 1) counts
// math.MaxUint64 and so hands out every bigint but math.MaxInt64, its last.
func capacity(t Type, start, step int64) uint64 {
	span := uint64(t.Max()) - uint64(start) // exact in two's complement: start <= Max
	n := span / uint64(step)
	if n == math.MaxUint64 {
		return n
	}
	return n + 1
}
