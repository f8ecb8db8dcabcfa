package boltdb

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Defaults applied by EnsureDefaults to zero fields.
const (
	DefaultTimeout         = time.Second
	DefaultReclaimInterval = time.Minute
)

// Options configure a Store.
type Options struct {
	// Timeout bounds the wait for the file's lock in Open. Only one Store (in
	// any process) may hold a file; Open fails with an error wrapping
	// storage.ErrUnavailable when the lock is not had in time. Default 1 s.
	Timeout time.Duration

	// NoSync skips fsync on commit: a crash of the machine may lose or
	// corrupt recently committed writes. For tests and benchmarks only.
	NoSync bool

	// Now is the clock TTLs are measured with. Default time.Now.
	Now func() time.Time

	// ReclaimInterval is how often the Store's sweeper deletes expired rows
	// (expired rows are absent to reads regardless). Default 1 min; a
	// negative value disables the sweeper (Reclaim still works).
	ReclaimInterval time.Duration

	// Logger receives the sweeper's failures. Default slog.Default().
	Logger *slog.Logger

	// ReadOnly opens an existing file for reading only (inspection): the
	// file is never changed, writes fail with an error wrapping
	// ErrReadOnly, and no sweeper runs. Read-only Stores share the file's
	// lock with each other, not with a writer. A missing file, an empty
	// one, or one this package never initialised is an error.
	ReadOnly bool
}

// EnsureDefaults sets zero fields to their defaults. Negative values are left
// for Validate to judge.
func (o *Options) EnsureDefaults() {
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.ReclaimInterval == 0 {
		o.ReclaimInterval = DefaultReclaimInterval
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Validate reports every problem of o at once; each wraps ErrInvalidOptions.
// Call it after EnsureDefaults.
func (o *Options) Validate() error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, a...)...))
	}
	if o.Timeout <= 0 {
		bad("Timeout %v, must be > 0", o.Timeout)
	}
	if o.Now == nil {
		bad("Now is nil")
	}
	if o.Logger == nil {
		bad("Logger is nil")
	}
	return errors.Join(errs...)
}
