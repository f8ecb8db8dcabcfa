package galloc

import (
	"context"
	"errors"
	"fmt"

	"github.com/cqlseq/cqlseq/storage"
)

// The catalog lists the sequences of a store: one row per name in one
// partition, so that List reads names in order and pages by name (a store
// has no list of its partitions). Its layout is persisted:
//
//	pKey  = u32 PKeyPrefixGalloc (no name: no sequence has the empty name)
//	cCols = name (UTF-8)
//	value = u8 1
//
// Open reads the row and writes it (an unconditional, idempotent Put) only
// when the read finds none: when it creates the sequence, and for a
// sequence created by an earlier release, before the catalog existed, which
// is listed once a process of this release opens it. Opening a listed
// sequence writes nothing to the catalog. The row is written before the
// record is created, so that every sequence opened by this release is
// listed; a row whose record is missing (a crash between the two writes)
// is not listed, and the next Open creates the record without writing the
// row again.

// catalogValue is the value of every catalog row.
var catalogValue = []byte{1}

// CatalogPKey returns the partition key of the catalog.
func CatalogPKey() []byte { return PKey("") }

// register writes name's catalog row unless a read finds it: one Get,
// and a Put only when the row is missing. Two processes registering one
// name at once may both write it; the Put is idempotent.
func register(ctx context.Context, st storage.Storage, name string) error {
	_, found, err := st.Get(ctx, CatalogPKey(), []byte(name))
	if err != nil {
		return fmt.Errorf("galloc: sequence %q: reading its catalog row: %w", name, err)
	}
	if found {
		return nil
	}
	if err := st.Put(ctx, CatalogPKey(), []byte(name), catalogValue); err != nil {
		return fmt.Errorf("galloc: sequence %q: writing its catalog row: %w", name, err)
	}
	return nil
}

// Listed is one sequence of List: its name and stored record.
type Listed struct {
	Name   string
	Record Record
}

// MaxListLimit is the largest page List reads.
const MaxListLimit = storage.MaxReadPartitions

// errPageFull stops the catalog read once a page is full.
var errPageFull = errors.New("galloc: page full")

// List returns the sequences of st whose names come after after ("" from
// the first), in byte order of their names, with their records, retired
// ones included: it reads up to limit (1..MaxListLimit) names of the
// catalog (one read) and their records (one ReadPartitions). next is the
// after of the next page, "" when no name follows. A page may hold fewer
// than limit sequences while next is not "" (a catalogued name without a
// record is skipped).
func List(ctx context.Context, st storage.Storage, after string, limit int) (page []Listed, next string, err error) {
	more := false
	if limit < 1 || limit > MaxListLimit {
		return nil, "", fmt.Errorf("galloc: List limit %d: %w: want 1..%d", limit, storage.ErrInvalidArgument, MaxListLimit)
	}
	var from []byte
	if after != "" {
		from = append([]byte(after), 0) // the first name after `after`
	}
	var names []string
	err = st.Read(ctx, CatalogPKey(), from, nil, func(cCols, _ []byte) error {
		if len(names) == limit {
			more = true
			return errPageFull
		}
		names = append(names, string(cCols))
		return nil
	})
	if err != nil && !errors.Is(err, errPageFull) {
		return nil, "", fmt.Errorf("galloc: reading the catalog: %w", err)
	}
	if len(names) == 0 {
		return nil, "", nil
	}
	if more {
		next = names[len(names)-1]
	}
	keys := make([][]byte, len(names))
	for i, n := range names {
		keys[i] = PKey(n)
	}
	recs := make(map[string]Record, len(names))
	state := StateCCols()
	err = st.ReadPartitions(ctx, keys, state, append(state, 0), func(pKey, cCols, value []byte) error {
		name := string(pKey[4:])
		var r Record
		if err := r.UnmarshalBinary(value); err != nil {
			return fmt.Errorf("galloc: sequence %q: %w", name, err)
		}
		recs[name] = r
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("galloc: reading the records of a page: %w", err)
	}
	page = make([]Listed, 0, len(names))
	for _, n := range names {
		if r, ok := recs[n]; ok {
			page = append(page, Listed{Name: n, Record: r})
		}
	}
	return page, next, nil
}
