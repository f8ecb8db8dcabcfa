package vvmadapter

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/storage"
)

// PKeyPrefixSeqStorageApp is the first four bytes of an application's
// layout row. Persisted: never change it.
const PKeyPrefixSeqStorageApp uint32 = 4

// PartitionCountCC is the clustering key of an application's partition
// count in its layout row. Persisted: never change it.
const PartitionCountCC uint32 = 0

// ErrPartitionCountChanged: ClaimPartitionCount was given another count
// than the one stored for the application.
var ErrPartitionCountChanged = errors.New("vvmadapter: the application's partition count changed")

// AppKey returns the partition key of an application's layout row:
// u32 PKeyPrefixSeqStorageApp ‖ u32 ClusterAppID.
func AppKey(app isequencer.ClusterAppID) []byte {
	b := make([]byte, 0, 8)
	b = binary.BigEndian.AppendUint32(b, PKeyPrefixSeqStorageApp)
	return binary.BigEndian.AppendUint32(b, uint32(app))
}

// ReadPartitionCount reads the application's stored partition count and
// whether one is stored.
func (a *Adapter) ReadPartitionCount(ctx context.Context) (uint64, bool, error) {
	b, ok, err := a.st.Get(ctx, AppKey(a.app), PartCCols(PartitionCountCC))
	if err != nil {
		return 0, false, fmt.Errorf("vvmadapter: reading the partition count of app %d: %w", a.app, err)
	}
	if !ok {
		return 0, false, nil
	}
	v, err := DecodeU64(b, fmt.Sprintf("partition count of app %d", a.app))
	return v, err == nil, err
}

// ClaimPartitionCount records n as the number of partitions the
// application's workspaces are spread over, or checks it against the
// count already recorded: the first claim stores n (insert if absent), every
// later claim must give the same n, else the error wraps
// ErrPartitionCountChanged and names both counts. n must be at least 1.
//
// Why: a workspace's numbers not yet flushed live only in the PLog tail of
// the partition that issued them. A workspace moved to another partition
// (what changing the count does to a mapping such as WSID mod n) would be
// served from the stored numbers alone and be given numbers it already
// had. The count is written once, with an insert-if-not-exists, and never
// changed by this package; a store written before this row existed has
// none, and its first claim records whatever count it is given.
//
// An insert whose outcome is unknown (storage.ErrUnknownOutcome) is
// decided by reading the row back.
func (a *Adapter) ClaimPartitionCount(ctx context.Context, n uint64) error {
	if n == 0 {
		return fmt.Errorf("vvmadapter: claiming partition count 0 for app %d: %w", a.app, storage.ErrInvalidArgument)
	}
	ok, err := a.st.InsertIfNotExists(ctx, AppKey(a.app), PartCCols(PartitionCountCC), EncodeU64(n), 0)
	switch {
	case err == nil && ok:
		return nil
	case err != nil && !errors.Is(err, storage.ErrUnknownOutcome):
		return fmt.Errorf("vvmadapter: recording the partition count %d of app %d: %w", n, a.app, err)
	}
	got, stored, err := a.ReadPartitionCount(ctx)
	switch {
	case err != nil:
		return err
	case !stored:
		return fmt.Errorf("vvmadapter: recording the partition count %d of app %d: %w (and no count is stored)", n, a.app, storage.ErrUnknownOutcome)
	case got != n:
		return fmt.Errorf("%w: app %d was run with %d partitions, not %d", ErrPartitionCountChanged, a.app, got, n)
	}
	return nil
}
