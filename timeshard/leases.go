package timeshard

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/cqlseq/cqlseq/elections"
	"github.com/cqlseq/cqlseq/storage"
)

// PKeyPrefixTimeshard is the first four bytes of every timeshard row's
// partition key. It is persisted: never change it. (elections uses 1,
// vvmadapter 2 and 3, galloc 16.)
const PKeyPrefixTimeshard uint32 = 17

// MaxNameLen is the longest generator name, in bytes.
const MaxNameLen = 200

// rowHighWater is the clustering key (after elections' lease and epoch
// rows) of a node's high-water row: a big-endian i64, the last millisecond
// (since the Unix epoch) a closing holder made IDs in.
const rowHighWater elections.Row = 2

// NodePKey returns the partition key of node's rows of generator name:
//
//	pKey  = u32 PKeyPrefixTimeshard ‖ u32 node ‖ name (UTF-8)
//	cCols = u32 row: 0 lease, 1 epoch (elections' rows), 2 high water;
//	        3 the layout, under node LayoutNode only (layoutrow.go)
func NodePKey(name string, node uint32) []byte {
	b := make([]byte, 0, 8+len(name))
	b = binary.BigEndian.AppendUint32(b, PKeyPrefixTimeshard)
	b = binary.BigEndian.AppendUint32(b, node)
	return append(b, name...)
}

// nodes holds the rows of one generator name's node IDs: the leases (an
// elections.TTLStorage over NodePKey) and the high-water rows.
type nodes struct {
	st     storage.Storage
	name   string
	leases *elections.TTLStorage
}

func newNodes(st storage.Storage, name string) (nodes, error) {
	ls, err := elections.NewTTLStorageKeyed(st, func(node uint32) []byte { return NodePKey(name, node) })
	return nodes{st: st, name: name, leases: ls}, err
}

// highWater reads node's high-water millisecond; ok is false when none is
// stored.
func (s nodes) highWater(ctx context.Context, node uint32) (ms int64, ok bool, err error) {
	v, ok, err := s.st.Get(ctx, NodePKey(s.name, node), elections.CCols(rowHighWater))
	switch {
	case err != nil:
		return 0, false, fmt.Errorf("timeshard: reading the high water of node %d: %w", node, err)
	case !ok:
		return 0, false, nil
	case len(v) != 8:
		return 0, false, fmt.Errorf("timeshard: high water of node %d: %d bytes, want 8", node, len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), true, nil
}

// putHighWater records ms as node's high water. The row only ever grows:
// the write's version is the millisecond itself (storage.Row.Version), so
// a later holder's higher mark stays whatever order the writes arrive in
// and whatever the holders' clocks, where client timestamps let an earlier
// holder with a clock ahead shadow it.
func (s nodes) putHighWater(ctx context.Context, node uint32, ms int64) error {
	if ms <= 0 || uint64(ms) > storage.MaxVersion {
		return fmt.Errorf("timeshard: high water %d of node %d: %w: outside 1..MaxVersion", ms, node, storage.ErrInvalidArgument)
	}
	v := binary.BigEndian.AppendUint64(nil, uint64(ms))
	row := storage.Row{PKey: NodePKey(s.name, node), CCols: elections.CCols(rowHighWater), Value: v, Version: uint64(ms)}
	if err := s.st.PutBatch(ctx, []storage.Row{row}); err != nil {
		return fmt.Errorf("timeshard: writing the high water of node %d: %w", node, err)
	}
	return nil
}
