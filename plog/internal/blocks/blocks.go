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
	"time"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/storage"
)

const (
	loBits = 12
	loMask = 1<<loBits - 1

	// Size is the number of consecutive offsets one block holds.
	Size = 1 << loBits
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

// Reader reads the blocks of a Layout from a storage.Storage. Safe for
// concurrent use.
type Reader struct {
	st          storage.Storage
	pageTimeout time.Duration
	l           Layout
}

// New returns a Reader over st. pageTimeout bounds the read of one block
// (up to 4,096 rows, row callbacks included); 0: no bound other than ctx.
// Every problem found is reported, each wrapping l.Invalid.
func New(st storage.Storage, pageTimeout time.Duration, l Layout) (*Reader, error) {
	var errs []error
	if st == nil {
		errs = append(errs, fmt.Errorf("%w: Storage is nil", l.Invalid))
	}
	if pageTimeout < 0 {
		errs = append(errs, fmt.Errorf("%w: PageTimeout %v, must be >= 0", l.Invalid, pageTimeout))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Reader{st: st, pageTimeout: pageTimeout, l: l}, nil
}

// errGap stops a block read at a missing offset.
var errGap = errors.New("blocks: gap")

// Read calls row with the offset and the value of each row of PLog
// partition part in offset order, from offset from (inclusive) to the first
// missing offset, and stops there without error. A from of 0 starts at the
// first row stored in block 0, whatever its offset.
//
// Each block is read with one storage.Read, from the start offset's
// clustering key up to 0x1000 (exclusive: a row at a higher clustering
// key, such as plog's fence row, is never read), and the next block only
// when the current one was complete to its last offset.
//
// An error from row, or Layout.BadKey's for a clustering key that is not
// 2 bytes, stops the read and is returned as is. ctx's error and a storage
// error are returned wrapped, naming the partition and the offset reached.
// The value passed to row is valid only during the call.
func (r *Reader) Read(ctx context.Context, part isequencer.PartitionID, from isequencer.PLogOffset, row func(off isequencer.PLogOffset, value []byte) error) error {
	next := uint64(from)
	first := next == 0 // the first row read sets the start
	var (
		rowErr error
		pKey   = make([]byte, 0, 12)
		fromC  = make([]byte, 2)
		toC    = binary.BigEndian.AppendUint16(nil, Size)
	)
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%s: reading partition %d at offset %d: %w", r.l.Pkg, part, next, err)
		}
		block, start := next>>loBits, next
		pKey = r.l.AppendPKey(pKey[:0], part, block)
		binary.BigEndian.PutUint16(fromC, uint16(next&loMask))
		err := r.readBlock(ctx, pKey, fromC, toC, func(cCols, value []byte) error {
			if len(cCols) != 2 {
				rowErr = r.l.BadKey(part, block, cCols)
				return rowErr
			}
			off := block<<loBits | uint64(binary.BigEndian.Uint16(cCols))
			switch {
			case first:
				first, next, start = false, off, off
			case off != next:
				return errGap
			}
			if rowErr = row(isequencer.PLogOffset(off), value); rowErr != nil {
				return rowErr
			}
			next++
			return nil
		})
		switch {
		case rowErr != nil:
			return rowErr
		case errors.Is(err, errGap):
			return nil
		case err != nil:
			return fmt.Errorf("%s: reading partition %d at offset %d: %w", r.l.Pkg, part, next, err)
		case next == start || next&loMask != 0:
			// Nothing read, or the block ended before its last offset:
			// the log ends here.
			return nil
		}
	}
}

func (r *Reader) readBlock(ctx context.Context, pKey, from, to []byte, cb func(cCols, value []byte) error) error {
	if r.pageTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.pageTimeout)
		defer cancel()
	}
	return r.st.Read(ctx, pKey, from, to, cb)
}
