package isequencer

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"
)

// Defaults applied by EnsureDefaults to zero fields. See the Params fields
// for why these values.
const (
	DefaultMaxNumUnflushedValues = 10_000
	DefaultLRUCacheSize          = 100_000
	DefaultRetryDelay            = 10 * time.Millisecond
	DefaultMaxRetryDelay         = 250 * time.Millisecond
)

// MaxMaxNumUnflushedValues is the largest MaxNumUnflushedValues Validate
// accepts (2^20). It bounds the sequencer's rings, which grow on demand
// from a few kilobytes up to the next power of two at or above
// MaxNumUnflushedValues + 256 values of 24 bytes (and as many group-commit
// marks of 16 bytes with GroupCommit): at the bound 2^21 values, 80 MiB.
const MaxMaxNumUnflushedValues = 1 << 20

// MaxFlushAfterEvents is the largest FlushAfterEvents Validate accepts:
// a restart replays at most about that many events (a million events
// replay in about 5 s from one node, docs/benchmarks.md).
const MaxFlushAfterEvents = 1 << 20

// EnsureDefaults sets zero fields to their defaults. Negative values are left
// for Validate to report.
func (p *Params) EnsureDefaults() {
	if p.MaxNumUnflushedValues == 0 {
		p.MaxNumUnflushedValues = DefaultMaxNumUnflushedValues
	}
	if p.LRUCacheSize == 0 {
		p.LRUCacheSize = DefaultLRUCacheSize
	}
	if p.RetryDelay == 0 {
		p.RetryDelay = DefaultRetryDelay
	}
	if p.MaxRetryDelay == 0 {
		p.MaxRetryDelay = DefaultMaxRetryDelay
		if p.MaxRetryDelay < p.RetryDelay {
			p.MaxRetryDelay = p.RetryDelay
		}
	}
	if p.Logger == nil {
		p.Logger = slog.Default()
	}
}

// Validate reports every problem of p at once; each wraps ErrInvalidParams.
// Call it after EnsureDefaults.
func (p *Params) Validate() error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidParams}, a...)...))
	}
	if p.SeqStorage == nil {
		bad("SeqStorage is nil")
	}
	if len(p.SeqTypes) == 0 {
		bad("SeqTypes is empty")
	}
	kinds := make([]WSKind, 0, len(p.SeqTypes))
	for k := range p.SeqTypes {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool { return kinds[i] < kinds[j] })
	for _, k := range kinds {
		seqs := p.SeqTypes[k]
		if len(seqs) == 0 {
			bad("WSKind %d has no sequences", k)
		}
		ids := make([]SeqID, 0, len(seqs))
		for id := range seqs {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		for _, id := range ids {
			if seqs[id] < 1 {
				bad("WSKind %d SeqID %d: initial value %d, must be >= 1", k, id, seqs[id])
			}
		}
	}
	if p.MaxNumUnflushedValues < 1 {
		bad("MaxNumUnflushedValues %d, must be >= 1", p.MaxNumUnflushedValues)
	} else if p.MaxNumUnflushedValues > MaxMaxNumUnflushedValues {
		bad("MaxNumUnflushedValues %d, must be <= %d (it bounds the sequencer's rings)", p.MaxNumUnflushedValues, MaxMaxNumUnflushedValues)
	}
	if p.FlushAfterEvents < 0 || p.FlushAfterEvents > MaxFlushAfterEvents {
		bad("FlushAfterEvents %d, must be in [0, %d]", p.FlushAfterEvents, MaxFlushAfterEvents)
	}
	if p.LRUCacheSize < 1 {
		bad("LRUCacheSize %d, must be >= 1", p.LRUCacheSize)
	}
	if p.BatcherDelay < 0 {
		bad("BatcherDelay %v, must be >= 0", p.BatcherDelay)
	}
	if p.RetryDelay < 0 {
		bad("RetryDelay %v, must be >= 0", p.RetryDelay)
	}
	if p.MaxRetryDelay < p.RetryDelay {
		bad("MaxRetryDelay %v, must be >= RetryDelay %v", p.MaxRetryDelay, p.RetryDelay)
	}
	return errors.Join(errs...)
}
