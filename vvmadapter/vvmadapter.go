// Package vvmadapter owns every stored layout of the sequencer's state:
// the workspaces' numbers, each partition's next PLog offset and its
// ownership epoch, as rows of the storage contract, byte-compatible with
// the reference platform where the reference has them. Nothing else builds
// these keys or decodes these values: readers such as the CLI's inspect
// and verify use DecodeNumberCell, ReadNumberCells, GetNumbersMax and
// ReadEpoch.
//
//	numbers:       pKey = u32 PKeyPrefixSeqStorageWS (3) ‖ u32 ClusterAppID ‖ u64 WSID
//	  seed cell    cCols = u16 SeqID                  (written in every mode)
//	  epoch cell   cCols = u16 SeqID ‖ u64 epoch      (written by fenced owners before
//	                                                   version ranges; read only now)
//	offset:        pKey = u32 PKeyPrefixSeqStoragePart (2) ‖ u32 ClusterAppID ‖ u16 PartitionID
//	               cCols = u32 PLogOffsetCC (0)
//	epoch:         pKey = the offset's pKey, cCols = u32 EpochCC (1)
//	               value = u64 epoch ‖ u64 top of the versions reserved
//	               (fenced.go; an 8-byte value is the epoch alone, written
//	               before version ranges); both only grow (absent = 0)
//	floors:        pKey = the offset's pKey, cCols = u32 FloorsCC (2)
//	               value = n × (u16 SeqID ‖ u64 floor), ascending SeqIDs
//	               (floors.go; written by `cqlseq advance` only)
//	PLog writes:   pKey = the offset's pKey, cCols = u32 PLogWritesCC (3)
//	               value = u8 PLogWrites: 0 conditional, 1 versioned
//	               (plogwrites.go; written by every owner as it opens)
//	layout:        pKey = u32 PKeyPrefixSeqStorageApp (4) ‖ u32 ClusterAppID
//	               cCols = u32 PartitionCountCC (0)
//	               value = u64 number of partitions; written once (layout.go)
//	values:        big-endian u64
//
// A workspace's number of a sequence is the maximum over its seed cell and
// any epoch cells (GetNumbersMax), so the epoch cells that fenced owners
// wrote before version ranges keep counting; no owner writes new ones.
//
// Ownership: every writer of a partition's numbers or next PLog offset is
// an owner of that partition. The only way to write them is an Owner, which
// Adapter.TakeOver returns after taking a new epoch and a range of write
// versions above every earlier owner's (a compare-and-swap of the epoch
// row); every write of an Owner carries one of its versions
// (storage.Versions): of two owners' writes of one cell the later owner's
// stays, whatever their order of arrival and whatever the two machines'
// clocks say, and an owner's later writes replace its earlier ones. So a
// deposed owner's late write never lowers the number a later owner reads,
// in any mode, and the mode of a partition may change between opens.
//
// Fencing: this package holds the ownership epoch; the PLog's fences are
// plog's; the takeover that runs both is apppart's.
//
// All integers are big-endian. One workspace's numbers are one partition,
// so reading all SeqIDs of a workspace is one partition read.
package vvmadapter

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/storage"
)

// Key prefixes and clustering constants. Values are persisted: never change
// them.
const (
	PKeyPrefixSeqStoragePart uint32 = 2
	PKeyPrefixSeqStorageWS   uint32 = 3
	// PLogOffsetCC is the clustering key of a partition's next PLog offset.
	PLogOffsetCC uint32 = 0
	// EpochCC is the clustering key of a partition's ownership epoch
	// (fenced mode).
	EpochCC uint32 = 1
	// FloorsCC is the clustering key of a partition's number floors
	// (floors.go).
	FloorsCC uint32 = 2
	// PLogWritesCC is the clustering key of how a partition's last owner
	// wrote its PLog (plogwrites.go).
	PLogWritesCC uint32 = 3
)

