package idservice

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cqlseq/cqlseq/galloc"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/timeshard"
)

// MaxCount is the largest number of IDs one request may ask for (the
// count query parameter).
const MaxCount = 10_000

// MaxNameLen is the longest sequence name (and Leaf key) the service takes,
// in bytes. Names are 1..MaxNameLen bytes of [A-Za-z0-9._-].
const MaxNameLen = 128

// Defaults of Options.
const (
	DefaultName            = "cqlseq"
	DefaultMaxBodyBytes    = 4 << 10
	DefaultRequestTimeout  = 5 * time.Second
	DefaultShutdownTimeout = 10 * time.Second
	DefaultProbeInterval   = time.Second
	DefaultUnknownTTL      = time.Second
	DefaultLeaseRetryMax   = 5 * time.Second
)

// Options configure a Service.
type Options struct {
	// Store holds the sequences and the timeshard node leases. Required.
	// Close does not close it.
	Store storage.Storage

	// Name prefixes the timeshard generator names: the IDs of layout L
	// come from generator Name+"/"+L (for example "cqlseq/63"). Every
	// instance serving one ID space uses the same Name. Default "cqlseq".
	Name string

	// Timeshard is the template of the timeshard generators' options; its
	// Layout and RandomStart are ignored (they come from Layouts). A Rand
	// given here is shared by the layouts' generators: it must be safe for
	// concurrent use.
	Timeshard timeshard.Options

	// Layouts configure the timeshard layouts the service serves, by name:
	// "63" and "53" only, each of its name's width (Layout.IDBits). A name
	// not given gets DefaultLayouts' entry. Each layout's epoch must not
	// be in the future; the store refuses a layout whose IDs could repeat
	// or sort before IDs already made (timeshard.CheckLayoutChange).
	Layouts map[string]LayoutOptions

	// Galloc is the template of the sequences' options; its definition
	// fields (Type, ChunkSize, Start, StartZero, Step) are ignored: they
	// come from the sequence's stored record or the create call.
	Galloc galloc.Options

	// Tokens are the bearer tokens; nil serves without authentication.
	Tokens *Tokens

	// MaxBodyBytes bounds a request body; a larger one is answered 413.
	// Default 4 KiB.
	MaxBodyBytes int64
	// RequestTimeout bounds the work of one request (waiting for a chunk,
	// a store call). Default 5 s.
	RequestTimeout time.Duration
	// ShutdownTimeout bounds Serve's graceful shutdown: in-flight requests
	// still running after it are cut off. Default 10 s.
	ShutdownTimeout time.Duration
	// ProbeInterval is how often the store and the node leases are checked
	// (for /readyz) and a lost lease is taken again. Default 1 s.
	ProbeInterval time.Duration
	// LeaseRetryMax is the longest wait between attempts to lease a node
	// ID of a layout that has none (every node ID leased, or the store
	// failing): the waits start at ProbeInterval and double up to
	// max(LeaseRetryMax, ProbeInterval). An attempt over the 53-bit layout
	// costs up to 32 conditional writes, over the 63-bit one up to 1,024.
	// Default 5 s.
	LeaseRetryMax time.Duration
	// UnknownTTL is how long a name found missing in the store is answered
	// unknown_sequence without reading the store again. Default 1 s.
	UnknownTTL time.Duration

	// Logger receives the service's structured logs. Default
	// slog.Default().
	Logger *slog.Logger
	// Registry receives the service's metrics. Default a new registry
	// (served on /metrics either way).
	Registry *prometheus.Registry
}

// EnsureDefaults fills zero fields with their defaults.
func (o *Options) EnsureDefaults() {
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = DefaultShutdownTimeout
	}
	if o.ProbeInterval == 0 {
		o.ProbeInterval = DefaultProbeInterval
	}
	if o.UnknownTTL == 0 {
		o.UnknownTTL = DefaultUnknownTTL
	}
	if o.LeaseRetryMax == 0 {
		o.LeaseRetryMax = DefaultLeaseRetryMax
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	if o.Galloc.Logger == nil {
		o.Galloc.Logger = o.Logger
	}
	ls := DefaultLayouts()
	for name, lo := range o.Layouts {
		ls[name] = lo
	}
	o.Layouts = ls
}

