package plog

import (
	"context"
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
	// PageTimeout bounds the read of one storage partition (up to 4,096
	// events, callbacks included). 0: no bound other than ctx.
	PageTimeout time.Duration
}

// Reader reads FormatV1 events from a storage.Storage. Safe for concurrent
// use.
type Reader struct{ b *blocks.Reader }

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
	b, err := blocks.New(st, o.PageTimeout, readerLayout)
	if err != nil {
		return nil, err
	}
	return &Reader{b: b}, nil
}

// ReadEvents implements PLogReader. It reads one storage partition per
// storage.Read call, from the offset's clustering key to the end of the
// event clustering keys (0x1000, so that a block's fence row at FenceCC is
// never read as an event), and moves to the next storage partition only when the current one
// was complete to its last offset.
func (r *Reader) ReadEvents(ctx context.Context, part isequencer.PartitionID, from isequencer.PLogOffset, cb func(e *Event) error) error {
	var e Event
	return r.b.Read(ctx, part, max(from, 1), func(off isequencer.PLogOffset, value []byte) error {
		if err := Decode(part, off, value, &e); err != nil {
			return err
		}
		return cb(&e)
	})
}
