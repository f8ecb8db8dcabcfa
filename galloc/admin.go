package galloc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/cqlseq/cqlseq/storage"
)

// Change is what Alter changes in a sequence's record. Only what never
// decides which values were handed out can change: the chunk size and the
// adaptive flag shape future allocations, and Retire stops them. The type,
// start, step and the allocated count cannot change, so an Alter can
// neither repeat a value nor make one go back.
type Change struct {
	// ChunkSize, when not 0, is the new chunk size (1 up to the values
	// the sequence holds): it applies to each process's next allocation;
	// chunks already allocated keep their size.
	ChunkSize int64
	// Adaptive, when not nil, turns Leaf's dynamic step on or off
	// (AdaptiveChunkSize) from each process's next allocation.
	Adaptive *bool
	// Retire retires the sequence: no chunk is allocated after it. A
	// process hands out no more values once it sees the record retired
	// (at its next allocation, or by Refresh or MarkRetired); until then
	// it may hand out the values of the at most two chunks it holds,
	// which were allocated to it before the retirement, so each is still
	// handed out once. Retiring a retired sequence changes nothing and is
	// not an error.
	Retire bool
}

// alterAttempts bounds Alter's compare-and-swap attempts.
const alterAttempts = 32

// Alter applies c to the record of sequence name in st with a
// compare-and-swap (retried on a lost swap, up to 32 times, with a short
// jittered pause) and returns the record stored. A missing sequence is ok
// == false. Altering a retired sequence (other than retiring it again) is
// ErrRetired; a chunk size out of range is ErrInvalidOptions. An unknown
// outcome is decided by reading the record: the write carries a unique
// nonce.
func Alter(ctx context.Context, st storage.Storage, name string, c Change) (r Record, ok bool, err error) {
	if err := validName(name); err != nil {
		return Record{}, false, err
	}
	if c.ChunkSize < 0 {
		return Record{}, false, fmt.Errorf("%w: ChunkSize %d: must be at least 1", ErrInvalidOptions, c.ChunkSize)
	}
	pKey, cCols := PKey(name), StateCCols()
	var lastErr error
	for attempt := 1; ; attempt++ {
		raw, found, err := st.Get(ctx, pKey, cCols)
		switch {
		case err != nil && !errors.Is(err, storage.ErrUnavailable):
			return Record{}, false, fmt.Errorf("galloc: sequence %q: reading the record: %w", name, err)
		case err != nil:
			lastErr = err
		case !found:
			return Record{}, false, nil
		default:
			var cur Record
			if err := cur.UnmarshalBinary(raw); err != nil {
				return Record{}, false, fmt.Errorf("galloc: sequence %q: %w", name, err)
			}
			next, err := c.apply(name, cur)
			if err != nil || next == cur {
				return cur, true, err
			}
			next.Nonce = rand.Uint64()
			newRaw, err := next.MarshalBinary()
			if err != nil {
				return Record{}, false, err
			}
			applied, err := st.CompareAndSwap(ctx, pKey, cCols, raw, newRaw, 0)
			if errors.Is(err, storage.ErrUnknownOutcome) && ctx.Err() == nil {
				got, found, rerr := st.Get(ctx, pKey, cCols)
				switch {
				case rerr != nil:
					err = fmt.Errorf("%w (re-read: %w)", err, rerr)
				case found && bytes.Equal(got, newRaw):
					applied, err = true, nil
				default:
					applied, err = false, nil // not ours: try again from the record
				}
			}
			switch {
			case err == nil && applied:
				return next, true, nil
			case err == nil:
			case errors.Is(err, storage.ErrUnavailable), errors.Is(err, storage.ErrUnknownOutcome):
				lastErr = err
			default:
				return Record{}, false, fmt.Errorf("galloc: sequence %q: altering: %w", name, err)
			}
		}
		if attempt >= alterAttempts || ctx.Err() != nil {
			if lastErr == nil {
				lastErr = ErrContention
			}
			return Record{}, false, fmt.Errorf("galloc: sequence %q: altering: %d attempts: %w", name, attempt, errors.Join(lastErr, ctx.Err()))
		}
		d := time.Millisecond << min(attempt-1, 7)
		select {
		case <-time.After(d/2 + rand.N(d/2+1)):
		case <-ctx.Done():
		}
	}
}

// apply returns cur with c applied, or why c cannot apply.
func (c Change) apply(name string, cur Record) (Record, error) {
	if cur.Retired {
		if c.Retire {
			return cur, nil
		}
		return cur, fmt.Errorf("%w: sequence %q", ErrRetired, name)
	}
	next := cur
	if c.ChunkSize != 0 {
		if n := cur.Capacity(); uint64(c.ChunkSize) > n {
			return cur, fmt.Errorf("%w: ChunkSize %d exceeds the %d values %v holds from Start %d by Step %d",
				ErrInvalidOptions, c.ChunkSize, n, cur.Type, cur.Start, cur.Step)
		}
		next.ChunkSize = c.ChunkSize
	}
	if c.Adaptive != nil {
		next.Adaptive = *c.Adaptive
	}
	if c.Retire {
		next.Retired = true
	}
	return next, nil
}

// retiredErr is ErrRetired for s.
func (s *Sequence) retiredErr() error { return fmt.Errorf("%w: sequence %q", ErrRetired, s.name) }

// MarkRetired makes s hand out no more values: Next and NextN fail with
// ErrRetired from now on, and the values s holds are wasted. It does not
// write the record (Alter does): call it after retiring the sequence, so
// that this process stops at once.
func (s *Sequence) MarkRetired() {
	s.retired.Store(true)
	s.mu.Lock()
	s.broadcastLocked()
	s.mu.Unlock()
}

// Refresh reads the sequence's record and, when it is retired, marks s
// retired (MarkRetired). It returns the record read.
func (s *Sequence) Refresh(ctx context.Context) (Record, error) {
	r, ok, err := ReadRecord(ctx, s.st, s.name)
	switch {
	case err != nil:
		return Record{}, err
	case !ok:
		return Record{}, fmt.Errorf("galloc: sequence %q: %w: the record is missing", s.name, ErrCorrupt)
	}
	if r.Retired && !s.retired.Load() {
		s.MarkRetired()
	}
	return r, nil
}