// Validate reports every problem at once; each error wraps
// ErrInvalidOptions.
func (o *Options) Validate() error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, a...)...))
	}
	if o.Store == nil {
		bad("Store is nil")
	}
	if len(o.Name)+4 > timeshard.MaxNameLen {
		bad("Name of %d bytes: want at most %d", len(o.Name), timeshard.MaxNameLen-4)
	}
	if o.MaxBodyBytes < 0 {
		bad("MaxBodyBytes %d is negative", o.MaxBodyBytes)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"RequestTimeout", o.RequestTimeout}, {"ShutdownTimeout", o.ShutdownTimeout}, {"ProbeInterval", o.ProbeInterval}, {"UnknownTTL", o.UnknownTTL}, {"LeaseRetryMax", o.LeaseRetryMax}} {
		if d.v < 0 {
			bad("%s %v is negative", d.name, d.v)
		}
	}
	ts := o.Timeshard
	ts.Layout = timeshard.DefaultLayout()
	ts.EnsureDefaults()
	if err := ts.Validate(); err != nil {
		bad("Timeshard: %v", err)
	}
	now := time.Now
	if o.Timeshard.Clock != nil {
		now = o.Timeshard.Clock.Now
	}
	for _, name := range slices.Sorted(maps.Keys(o.Layouts)) {
		if err := o.Layouts[name].validate(name, now()); err != nil {
			bad("%w", err)
		}
	}
	g := o.Galloc
	g.Type, g.ChunkSize, g.Start, g.StartZero, g.Step = 0, 0, 0, false, 0
	g.EnsureDefaults()
	if err := g.Validate(); err != nil {
		bad("Galloc: %v", err)
	}
	return errors.Join(errs...)
}

// Layouts are the timeshard layouts the service offers by default, by the
// name the API takes: "63" (timeshard.DefaultLayout, Snowflake's split)
// and "53" (timeshard.JS53Layout, IDs exact in JavaScript).
func Layouts() map[string]timeshard.Layout {
	return map[string]timeshard.Layout{"63": timeshard.DefaultLayout(), "53": timeshard.JS53Layout()}
}

// LayoutOptions configure one layout the service serves (Options.Layouts).
type LayoutOptions struct {
	// Layout is the epoch and bit split; its width (IDBits) is the
	// layout's name: 63 or 53.
	Layout timeshard.Layout
	// RandomStart is the layout's timeshard.Options.RandomStart: above 1,
	// each millisecond's counter starts at a random value below it.
	RandomStart uint64
}

// DefaultLayouts returns the layouts' default options: Layouts, each
// millisecond's counter starting at 0.
func DefaultLayouts() map[string]LayoutOptions {
	out := map[string]LayoutOptions{}
	for name, l := range Layouts() {
		out[name] = LayoutOptions{Layout: l}
	}
	return out
}

// LeafPreset returns Meituan Leaf's snowflake layout for layout "63":
// timeshard.LeafLayout (twepoch 1288834974657 ms, 41 time, 10 node, 12
// counter bits), each millisecond's counter starting at a random 0..99
// (timeshard.LeafRandomStart), as Leaf's SnowflakeIDGenImpl makes IDs.
func LeafPreset() LayoutOptions {
	return LayoutOptions{Layout: timeshard.LeafLayout(), RandomStart: timeshard.LeafRandomStart}
}

// layoutWidths are the layouts' names and their IDs' widths.
var layoutWidths = map[string]uint{"63": 63, "53": timeshard.JSBits}

// validate reports every problem of layout name's options at now.
func (lo LayoutOptions) validate(name string, now time.Time) error {
	w, ok := layoutWidths[name]
	if !ok {
		return fmt.Errorf("layout %q: want 63 or 53", name)
	}
	var errs []error
	l := lo.Layout
	if err := l.Validate(); err != nil {
		errs = append(errs, err)
	} else {
		if l.IDBits() != w {
			errs = append(errs, fmt.Errorf("IDs of %d bits (time %d + node %d + counter %d): want %d, the layout's name",
				l.IDBits(), l.TimeBits, l.NodeBits, l.CounterBits, w))
		}
		if lo.RandomStart > l.PerMillisecond() {
			errs = append(errs, fmt.Errorf("random start %d: want at most %d (the IDs per millisecond)", lo.RandomStart, l.PerMillisecond()))
		}
		if !l.RunsOut().After(now) {
			errs = append(errs, fmt.Errorf("its time field ran out at %v", l.RunsOut().Format(time.RFC3339Nano)))
		}
	}
	if l.Epoch.After(now) {
		errs = append(errs, fmt.Errorf("epoch %v is in the future: no ID could be made before it", l.Epoch.UTC().Format(time.RFC3339Nano)))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("layout %s: %w", name, err)
	}
	return nil
}

