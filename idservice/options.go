package idservice

import (
	"errors"
	"fmt"
	"log/slog"
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
	// Layout is ignored (each layout of Layouts gets a generator).
	Timeshard timeshard.Options

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
	g := o.Galloc
	g.Type, g.ChunkSize, g.Start, g.StartZero, g.Step = 0, 0, 0, false, 0
	g.EnsureDefaults()
	if err := g.Validate(); err != nil {
		bad("Galloc: %v", err)
	}
	return errors.Join(errs...)
}

// Layouts are the timeshard layouts the service offers, by the name the
// API takes: "63" (timeshard.DefaultLayout, Snowflake's split) and "53"
// (timeshard.JS53Layout, IDs exact in JavaScript).
func Layouts() map[string]timeshard.Layout {
	return map[string]timeshard.Layout{"63": timeshard.DefaultLayout(), "53": timeshard.JS53Layout()}
}

// layoutNames are Layouts' names in the order they are listed.
var layoutNames = []string{"63", "53"}

// leafLayout is the layout of Leaf's snowflake path (Leaf's own split).
const leafLayout = "63"