// WSKey returns the partition key of a workspace's numbers.
func WSKey(app isequencer.ClusterAppID, ws isequencer.WSID) []byte {
	b := make([]byte, 0, 16)
	b = binary.BigEndian.AppendUint32(b, PKeyPrefixSeqStorageWS)
	b = binary.BigEndian.AppendUint32(b, uint32(app))
	return binary.BigEndian.AppendUint64(b, uint64(ws))
}

// SeqCCols returns the clustering key of a sequence in its workspace.
func SeqCCols(id isequencer.SeqID) []byte { return binary.BigEndian.AppendUint16(nil, uint16(id)) }

// PartKey returns the partition key of a partition's sequencer state.
func PartKey(app isequencer.ClusterAppID, part isequencer.PartitionID) []byte {
	b := make([]byte, 0, 10)
	b = binary.BigEndian.AppendUint32(b, PKeyPrefixSeqStoragePart)
	b = binary.BigEndian.AppendUint32(b, uint32(app))
	return binary.BigEndian.AppendUint16(b, uint16(part))
}

// PartCCols returns a clustering key in a partition's state (PLogOffsetCC,
// EpochCC, FloorsCC).
func PartCCols(cc uint32) []byte { return binary.BigEndian.AppendUint32(nil, cc) }

// EncodeU64 and DecodeU64 are the value layout.
func EncodeU64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// DecodeU64 decodes a stored value; what names the row in the error.
func DecodeU64(b []byte, what string) (uint64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("vvmadapter: %s: value is %d bytes, want 8", what, len(b))
	}
	return binary.BigEndian.Uint64(b), nil
}

// Adapter reads one application's sequencer state, takes its partitions
// over (TakeOver, NextEpoch) and claims its layout. It writes no number and
// no next PLog offset: only an Owner, which TakeOver returns, does.
type Adapter struct {
	st           storage.Storage
	app          isequencer.ClusterAppID
	versionRange uint64 // VersionRange; smaller in this package's tests
}

// New returns an Adapter over st for app.
func New(st storage.Storage, app isequencer.ClusterAppID) *Adapter {
	return &Adapter{st: st, app: app, versionRange: VersionRange}
}

// putNumbers writes values to their seed cells with one PutBatch stamped
// with one version of v (nil: unversioned, for this package's tests only).
func (a *Adapter) putNumbers(ctx context.Context, v *storage.Versions, values []isequencer.SeqValue) error {
	if len(values) == 0 {
		return nil
	}
	rows := make([]storage.Row, len(values))
	for i, n := range values {
		rows[i] = storage.Row{PKey: WSKey(a.app, n.Key.WSID), CCols: SeqCCols(n.Key.SeqID), Value: EncodeU64(uint64(n.Value))}
	}
	if err := v.Stamp(ctx, rows); err != nil {
		return err
	}
	return a.st.PutBatch(ctx, rows)
}

// putPLogOffset writes a partition's next PLog offset stamped with one
// version of v (nil: unversioned, for this package's tests only).
func (a *Adapter) putPLogOffset(ctx context.Context, v *storage.Versions, part isequencer.PartitionID, off isequencer.PLogOffset) error {
	rows := []storage.Row{{PKey: PartKey(a.app, part), CCols: PartCCols(PLogOffsetCC), Value: EncodeU64(uint64(off))}}
	if err := v.Stamp(ctx, rows); err != nil {
		return err
	}
	return a.st.PutBatch(ctx, rows)
}

// GetPLogOffset reads a partition's stored next PLog offset.
func (a *Adapter) GetPLogOffset(ctx context.Context, part isequencer.PartitionID) (isequencer.PLogOffset, bool, error) {
	b, ok, err := a.st.Get(ctx, PartKey(a.app, part), PartCCols(PLogOffsetCC))
	if err != nil || !ok {
		if err != nil {
			err = fmt.Errorf("vvmadapter: reading next PLog offset of partition %d: %w", part, err)
		}
		return 0, false, err
	}
	v, err := DecodeU64(b, fmt.Sprintf("next PLog offset of partition %d", part))
	return isequencer.PLogOffset(v), err == nil, err
}