// ParseLayout reads the configuration of layout name (63 or 53; `cqlseq
// serve --layout NAME=SPEC`): SPEC is comma-separated items, applied in
// order to the layout's default (DefaultLayouts):
//
//	cqlseq            the default: 2025-01-01, 41/10/12 (63) or 41/5/7 (53), no random start
//	leaf              Leaf's preset (63 only): LeafPreset
//	epoch=TIME        the epoch: RFC 3339 (2010-11-04T01:42:54.657Z) or milliseconds since the Unix epoch
//	bits=T/N/C        time, node and counter bits; they must add up to the layout's width
//	random-start=N    each millisecond's counter starts at a random value below N (0: at 0)
//
// For example "leaf", "epoch=2020-01-01T00:00:00Z" or "leaf,random-start=0".
// The result is checked as Options.Validate checks it (at now). Every
// problem is reported at once; each error wraps ErrInvalidOptions.
func ParseLayout(name, spec string, now time.Time) (LayoutOptions, error) {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: layout %s: "+format, append([]any{ErrInvalidOptions, name}, a...)...))
	}
	lo, ok := DefaultLayouts()[name]
	if !ok {
		return LayoutOptions{}, fmt.Errorf("%w: layout %q: want 63 or 53", ErrInvalidOptions, name)
	}
	if strings.TrimSpace(spec) == "" {
		bad("empty: want a preset (cqlseq, leaf) or epoch=, bits=, random-start= items")
	}
	for item := range strings.SplitSeq(spec, ",") {
		item = strings.TrimSpace(item)
		key, val, isKV := strings.Cut(item, "=")
		switch {
		case !isKV && item == "cqlseq":
			lo = DefaultLayouts()[name]
		case !isKV && item == "leaf":
			lo = LeafPreset()
		case !isKV:
			bad("%q: want a preset (cqlseq, leaf) or epoch=, bits=, random-start=", item)
		case key == "epoch":
			t, err := parseEpoch(val)
			if err != nil {
				bad("epoch %q: %v", val, err)
				continue
			}
			lo.Layout.Epoch = t
		case key == "bits":
			var tb, nb, cb uint
			if n, err := fmt.Sscanf(val, "%d/%d/%d", &tb, &nb, &cb); err != nil || n != 3 || fmt.Sprintf("%d/%d/%d", tb, nb, cb) != val {
				bad("bits %q: want TIME/NODE/COUNTER, such as 41/10/12", val)
				continue
			}
			lo.Layout.TimeBits, lo.Layout.NodeBits, lo.Layout.CounterBits = tb, nb, cb
		case key == "random-start":
			n, err := strconv.ParseUint(val, 10, 64)
			if err != nil {
				bad("random-start %q: want a whole number, 0 for none", val)
				continue
			}
			lo.RandomStart = n
		default:
			bad("unknown item %q: want a preset (cqlseq, leaf) or epoch=, bits=, random-start=", key)
		}
	}
	if len(errs) == 0 {
		if err := lo.validate(name, now); err != nil {
			errs = append(errs, fmt.Errorf("%w: %w", ErrInvalidOptions, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return LayoutOptions{}, err
	}
	return lo, nil
}

// parseEpoch reads an epoch: RFC 3339 (fractional seconds allowed) or
// whole milliseconds since the Unix epoch.
func parseEpoch(s string) (time.Time, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, errors.New("want RFC 3339 (2010-11-04T01:42:54.657Z) or milliseconds since the Unix epoch")
	}
	return t.UTC(), nil
}

// layoutNames are Layouts' names in the order they are listed.
var layoutNames = []string{"63", "53"}

// leafLayout is the layout of Leaf's snowflake path (Leaf's own split).
const leafLayout = "63"
