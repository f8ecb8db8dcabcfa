package elections

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/cqlseq/cqlseq/storage"
)

// PKeyPrefixLeadership is the first four bytes of every leadership row's
// partition key (the reference platform's pKeyPrefix_VVMLeader). It is
// persisted: never change it. vvmadapter uses prefixes 2, 3 and 4.
const PKeyPrefixLeadership uint32 = 1

// Row selects one of the two rows of a leadership key. Values are
// persisted: never change them.
type Row uint32

// Rows of a leadership key.
const (
	// RowLease holds the current lease, with a TTL: an 8-byte nonce unique
	// to the acquisition, then the holder's value.
	RowLease Row = 0
	// RowEpoch holds the key's epoch counter, without TTL: a big-endian
	// u64 epoch, then the nonce of the acquisition that set it.
	RowEpoch Row = 1
)

// RowKey addresses one row of one leadership key.
type RowKey struct {
	Key uint32
	Row Row
}

// TTLStorage implements ITTLStorage[RowKey, []byte] over a storage.Storage:
//
//	pKey  = u32 PKeyPrefixLeadership ‖ u32 key
//	cCols = u32 row (RowLease, RowEpoch)
//
// All integers are big-endian, so one key's rows are one partition.
// NewTTLStorageKeyed puts the rows under other partition keys.
type TTLStorage struct {
	st   storage.Storage
	pKey func(key uint32) []byte
}

var _ ITTLStorage[RowKey, []byte] = (*TTLStorage)(nil)

// NewTTLStorage returns a TTLStorage over st.
func NewTTLStorage(st storage.Storage) (*TTLStorage, error) {
	if st == nil {
		return nil, fmt.Errorf("elections: %w: nil storage", storage.ErrInvalidArgument)
	}
	return &TTLStorage{st: st, pKey: PKey}, nil
}

// NewTTLStorageKeyed returns a TTLStorage over st whose key k's rows live in
// partition pKey(k) (clustering keys as CCols): for leaderships kept apart
// from PKeyPrefixLeadership's, such as timeshard's node leases. pKey must be
// injective and its partitions must hold nothing else.
func NewTTLStorageKeyed(st storage.Storage, pKey func(key uint32) []byte) (*TTLStorage, error) {
	if st == nil || pKey == nil {
		return nil, fmt.Errorf("elections: %w: nil storage or partition key function", storage.ErrInvalidArgument)
	}
	return &TTLStorage{st: st, pKey: pKey}, nil
}

// PKey returns the partition key of a leadership key's rows.
func PKey(key uint32) []byte {
	b := make([]byte, 0, 8)
	b = binary.BigEndian.AppendUint32(b, PKeyPrefixLeadership)
	return binary.BigEndian.AppendUint32(b, key)
}

// CCols returns the clustering key of a row.
func CCols(r Row) []byte { return binary.BigEndian.AppendUint32(nil, uint32(r)) }

// InsertIfNotExist implements ITTLStorage.
func (s *TTLStorage) InsertIfNotExist(ctx context.Context, k RowKey, val []byte, ttl time.Duration) (bool, error) {
	ok, err := s.st.InsertIfNotExists(ctx, s.pKey(k.Key), CCols(k.Row), val, ttl)
	if err != nil {
		return false, fmt.Errorf("elections: inserting %v: %w", k, err)
	}
	return ok, nil
}

// CompareAndSwap implements ITTLStorage.
func (s *TTLStorage) CompareAndSwap(ctx context.Context, k RowKey, oldVal, newVal []byte, ttl time.Duration) (bool, error) {
	ok, err := s.st.CompareAndSwap(ctx, s.pKey(k.Key), CCols(k.Row), oldVal, newVal, ttl)
	if err != nil {
		return false, fmt.Errorf("elections: swapping %v: %w", k, err)
	}
	return ok, nil
}

// CompareAndDelete implements ITTLStorage.
func (s *TTLStorage) CompareAndDelete(ctx context.Context, k RowKey, val []byte) (bool, error) {
	ok, err := s.st.CompareAndDelete(ctx, s.pKey(k.Key), CCols(k.Row), val)
	if err != nil {
		return false, fmt.Errorf("elections: deleting %v: %w", k, err)
	}
	return ok, nil
}

// Get implements ITTLStorage.
func (s *TTLStorage) Get(ctx context.Context, k RowKey) ([]byte, bool, error) {
	v, ok, err := s.st.Get(ctx, s.pKey(k.Key), CCols(k.Row))
	if err != nil {
		return nil, false, fmt.Errorf("elections: reading %v: %w", k, err)
	}
	return v, ok, nil
}

func (k RowKey) String() string {
	switch k.Row {
	case RowLease:
		return fmt.Sprintf("lease of key %d", k.Key)
	case RowEpoch:
		return fmt.Sprintf("epoch of key %d", k.Key)
	}
	return fmt.Sprintf("row %d of key %d", k.Row, k.Key)
}
