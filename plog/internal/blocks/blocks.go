// Package blocks reads a PLog partition stored in blocks: one storage
// partition per 4,096 consecutive offsets (offset >> 12), clustering key
// u16 (offset & 0xFFF), as both Voedger's PLog and plog's FormatV1 PLog are
// stored. It is the paging loop plog.Reader and voedger.Reader share; each
// keeps its own partition key, value decoding and start offset.
package blocks

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/storage"
)

const (
	loBits = 12
	loMask = 1<<loBits - 1

	// Size is the number of consecutive offsets one block holds.
	Size = 1 << loBits

	// DefaultReadAhead is Options.ReadAhead's default.
	DefaultReadAhead = 4

	// DefaultRetries is Options.Retries's default.
	DefaultRetries = 2

	// retryBackoff is the wait before a block's first retry; it doubles
	// with each further one.
	retryBackoff = 50 * time.Millisecond
)

// Layout is what a Reader needs to know of a PLog layout.
type Layout struct {
	// Pkg prefixes the errors Reader makes ("plog", "voedger").
	Pkg string

	// Invalid is the sentinel every problem New finds wraps.
	Invalid error

	// AppendPKey appends to b the partition key of block (offset >> 12) of
	// PLog partition part.
	AppendPKey func(b []byte, part isequencer.PartitionID, block uint64) []byte

	// BadKey returns the error for a row of block whose clustering key
	// cCols is not 2 bytes.
	BadKey func(part isequencer.PartitionID, block uint64, cCols []byte) error
}

// Options configure a Reader.
type Options struct {
	// PageTimeout bounds each storage.Read of a block (up to 4,096 rows,
	// copied into the Reader's buffer); 0: no bound other than ctx. A
	// read that times out is retried as Retries says.
	PageTimeout time.Duration

	// ReadAhead is how many blocks after the one being delivered are read
	// concurrently, once the log is known to extend past the block the
	// read started in. 0: DefaultReadAhead; negative: none (each block is
	// read once the one before it has been delivered). A read holds up to
	// ReadAhead+1 blocks in memory, whatever the log's length.
	ReadAhead int

	// Retries is how many times a block read that failed with an error
	// wrapping storage.ErrUnavailable, or that PageTimeout ended, is
	// retried (from the first offset it has not received). 0:
	// DefaultRetries; negative: none.
	Retries int
}

// EnsureDefaults sets zero fields to their defaults.
func (o *Options) EnsureDefaults() {
	if o.ReadAhead == 0 {
		o.ReadAhead = DefaultReadAhead
	}
	if o.Retries == 0 {
		o.Retries = DefaultRetries
	}
}

// Reader reads the blocks of a Layout from a storage.Storage. Safe for
// concurrent use.
type Reader struct {
	st storage.Storage
	o  Options
	l  Layout
}

// New returns a Reader over st. Every problem found is reported, each
// wrapping l.Invalid.
func New(st storage.Storage, o Options, l Layout) (*Reader, error) {
	o.EnsureDefaults()
	var errs []error
	if st == nil {
		errs = append(errs, fmt.Errorf("%w: Storage is nil", l.Invalid))
	}
	if o.PageTimeout < 0 {
		errs = append(errs, fmt.Errorf("%w: PageTimeout %v, must be >= 0", l.Invalid, o.PageTimeout))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	o.ReadAhead, o.Retries = max(o.ReadAhead, 0), max(o.Retries, 0)
	return &Reader{st: st, o: o, l: l}, nil
}

// Read calls row with the offset and the value of each row of PLog
// partition part in offset order, from offset from (inclusive) to the first
// missing offset, and stops there without error. A from of 0 starts at the
// first row stored in block 0, whatever its offset.
//
// Each block is read with one storage.Read (more if it is retried), from
// the start offset's clustering key up to 0x1000 (exclusive: a row at a
// higher clustering key, such as plog's fence row, is never read). The
// block the read starts in is read alone, so that a log that ends in it
// costs one storage.Read; once a block is complete to its last offset, the
// next Options.ReadAhead blocks are read concurrently while the rows
// already read are passed to row, in order, each exactly once. Blocks
// read past the log's end are discarded.
//
// An error from row, or Layout.BadKey's for a clustering key that is not
// 2 bytes, stops the read and is returned as is. ctx's error and a storage
// error (after the retries) are returned wrapped, naming the partition and
// the offset reached; the rows before it have been passed to row. Read
// returns once every read it started has ended. The value passed to row
// is valid only during the call.
func (r *Reader) Read(ctx context.Context, part isequencer.PartitionID, from isequencer.PLogOffset, row func(off isequencer.PLogOffset, value []byte) error) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel: deferred calls run last in, first out
	defer cancel()

	next := uint64(from)
	first := next == 0 // the first row read sets the start
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: reading partition %d at offset %d: %w", r.l.Pkg, part, next, err)
	}
	cur := &block{n: next >> loBits, lo: uint16(next & loMask)}
	r.fetch(ctx, part, cur)
	var (
		window []*block // the blocks after cur, in order, each fetched or being fetched
		free   []*block // delivered blocks whose buffers are reused
	)
	for {
		if cur.complete() && r.o.ReadAhead > 0 {
			for n := cur.n + 1 + uint64(len(window)); len(window) < r.o.ReadAhead; n++ {
				var b *block
				if k := len(free); k > 0 {
					b, free = free[k-1], free[:k-1]
				} else {
					b = &block{}
				}
				b.reset(n, 0)
				b.done = make(chan struct{})
				window = append(window, b)
				wg.Go(func() {
					defer close(b.done)
					r.fetch(ctx, part, b)
				})
			}
		}
		start, pos := next, uint32(0)
		for _, rr := range cur.rows {
			off := cur.n<<loBits | uint64(rr.lo)
			switch {
			case first:
				first, next, start = false, off, off
			case off != next:
				return nil // a gap
			}
			if ctx.Err() != nil { // an atomic load
				return fmt.Errorf("%s: reading partition %d at offset %d: %w", r.l.Pkg, part, next, ctx.Err())
			}
			end := pos + rr.len
			if err := row(isequencer.PLogOffset(off), cur.data[pos:end:end]); err != nil {
				return err
			}
			pos, next = end, next+1
		}
		switch {
		case cur.badKey != nil:
			return r.l.BadKey(part, cur.n, cur.badKey)
		case cur.err != nil:
			return fmt.Errorf("%s: reading partition %d at offset %d: %w", r.l.Pkg, part, next, cur.err)
		case next == start || next&loMask != 0 || cur.gap:
			// Nothing read, or the block ended before its last offset:
			// the log ends here.
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%s: reading partition %d at offset %d: %w", r.l.Pkg, part, next, err)
		}
		if len(window) == 0 { // no read-ahead
			cur.reset(next>>loBits, 0)
			r.fetch(ctx, part, cur)
			continue
		}
		free = append(free, cur)
		cur, window = window[0], window[1:]
		<-cur.done
	}
}

