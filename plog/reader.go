package plog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/storage"
)

// PLogReader reads a partition's events; implement it to plug in another
// event format.
type PLogReader interface {
	// ReadEvents calls cb with each event of partition part from offset
	// from (inclusive; 0 reads from 1) in offset order, and stops without
	// error at the first missing offset: events after a gap are not
	// read. The event passed to cb, its slices included, is valid only
	// during the call.
	//
	// A cb error stops the read and is returned as is. Bytes that do not
	// decode give an error wrapping ErrCorrupt that names the partition
	// and the offset; events before it have been passed to cb. ctx's error
	// (wrapped) is returned once ctx is done.
	ReadEvents(ctx context.Context, part isequencer.PartitionID, from isequencer.PLogOffset, cb func(e *Event) error) error
}

// ReaderOptions configure a Reader.
type ReaderOptions struct {
	// PageTimeout bounds the read of one storage partition (up to 4,096
	// events, callbacks included). 0: no bound other than ctx.
	PageTimeout time.Duration
}

// Reader reads FormatV1 events from a storage.Storage. Safe for concurrent
// use.
type Reader struct {
	st storage.Storage
	o  ReaderOptions
}

var _ PLogReader = (*Reader)(nil)

// NewReader returns a Reader over st.
func NewReader(st storage.Storage, o ReaderOptions) (*Reader, error) {
	var errs []error
	if st == nil {
		errs = append(errs, fmt.Errorf("%w: Storage is nil", ErrInvalidOptions))
	}
	if o.PageTimeout < 0 {
		errs = append(errs, fmt.Errorf("%w: PageTimeout %v, must be >= 0", ErrInvalidOptions, o.PageTimeout))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Reader{st: st, o: o}, nil
}

// errGap stops a storage read at a missing offset.
var errGap = errors.New("plog: gap")

// ReadEvents implements PLogReader. It reads one storage partition per
// storage.Read call, from the offset's clustering key to the end of the
// event clustering keys (0x1000, so that a block's fence row at FenceCC is
// never read as an event), and moves to the next storage partition only when the current one
// was complete to its last offset.
func (r *Reader) ReadEvents(ctx context.Context, part isequencer.PartitionID, from isequencer.PLogOffset, cb func(e *Event) error) error {
	next := max(uint64(from), 1)
	var (
		e     Event
		cbErr error
		pKey  = make([]byte, 0, 12)
		fromC = make([]byte, 2)
		toC   = eventsEnd()
	)
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("plog: reading partition %d at offset %d: %w", part, next, err)
		}
		hi, start := next>>loBits, next
		pKey = appendEventPKey(pKey[:0], part, hi)
		binary.BigEndian.PutUint16(fromC, uint16(next&loMask))
		err := r.readPage(ctx, pKey, fromC, toC, func(cCols, value []byte) error {
			if len(cCols) != 2 {
				return fmt.Errorf("%w: partition %d: clustering key %x in storage partition %d is not 2 bytes", ErrCorrupt, part, cCols, hi)
			}
			off := hi<<loBits | uint64(binary.BigEndian.Uint16(cCols))
			if off != next {
				return errGap
			}
			if err := Decode(part, isequencer.PLogOffset(off), value, &e); err != nil {
				return err
			}
			if err := cb(&e); err != nil {
				cbErr = err
				return err
			}
			next++
			return nil
		})
		switch {
		case cbErr != nil:
			return cbErr
		case errors.Is(err, errGap):
			return nil
		case errors.Is(err, ErrCorrupt):
			return err
		case err != nil:
			return fmt.Errorf("plog: reading partition %d at offset %d: %w", part, next, err)
		case next == start || next&loMask != 0:
			// Nothing read, or the storage partition ended before its
			// last offset: the log ends here.
			return nil
		}
	}
}

func (r *Reader) readPage(ctx context.Context, pKey, from, to []byte, cb func(cCols, value []byte) error) error {
	if r.o.PageTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.o.PageTimeout)
		defer cancel()
	}
	return r.st.Read(ctx, pKey, from, to, cb)
}
