package voedger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/plog/internal/blocks"
	"github.com/cqlseq/cqlseq/storage"
)

// ReaderOptions configure a Reader.
type ReaderOptions struct {
	// PageTimeout bounds each storage.Read of one block (up to 4,096
	// events; the callbacks are not included: the rows are read ahead into
	// a buffer). 0: no bound other than ctx.
	PageTimeout time.Duration

	// ReadAhead and Retries as plog.ReaderOptions's: the blocks read
	// concurrently after the one being delivered, and the retries of a
	// block read that failed with storage.ErrUnavailable or timed out.
	ReadAhead int
	Retries   int

	// OpaqueCorrupted accepts a sys.Corrupted event whose original bytes
	// do not decode: it is passed with Original nil and the reason in
	// OriginalErr, and so contributes its WLog offset only, although the
	// records its original event created may exist. Default false: such an
	// event stops the read with an error wrapping ErrCorrupt. An operator
	// who sets it must make sure no record ID of that event is issued
	// again.
	OpaqueCorrupted bool
}

// Reader reads a Voedger PLog from a storage.Storage (the application's
// keyspace). Safe for concurrent use.
type Reader struct {
	b      *blocks.Reader
	opaque bool // ReaderOptions.OpaqueCorrupted
}

// readerLayout is Voedger's PLog key layout (keys.go) for blocks.Reader.
var readerLayout = blocks.Layout{
	Pkg:        "voedger",
	Invalid:    ErrInvalidOptions,
	AppendPKey: appendBlockKey,
	BadKey: func(part isequencer.PartitionID, block uint64, cCols []byte) error {
		return fmt.Errorf("voedger: partition %d: %w: clustering key %x in block %d is not 2 bytes", part, ErrCorrupt, cCols, block)
	},
}

// NewReader returns a Reader over st, the store of Voedger's PLog rows.
func NewReader(st storage.Storage, o ReaderOptions) (*Reader, error) {
	b, err := blocks.New(st, blocks.Options{PageTimeout: o.PageTimeout, ReadAhead: o.ReadAhead, Retries: o.Retries}, readerLayout)
	if err != nil {
		return nil, err
	}
	return &Reader{b: b, opaque: o.OpaqueCorrupted}, nil
}

// ReadEvents calls cb with each event of partition part in offset order,
// from offset from (inclusive) to the first missing offset, and stops there
// without error. A from of 0 or 1 starts at the partition's first stored
// event: the first row of block 0 (Voedger's first offset is 1, but a
// partition may begin later in the block, and nothing below its first
// event is read). Blocks are read one storage.Read each: the block the read
// starts in alone (a log that ends in it costs one storage.Read), then, once
// a block is complete to its last offset, the next ReaderOptions.ReadAhead
// concurrently while the events read are decoded and passed to cb.
//
// A row that does not decode (Decode) stops the read with an error
// wrapping ErrCorrupt or ErrUnsupportedCodec that names the partition and
// the offset; events before it have been passed to cb. A row at offset 0
// or with a clustering key that is not 2 bytes is an error wrapping
// ErrCorrupt. A cb error is returned as is; ctx's error (wrapped) once ctx
// is done. The Event passed to cb and its slices are valid only during the
// call.
func (r *Reader) ReadEvents(ctx context.Context, part isequencer.PartitionID, from isequencer.PLogOffset, cb func(e *Event) error) error {
	if from <= 1 {
		from = 0 // blocks.Reader: start at whatever the first stored row is
	}
	return r.b.Read(ctx, part, from, func(off isequencer.PLogOffset, value []byte) error {
		if off == 0 {
			return fmt.Errorf("voedger: partition %d: %w: a row at offset 0 (Voedger's offsets start at 1)", part, ErrCorrupt)
		}
		e, err := decodeAt(part, off, value, r.opaque)
		if err != nil {
			return err
		}
		return cb(e)
	})
}

// SeqReader is a plog.PLogReader over a Voedger PLog, for
// seqstorage.Options.Reader: each event is passed as a plog.Event with its
// WSID, WLog offset and Numbers: per SeqID the largest of the event's
// corrected numbers (Numbers), in the order of their SeqIDs' first
// appearance. Records and Payload are empty.
type SeqReader struct{ r *Reader }

var _ plog.PLogReader = SeqReader{}

// SeqReader returns r as a plog.PLogReader.
func (r *Reader) SeqReader() SeqReader { return SeqReader{r: r} }

// ReadEvents implements plog.PLogReader with Reader.ReadEvents (so from 0
// or 1 starts at the partition's first stored event). Errors wrap
// plog.ErrCorrupt as well as this package's sentinels.
func (s SeqReader) ReadEvents(ctx context.Context, part isequencer.PartitionID, from isequencer.PLogOffset, cb func(e *plog.Event) error) error {
	var (
		pe    plog.Event
		vals  []isequencer.SeqValue
		cbErr error
	)
	err := s.r.ReadEvents(ctx, part, from, func(e *Event) error {
		vals = Numbers(vals[:0], e)
		pe = plog.Event{Partition: e.Partition, Offset: e.Offset, WSID: e.WSID, WLogOffset: e.WLogOffset, Numbers: pe.Numbers[:0]}
		for _, v := range vals {
			pe.Numbers = appendMax(pe.Numbers, v.Key.SeqID, v.Value)
		}
		cbErr = cb(&pe)
		return cbErr
	})
	switch {
	case cbErr != nil:
		return cbErr
	case errors.Is(err, ErrCorrupt), errors.Is(err, ErrUnsupportedCodec):
		return fmt.Errorf("%w: %w", plog.ErrCorrupt, err)
	}
	return err
}

// appendMax adds (id, n) to nums, or raises id's number to n: nums holds
// one number per SeqID (an event names two SeqIDs).
func appendMax(nums []plog.SeqNumber, id isequencer.SeqID, n isequencer.Number) []plog.SeqNumber {
	for i := range nums {
		if nums[i].SeqID == id {
			nums[i].Number = max(nums[i].Number, n)
			return nums
		}
	}
	return append(nums, plog.SeqNumber{SeqID: id, Number: n})
}
