package plog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog/internal/blocks"
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
	// PageTimeout bounds each storage.Read of one storage partition (up
	// to 4,096 events; the callbacks are not included: the rows are read
	// ahead into a buffer). 0: no bound other than ctx.
	PageTimeout time.Duration

	// ReadAhead is how many storage partitions after the one being
	// delivered are read concurrently (once the log is known to extend
	// past the first one read). 0: DefaultReadAhead; negative: none. A
	// read holds up to ReadAhead+1 storage partitions' rows in memory.
	ReadAhead int

	// Retries is how many times the read of a storage partition that
	// failed with storage.ErrUnavailable or timed out is retried, from
	// the first event it has not received (no event is passed twice).
	// 0: DefaultRetries; negative: none.
	Retries int
}

// Defaults of ReaderOptions.
const (
	DefaultReadAhead = blocks.DefaultReadAhead
	DefaultRetries   = blocks.DefaultRetries
)

// Reader reads FormatV1 events from a storage.Storage. Safe for concurrent
// use.
type Reader struct {
	st storage.Storage
	b  *blocks.Reader
}

var _ PLogReader = (*Reader)(nil)

// readerLayout is the event key layout (keys.go) for blocks.Reader.
var readerLayout = blocks.Layout{
	Pkg:        "plog",
	Invalid:    ErrInvalidOptions,
	AppendPKey: appendEventPKey,
	BadKey: func(part isequencer.PartitionID, hi uint64, cCols []byte) error {
		return fmt.Errorf("%w: partition %d: clustering key %x in storage partition %d is not 2 bytes", ErrCorrupt, part, cCols, hi)
	},
}

// NewReader returns a Reader over st.
func NewReader(st storage.Storage, o ReaderOptions) (*Reader, error) {
	b, err := blocks.New(st, blocks.Options{PageTimeout: o.PageTimeout, ReadAhead: o.ReadAhead, Retries: o.Retries}, readerLayout)
	if err != nil {
		return nil, err
	}
	return &Reader{st: st, b: b}, nil
}

// ReadEvents implements PLogReader. It reads one storage partition per
// storage.Read call, from the offset's clustering key to the end of the
// event clustering keys (0x1000, so that a block's fence row at FenceCC is
// never read as an event). The storage partition the read starts in is
// read alone (a log that ends in it costs one storage.Read); once one is
// complete to its last offset, the next ReaderOptions.ReadAhead are read
// concurrently while the events read are decoded and passed to cb.
//
// A gap marker (Event.Skip) is passed to cb like an event; the read then
// goes on at the offset after the gap (Event.NextOffset) with a new
// storage read. A read that starts inside a gap stops there (the gap's
// offsets hold nothing), as at any missing offset.
func (r *Reader) ReadEvents(ctx context.Context, part isequencer.PartitionID, from isequencer.PLogOffset, cb func(e *Event) error) error {
	var e Event
	from = max(from, 1)
	for {
		var gapEnd isequencer.PLogOffset // set by a gap marker: read on from it
		err := r.b.Read(ctx, part, from, func(off isequencer.PLogOffset, value []byte) error {
			if err := Decode(part, off, value, &e); err != nil {
				return err
			}
			if err := cb(&e); err != nil {
				return err
			}
			if e.Skip > 0 {
				gapEnd = e.NextOffset()
				return errGap
			}
			return nil
		})
		if err != errGap { //nolint:errorlint // errGap is never wrapped
			return err
		}
		from = gapEnd
	}
}

// errGap stops a block read at a gap marker; ReadEvents reads on after it.
var errGap = errors.New("plog: gap marker")

// ReadEvent reads the event at offset off (>= 1) of partition part into e
// with one storage.Get, at the store's consistency; ok is false when there
// is none. Bytes that do not decode give an error wrapping ErrCorrupt. As
// with Decode, e's Numbers and Records are reused and e.Payload aliases
// the value read.
func (r *Reader) ReadEvent(ctx context.Context, part isequencer.PartitionID, off isequencer.PLogOffset, e *Event) (ok bool, err error) {
	if off == 0 {
		return false, fmt.Errorf("plog: read event of partition %d: offset 0: %w", part, storage.ErrInvalidArgument)
	}
	v, ok, err := r.st.Get(ctx, EventPKey(part, off), EventCCols(off))
	if err != nil {
		return false, fmt.Errorf("plog: read event of partition %d offset %d: %w", part, off, err)
	}
	if !ok {
		return false, nil
	}
	if err := Decode(part, off, v, e); err != nil {
		return false, err
	}
	return true, nil
}
