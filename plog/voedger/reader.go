package voedger

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage"
)

// ReaderOptions configure a Reader.
type ReaderOptions struct {
	// PageTimeout bounds the read of one block (up to 4,096 events,
	// callbacks included). 0: no bound other than ctx.
	PageTimeout time.Duration

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
	st storage.Storage
	o  ReaderOptions
}

// NewReader returns a Reader over st, the store of Voedger's PLog rows.
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

// errGap stops a block read at a missing offset.
var errGap = errors.New("voedger: gap")

// ReadEvents calls cb with each event of partition part in offset order,
// from offset from (inclusive) to the first missing offset, and stops there
// without error. A from of 0 or 1 starts at the partition's first stored
// event: the first row of block 0 (Voedger's first offset is 1, but a
// partition may begin later in the block, and nothing below its first
// event is read). Blocks are read one storage.Read each, and the next
// block only when the current one is complete to its last offset.
//
// A row that does not decode (Decode) stops the read with an error
// wrapping ErrCorrupt or ErrUnsupportedCodec that names the partition and
// the offset; events before it have been passed to cb. A row at offset 0
// or with a clustering key that is not 2 bytes is an error wrapping
// ErrCorrupt. A cb error is returned as is; ctx's error (wrapped) once ctx
// is done. The Event passed to cb and its slices are valid only during the
// call.
func (r *Reader) ReadEvents(ctx context.Context, part isequencer.PartitionID, from isequencer.PLogOffset, cb func(e *Event) error) error {
	first := from <= 1 // start at whatever the first stored row is
	next := uint64(from)
	if first {
		next = 0
	}
	var (
		cbErr error
		pKey  = make([]byte, 0, 12)
		fromC = make([]byte, 2)
		toC   = binary.BigEndian.AppendUint16(nil, EventsPerBlock)
	)
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("voedger: reading partition %d at offset %d: %w", part, next, err)
		}
		block, start := next>>loBits, next
		pKey = appendBlockKey(pKey[:0], part, block)
		binary.BigEndian.PutUint16(fromC, uint16(next&loMask))
		err := r.readPage(ctx, pKey, fromC, toC, func(cCols, value []byte) error {
			if len(cCols) != 2 {
				return fmt.Errorf("voedger: partition %d: %w: clustering key %x in block %d is not 2 bytes", part, ErrCorrupt, cCols, block)
			}
			off := block<<loBits | uint64(binary.BigEndian.Uint16(cCols))
			switch {
			case first && off == 0:
				return fmt.Errorf("voedger: partition %d: %w: a row at offset 0 (Voedger's offsets start at 1)", part, ErrCorrupt)
			case first:
				first, next, start = false, off, off
			case off != next:
				return errGap
			}
			e, err := decodeAt(part, isequencer.PLogOffset(off), value, r.o.OpaqueCorrupted)
			if err != nil {
				return err
			}
			if err := cb(e); err != nil {
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
		case errors.Is(err, ErrCorrupt), errors.Is(err, ErrUnsupportedCodec):
			return err
		case err != nil:
			return fmt.Errorf("voedger: reading partition %d at offset %d: %w", part, next, err)
		case first, next == start, next&loMask != 0:
			// Nothing read, or the block ended before its last offset:
			// the log ends here.
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

// SeqReader is a plog.PLogReader over a Voedger PLog, for
// seqstorage.Options.Reader: each event is passed as a plog.Event with its
// WSID, WLog offset and Numbers (the corrected numbers, possibly several
// per SeqID; readers take the largest). Records and Payload are empty.
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
			pe.Numbers = append(pe.Numbers, plog.SeqNumber{SeqID: v.Key.SeqID, Number: v.Value})
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