// block is one block's rows, read into one buffer.
type block struct {
	n      uint64        // the block's number (offset >> 12)
	lo     uint16        // the clustering key the read starts from
	rows   []rowRef      // in clustering order, consecutive
	data   []byte        // the rows' values, concatenated
	gap    bool          // the read stopped at a missing offset
	badKey []byte        // a clustering key that is not 2 bytes, after rows
	err    error         // the read's error, after rows
	done   chan struct{} // closed when a read-ahead fetch has ended
}

type rowRef struct {
	lo  uint16 // offset & 0xFFF
	len uint32 // of the value in data
}

func (b *block) reset(n uint64, lo uint16) {
	b.n, b.lo = n, lo
	b.rows, b.data = b.rows[:0], b.data[:0]
	b.gap, b.badKey, b.err, b.done = false, nil, nil, nil
}

// complete reports whether b was read without error to its last offset.
func (b *block) complete() bool {
	k := len(b.rows)
	return k > 0 && b.rows[k-1].lo == loMask && !b.gap && b.badKey == nil && b.err == nil
}

// errStop stops a block's storage.Read at a gap or a bad key.
var errStop = errors.New("blocks: stop")

// fetch reads b's rows from b.lo to the first missing offset, a bad key or
// the block's end, retrying as Options.Retries says from the first offset
// it has not received. Its outcome is in b.
func (r *Reader) fetch(ctx context.Context, part isequencer.PartitionID, b *block) {
	pKey := r.l.AppendPKey(make([]byte, 0, 16), part, b.n)
	var fromC [2]byte
	toC := [2]byte{Size >> 8, Size & 0xFF}
	cb := func(cCols, value []byte) error {
		if len(cCols) != 2 {
			b.badKey = append([]byte(nil), cCols...)
			return errStop
		}
		lo := binary.BigEndian.Uint16(cCols)
		if k := len(b.rows); k > 0 && lo != b.rows[k-1].lo+1 {
			b.gap = true
			return errStop
		}
		b.rows = append(b.rows, rowRef{lo: lo, len: uint32(len(value))})
		b.data = append(b.data, value...)
		return nil
	}
	backoff := retryBackoff
	for attempt := 0; ; attempt++ {
		lo := b.lo
		if k := len(b.rows); k > 0 {
			if b.rows[k-1].lo == loMask {
				return
			}
			lo = b.rows[k-1].lo + 1
		}
		binary.BigEndian.PutUint16(fromC[:], lo)
		err := r.readBlock(ctx, pKey, fromC[:], toC[:], cb)
		if err == nil || errors.Is(err, errStop) {
			return
		}
		if ctx.Err() != nil || attempt >= r.o.Retries || !retryable(err) {
			b.err = err
			return
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			b.err = err
			return
		case <-t.C:
		}
		backoff *= 2
	}
}

// retryable reports whether a block read that failed with err (its
// context not done) may succeed if tried again.
func retryable(err error) bool {
	return errors.Is(err, storage.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)
}

func (r *Reader) readBlock(ctx context.Context, pKey, from, to []byte, cb func(cCols, value []byte) error) error {
	if r.o.PageTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.o.PageTimeout)
		defer cancel()
	}
	return r.st.Read(ctx, pKey, from, to, cb)
}
