package vvmadapter

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/storage"
)

// ErrBadCell: a stored row of a workspace's numbers partition does not
// decode as a number cell.
var ErrBadCell = errors.New("vvmadapter: bad number cell")

// NumberCell is one decoded row of a workspace's numbers partition: a
// seed cell (Epoch 0, clustering key u16 SeqID) or a fenced owner's epoch
// cell (clustering key u16 SeqID ‖ u64 epoch, epoch > 0).
type NumberCell struct {
	SeqID  isequencer.SeqID
	Epoch  uint64
	Number isequencer.Number
}

// String names the cell as errors and reports do: "SeqID 2" or
// "SeqID 2@epoch 5", then " = number".
func (c NumberCell) String() string {
	return fmt.Sprintf("%s = %d", cellName(c.SeqID, c.Epoch), c.Number)
}

func cellName(id isequencer.SeqID, epoch uint64) string {
	if epoch == 0 {
		return fmt.Sprintf("SeqID %d", id)
	}
	return fmt.Sprintf("SeqID %d@epoch %d", id, epoch)
}

// DecodeNumberCell decodes one row of a workspace's numbers partition
// (the layout in the package doc). A clustering key that is neither 2 nor
// 10 bytes, an epoch cell of epoch 0 (never written: epochs start at 1), or
// a value that is not 8 bytes is an error wrapping ErrBadCell.
func DecodeNumberCell(cCols, value []byte) (NumberCell, error) {
	var c NumberCell
	switch len(cCols) {
	case 2:
	case 10:
		if c.Epoch = binary.BigEndian.Uint64(cCols[2:]); c.Epoch == 0 {
			return NumberCell{}, fmt.Errorf("%w: clustering key %x: an epoch cell of epoch 0", ErrBadCell, cCols)
		}
	default:
		return NumberCell{}, fmt.Errorf("%w: clustering key %x is %d bytes, want 2 (SeqID) or 10 (SeqID, epoch)", ErrBadCell, cCols, len(cCols))
	}
	c.SeqID = isequencer.SeqID(binary.BigEndian.Uint16(cCols))
	if len(value) != 8 {
		return NumberCell{}, fmt.Errorf("%w: %s: value is %d bytes, want 8", ErrBadCell, cellName(c.SeqID, c.Epoch), len(value))
	}
	c.Number = isequencer.Number(binary.BigEndian.Uint64(value))
	return c, nil
}

// ReadNumberCells calls cb with every number cell of workspace ws, in
// clustering key order (per SeqID: the seed cell, then the epoch cells by
// epoch); one Read of the workspace's partition. A row that does not
// decode stops the read with an error wrapping ErrBadCell that names the
// WSID; a cb error is returned as is.
func (a *Adapter) ReadNumberCells(ctx context.Context, ws isequencer.WSID, cb func(NumberCell) error) error {
	var cbErr error
	err := a.st.Read(ctx, WSKey(a.app, ws), nil, nil, func(cCols, value []byte) error {
		c, err := DecodeNumberCell(cCols, value)
		if err != nil {
			cbErr = fmt.Errorf("vvmadapter: WSID %d: %w", ws, err)
			return cbErr
		}
		cbErr = cb(c)
		return cbErr
	})
	switch {
	case cbErr != nil:
		return cbErr
	case err != nil:
		return fmt.Errorf("vvmadapter: reading numbers of WSID %d: %w", ws, err)
	}
	return nil
}

// GetNumbersMax reads the numbers of ids in workspace ws into
// dst[:len(ids)]: per SeqID the maximum over its seed cell and every epoch
// cell, whichever mode wrote them; 0 when it has none. One Read of the
// workspace's partition. The values of SeqIDs not in ids are not decoded;
// a clustering key of neither layout, or a cell of a SeqID in ids that
// does not decode, is an error wrapping ErrBadCell that names the WSID,
// and dst[:len(ids)] is then zeroed. A dst
// shorter than ids is an error wrapping storage.ErrInvalidArgument.
func (a *Adapter) GetNumbersMax(ctx context.Context, ws isequencer.WSID, ids []isequencer.SeqID, dst []isequencer.Number) error {
	if len(dst) < len(ids) {
		return fmt.Errorf("vvmadapter: %w: %d SeqIDs, room for %d numbers", storage.ErrInvalidArgument, len(ids), len(dst))
	}
	if len(ids) == 0 {
		return nil
	}
	dst = dst[:len(ids)]
	clear(dst)
	var cellErr error
	err := a.st.Read(ctx, WSKey(a.app, ws), nil, nil, func(cCols, value []byte) error {
		cellErr = maxCell(ids, dst, cCols, value)
		return cellErr
	})
	switch {
	case cellErr != nil:
		clear(dst)
		return fmt.Errorf("vvmadapter: WSID %d: %w", ws, cellErr)
	case err != nil:
		clear(dst)
		return fmt.Errorf("vvmadapter: reading numbers of WSID %d: %w", ws, err)
	}
	return nil
}

// maxCell raises dst[i] to the number of the cell (cCols, value) for
// every ids[i] of its SeqID; a cell of another SeqID is not decoded.
func maxCell(ids []isequencer.SeqID, dst []isequencer.Number, cCols, value []byte) error {
	if len(cCols) != 2 && len(cCols) != 10 {
		_, err := DecodeNumberCell(cCols, value)
		return err
	}
	if !slices.Contains(ids, isequencer.SeqID(binary.BigEndian.Uint16(cCols))) {
		return nil
	}
	c, err := DecodeNumberCell(cCols, value)
	if err != nil {
		return err
	}
	for i, want := range ids {
		if want == c.SeqID {
			dst[i] = max(dst[i], c.Number)
		}
	}
	return nil
}

// WorkspaceNumbers is one workspace's read of GetWorkspacesNumbersMax:
// the numbers of IDs in WSID go to Numbers, as GetNumbersMax's dst.
type WorkspaceNumbers struct {
	WSID    isequencer.WSID
	IDs     []isequencer.SeqID
	Numbers []isequencer.Number
}

// GetWorkspacesNumbersMax does what GetNumbersMax does for each of reads,
// in one storage.ReadPartitions of their partitions: at most
// storage.MaxReadPartitions workspaces, each named once, each with room
// for its numbers (or an error wrapping storage.ErrInvalidArgument, and
// nothing read). On any error every read's Numbers are zeroed; a cell that
// does not decode is an error wrapping ErrBadCell that names its WSID.
func (a *Adapter) GetWorkspacesNumbersMax(ctx context.Context, reads []WorkspaceNumbers) error {
	if len(reads) > storage.MaxReadPartitions {
		return fmt.Errorf("vvmadapter: %w: %d workspaces, at most %d in one read", storage.ErrInvalidArgument, len(reads), storage.MaxReadPartitions)
	}
	keys := make([][]byte, 0, len(reads))
	index := make(map[string]int, len(reads))
	for i, r := range reads {
		if len(r.Numbers) < len(r.IDs) {
			return fmt.Errorf("vvmadapter: %w: WSID %d: %d SeqIDs, room for %d numbers", storage.ErrInvalidArgument, r.WSID, len(r.IDs), len(r.Numbers))
		}
		k := WSKey(a.app, r.WSID)
		if _, dup := index[string(k)]; dup {
			return fmt.Errorf("vvmadapter: %w: WSID %d read twice", storage.ErrInvalidArgument, r.WSID)
		}
		index[string(k)] = i
		keys = append(keys, k)
		clear(r.Numbers[:len(r.IDs)])
	}
	var cellErr error
	err := a.st.ReadPartitions(ctx, keys, nil, nil, func(pKey, cCols, value []byte) error {
		i, ok := index[string(pKey)]
		if !ok {
			cellErr = fmt.Errorf("vvmadapter: reading numbers: a row of partition %x, not asked for", pKey)
			return cellErr
		}
		r := reads[i]
		if err := maxCell(r.IDs, r.Numbers, cCols, value); err != nil {
			cellErr = fmt.Errorf("vvmadapter: WSID %d: %w", r.WSID, err)
		}
		return cellErr
	})
	if cellErr == nil && err != nil {
		cellErr = fmt.Errorf("vvmadapter: reading numbers of %d workspaces: %w", len(reads), err)
	}
	if cellErr != nil {
		for _, r := range reads {
			clear(r.Numbers[:len(r.IDs)])
		}
	}
	return cellErr
}
