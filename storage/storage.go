// Package storage is cqlseq's key-value contract: rows of (partition key,
// clustering columns, value), all bytes, as in a CQL table
//
//	values(p_key blob, c_col blob, value blob, PRIMARY KEY ((p_key), c_col))
//
// Drivers: storage/cql (Cassandra, ScyllaDB), storage/boltdb (one bbolt file
// on one machine), storage/mem (tests and the in-memory demo).
// storage/storagetest holds the conformance suite every driver runs;
// storage/faulty is a fault-injecting wrapper for tests and the bench;
// storage/adversary plays, at random, everything the contract allows a
// store to do (see Storage), for simulations.
//
// Byte slices passed to a Storage are not retained after the call returns;
// slices a Storage returns (or passes to a callback) are owned by the caller,
// except where a method says otherwise.
package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Sentinel errors. Drivers wrap them; compare with errors.Is.
var (
	// ErrUnknownOutcome: a conditional write timed out and a SERIAL re-read
	// could not tell whether it was applied. The caller must re-read before
	// deciding; it must never blindly retry.
	ErrUnknownOutcome = errors.New("storage: conditional write outcome unknown")

	// ErrClosed: the Storage was closed.
	ErrClosed = errors.New("storage: closed")

	// ErrInvalidArgument: a call's arguments break the contract (empty
	// partition key, negative TTL, batch spanning partitions where one is
	// required, ...).
	ErrInvalidArgument = errors.New("storage: invalid argument")

	// ErrUnavailable: the store could not be reached or did not answer in
	// time. Retrying later may succeed.
	ErrUnavailable = errors.New("storage: unavailable")

	// ErrAuthentication: the store refused the credentials (a wrong user
	// name or password), or requires credentials that were not given.
	// Retrying with the same credentials cannot succeed.
	ErrAuthentication = errors.New("storage: authentication failed")

	// ErrAuthorization: the store authenticated the caller but refused an
	// operation its role has no permission for. Retrying cannot succeed.
	ErrAuthorization = errors.New("storage: not authorized")

	// ErrTLS: the TLS handshake failed: the server's certificate was not
	// verified (unknown authority, wrong host name, expired), the server
	// does not speak TLS, or it refused the client's certificate. Retrying
	// with the same configuration cannot succeed.
	ErrTLS = errors.New("storage: TLS handshake failed")
)

// Row is one row of the table.
//
// Version orders the unconditional writes of a row independently of when
// they arrive and of any clock: of two writes of one row, the one with the
// higher Version stays, whatever their order of arrival (a late or
// re-delivered write with a lower Version changes nothing). Version 0 is
// an unversioned write: it orders below every versioned one, and among
// unversioned writes the store's own order applies (the call order on an
// embedded store, the client clock on CQL). Between two writes of equal
// non-zero Version either may stay: a writer gives every logical write of
// a row its own Version (see Versions). Version is honoured by PutBatch and
// by the rows of a conditional batch that has no conditions; a row of a
// batch with conditions must have Version 0 (ErrInvalidArgument), and a row
// written with versions must not also be written by CompareAndSwap or
// CompareAndDelete (on CQL their Paxos write would be shadowed by the
// version). A conditional insert of a versioned row finds it and does not
// apply; a row inserted conditionally may be replaced by a versioned write
// (the PLog's gap markers and trust2 events over conditional events).
type Row struct {
	PKey    []byte
	CCols   []byte
	Value   []byte
	Version uint64
}

// MaxVersion is the largest Row.Version (CQL stores a version as a write
// timestamp above every wall-clock one: 1<<62 + Version).
const MaxVersion = 1<<62 - 1

// GetItem is one clustering key to read in GetBatch; GetBatch fills Ok and
// Value.
type GetItem struct {
	CCols []byte
	Ok    bool
	Value []byte
}

// Condition is one precondition of a conditional batch. A nil Expected
// means "the row must not exist"; otherwise the row must exist with exactly
// that value.
type Condition struct {
	CCols    []byte
	Expected []byte
}

// Storage is the contract. Every call takes a context and honours its
// deadline and cancellation (returning an error that wraps ctx.Err()).
// Not found is reported as ok == false, never as an error. A row written with
// a TTL is absent to every read once the TTL has passed, and may be absent up
// to 1 s before: CQL counts a TTL in whole seconds from the second the write
// was applied in (a row written at 10.9 s with a TTL of 1 s expires at 11 s;
// elections.Options.Skew allows for it). Methods are safe for concurrent use.
//
// What the contract allows, each with the storage/adversary option that
// plays it (at random, from a seed):
//   - A failed unconditional write (Put, PutBatch) may have landed whole
//     (WriteLost: applied, the answer an error), or may land later (after
//     any number of other calls, of any client, including after the
//     writer's process died and another owner took over) or never
//     (WriteHeld, with Deliver and Drop choosing when), in any subset of
//     its rows (WritePartial); on a MultiApplier store, whose PutBatch is
//     one transaction, in all its rows or none.
//   - A conditional write whose outcome is unknown (ErrUnknownOutcome) may
//     have applied (CondLost), or may take effect later, judged against
//     the state at that moment, or never (CondHeld); one that fails with
//     another error was not applied (CondNotSent).
//   - A read may fail (ReadFail), and sees a state that includes every
//     acknowledged write and any subset of the unacknowledged ones (the
//     held writes are invisible until they land).
//   - A late write of a lower Version replaces nothing (see Row); a late
//     conditional insert finds a versioned row and does not apply.
//
// Nothing else: an acknowledged write stays (but for a higher Version's
// replacement), and a conditional write never reports ok for a write it
// did not apply.
type Storage interface {
	// Get reads one row.
	Get(ctx context.Context, pKey, cCols []byte) (value []byte, ok bool, err error)

	// GetBatch reads the given clustering keys of one partition and fills
	// each item's Ok and Value. Items may repeat keys.
	GetBatch(ctx context.Context, pKey []byte, items []GetItem) error

	// Put writes one row, unconditionally, without TTL.
	Put(ctx context.Context, pKey, cCols, value []byte) error

	// PutBatch writes rows of any partitions unconditionally, each ordered
	// by its Version against other writes of the row (see Row). It is
	// atomic per partition at most; when it returns an error, any subset of
	// rows may have been written, now or later. An empty batch is a no-op.
	// A Version above MaxVersion is ErrInvalidArgument.
	PutBatch(ctx context.Context, rows []Row) error

	// Read calls cb for each row of partition pKey whose clustering key is
	// in [fromCCols, toCCols) in ascending byte order; a nil bound is open.
	// Rows are fetched in pages; cb's slices are valid only during the call.
	// A cb error stops the read and is returned as is.
	Read(ctx context.Context, pKey, fromCCols, toCCols []byte, cb func(cCols, value []byte) error) error

	// ReadPartitions reads many partitions in one request: for each of
	// pKeys it calls cb with the rows Read(pKey, fromCCols, toCCols) would
	// give, with their partition key. A partition's rows come together and
	// in ascending clustering order; the partitions come in no particular
	// order; a key given twice is read once. At most MaxReadPartitions keys
	// (more, or an empty key, is ErrInvalidArgument); none reads nothing.
	// cb's slices are valid only during the call; a cb error stops the
	// read and is returned as is. On CQL it is one query (p_key IN ...):
	// a caller that reads many small partitions saves a request per
	// partition, in the server's and the client's work.
	ReadPartitions(ctx context.Context, pKeys [][]byte, fromCCols, toCCols []byte, cb func(pKey, cCols, value []byte) error) error

	// Conditional writes (InsertIfNotExists, CompareAndSwap,
	// CompareAndDelete, ApplyBatchIf with conditions) report ok == true only
	// if this call applied the write. When the outcome cannot be known (a
	// timeout after the request was sent) the driver may settle it by a
	// linearizable re-read that proves this call's own write (an after-state
	// no other call can produce); otherwise the call fails with an error
	// wrapping ErrUnknownOutcome, and the write may or may not take effect.
	// A write equal in value to a competitor's is never taken for one's own.

	// InsertIfNotExists writes the row only if it does not exist (an expired
	// row does not exist). ttl 0 means no expiry. ok reports whether it was
	// written.
	InsertIfNotExists(ctx context.Context, pKey, cCols, value []byte, ttl time.Duration) (ok bool, err error)

	// CompareAndSwap replaces the row's value with newValue only if it exists
	// with value oldValue; the new row gets ttl (0: no expiry).
	CompareAndSwap(ctx context.Context, pKey, cCols, oldValue, newValue []byte, ttl time.Duration) (ok bool, err error)

	// CompareAndDelete deletes the row only if it exists with value expected.
	CompareAndDelete(ctx context.Context, pKey, cCols, expected []byte) (ok bool, err error)

	// ApplyBatchIf writes rows (all in partition pKey, without TTL) only if
	// every condition holds, atomically: all or nothing. A written row that
	// is also named by a nil-Expected condition is an insert-if-not-exists.
	// ok reports whether the batch was applied.
	ApplyBatchIf(ctx context.Context, pKey []byte, conds []Condition, rows []Row) (ok bool, err error)

	// QueryTTL returns the remaining time to live of a row; 0 for a row that
	// does not expire.
	QueryTTL(ctx context.Context, pKey, cCols []byte) (ttl time.Duration, ok bool, err error)

	// Close releases the store. Calls after Close return ErrClosed.
	Close() error
}

// ValidateTTL reports a TTL the contract does not accept. Every driver calls
// it so that all reject the same values: negative, or sub-second and
// non-zero (CQL TTLs are whole seconds), or above the CQL maximum of 20 years.
func ValidateTTL(ttl time.Duration) error {
	switch {
	case ttl < 0:
		return fmt.Errorf("%w: negative TTL %v", ErrInvalidArgument, ttl)
	case ttl != 0 && ttl%time.Second != 0:
		return fmt.Errorf("%w: TTL %v is not whole seconds", ErrInvalidArgument, ttl)
	case ttl > MaxTTL:
		return fmt.Errorf("%w: TTL %v above the CQL maximum of 20 years", ErrInvalidArgument, ttl)
	}
	return nil
}

// MaxTTL is the largest TTL CQL accepts (630,720,000 s).
const MaxTTL = 630720000 * time.Second

// MaxReadPartitions is the most partition keys one ReadPartitions takes:
// ScyllaDB refuses more than 100 partition-key restrictions in a query by
// default (max_partition_key_restrictions_per_query).
const MaxReadPartitions = 100

// DefaultWriteWorkers is how many storage partitions one caller's write
// of many partitions writes concurrently by default: storage/cql's
// PutBatch, seqstorage's numbers. A partition's flush holds one partition
// per workspace it writes, so this bounds the cold workspaces it flushes
// per round trip: at 256, a partition on a store of 5 ms round trips
// flushes as fast as 256 clients of cold workspaces issue numbers
// (appparttest's BenchmarkFlowDelayed, docs/benchmarks.md); at 32 every
// mode stopped near 6,200 commands/s and answered the rest busy.
const DefaultWriteWorkers = 256

// DistinctReadKeys checks pKeys as ReadPartitions takes them and returns
// them without repeats, in their order (pKeys itself when none repeats).
// More than MaxReadPartitions keys or an empty key is an error wrapping
// ErrInvalidArgument. Every driver calls it, so that all reject the same
// calls and read a repeated key once.
func DistinctReadKeys(pKeys [][]byte) ([][]byte, error) {
	if len(pKeys) > MaxReadPartitions {
		return nil, fmt.Errorf("%w: %d partition keys, at most %d in one read", ErrInvalidArgument, len(pKeys), MaxReadPartitions)
	}
	out := pKeys
	for i, k := range pKeys {
		if len(k) == 0 {
			return nil, fmt.Errorf("%w: partition key %d of %d is empty", ErrInvalidArgument, i, len(pKeys))
		}
		repeated := slices.ContainsFunc(pKeys[:i], func(p []byte) bool { return bytes.Equal(p, k) })
		switch {
		case repeated && len(out) == len(pKeys):
			out = slices.Clone(pKeys[:i])
		case !repeated && len(out) < len(pKeys):
			out = append(out, k)
		}
	}
	return out, nil
}

// CondBatch is one conditional batch of a MultiApplier call: Rows (all in
// partition PKey, without TTL) are written only if every condition of
// Conds holds (as for ApplyBatchIf) and every batch named by Requires (the
// indexes of earlier batches of the call) was applied. A batch without
// conditions and requirements is always applied.
type CondBatch struct {
	PKey     []byte
	Conds    []Condition
	Rows     []Row
	Requires []int
}

// Holds reports whether c holds for a row with value value (exists) or
// for a missing row (!exists).
func (c Condition) Holds(value []byte, exists bool) bool {
	if c.Expected == nil {
		return !exists
	}
	return exists && bytes.Equal(value, c.Expected)
}

// Ready reports whether every batch b requires is applied in applied (the
// outcomes so far of its MultiApplier call).
func (b CondBatch) Ready(applied []bool) bool {
	for _, k := range b.Requires {
		if !applied[k] {
			return false
		}
	}
	return true
}

// MultiApplier is implemented by a store that can apply conditional batches
// of several partitions in one atomic transaction: the embedded drivers
// (storage/boltdb, storage/mem), not CQL, whose conditional batches span one
// partition. A caller that finds it may use one ApplyBatchesIf where it
// would otherwise make a sequence of ApplyBatchIf and PutBatch calls whose
// later calls depend on the earlier ones' outcomes. A driver that
// implements it also commits each PutBatch as one transaction (see
// Capabilities.PutBatchOneTransaction). Callers find it with Probe.
type MultiApplier interface {
	// ApplyBatchesIf applies batches in order in one transaction: each
	// batch's conditions are judged after the batches before it were
	// applied, and applied[i] (len(applied) == len(batches)) reports
	// whether batch i was. On a nil error every applied batch is durable;
	// on an error nothing is applied (the error wraps
	// storage.ErrUnknownOutcome when the commit's outcome is unknown) and
	// applied is all false. A Requires index that is not of an earlier
	// batch, an empty partition key or a row in another partition than
	// its batch's is an error wrapping ErrInvalidArgument, and nothing is
	// written.
	ApplyBatchesIf(ctx context.Context, batches []CondBatch, applied []bool) error
}

// Wrapper is implemented by a Storage that wraps another (fault injection,
// metrics): Unwrap returns the wrapped one. Optional capabilities are found
// through it (Probe), so that wrapping a store
// never switches a caller to a slower path. A wrapper passes a capability
// through by implementing its interface itself, delegating to the wrapped
// storage (so that its faults and metrics still apply).
type Wrapper interface {
	Unwrap() Storage
}

// AsMultiApplier, Probe's finder of MultiApplier, returns st as a
// MultiApplier when st implements it and so does every storage under it (see Wrapper): the innermost one applies the
// batches, and every wrapper on the way passes the calls through. A
// wrapper's ApplyBatchesIf over a storage that is not a MultiApplier
// refuses the call.
func AsMultiApplier(st Storage) (MultiApplier, bool) {
	ma, ok := st.(MultiApplier)
	if !ok {
		return nil, false
	}
	for w, ok := st.(Wrapper); ok; w, ok = st.(Wrapper) {
		if st = w.Unwrap(); st == nil {
			return nil, false
		}
		if _, ok := st.(MultiApplier); !ok {
			return nil, false
		}
	}
	return ma, true
}

// GroupCommitter is implemented by a store that commits the writes of
// concurrent callers together (storage/boltdb): the more callers write at
// once, the fewer commits they share. GroupCommits reports the commits made
// and the writes they carried so far.
type GroupCommitter interface {
	GroupCommits() (commits, writes uint64)
}

// AsGroupCommitter, Probe's finder of GroupCommitter, returns the
// GroupCommitter at st or under it (see Wrapper), if any.
func AsGroupCommitter(st Storage) (GroupCommitter, bool) {
	for st != nil {
		if gc, ok := st.(GroupCommitter); ok {
			return gc, true
		}
		w, ok := st.(Wrapper)
		if !ok {
			break
		}
		st = w.Unwrap()
	}
	return nil, false
}

// ErrNotMultiApplier is the error of a wrapper's ApplyBatchesIf over a
// storage that is not a MultiApplier (wrapping ErrInvalidArgument).
var ErrNotMultiApplier = fmt.Errorf("%w: the wrapped storage does not apply batches of several partitions (see AsMultiApplier)", ErrInvalidArgument)

// ApplyOne is ApplyBatchIf for a driver that is a MultiApplier: one batch
// of ApplyBatchesIf.
func ApplyOne(ctx context.Context, ma MultiApplier, pKey []byte, conds []Condition, rows []Row) (bool, error) {
	var applied [1]bool
	err := ma.ApplyBatchesIf(ctx, []CondBatch{{PKey: pKey, Conds: conds, Rows: rows}}, applied[:])
	return applied[0], err
}

// ValidateBatches reports the first problem ApplyBatchesIf refuses in
// batches or applied (see MultiApplier), wrapping ErrInvalidArgument.
// Drivers call it so that all refuse the same arguments.
func ValidateBatches(batches []CondBatch, applied []bool) error {
	if len(applied) != len(batches) {
		return fmt.Errorf("%w: %d applied flags for %d batches", ErrInvalidArgument, len(applied), len(batches))
	}
	for i, b := range batches {
		if len(b.PKey) == 0 {
			return fmt.Errorf("%w: batch %d: empty partition key", ErrInvalidArgument, i)
		}
		for j, r := range b.Rows {
			if !bytes.Equal(r.PKey, b.PKey) {
				return fmt.Errorf("%w: batch %d: row %d in another partition", ErrInvalidArgument, i, j)
			}
		}
		if err := ValidateVersions(b.Rows, len(b.Conds) > 0); err != nil {
			return fmt.Errorf("batch %d: %w", i, err)
		}
		for _, k := range b.Requires {
			if k < 0 || k >= i {
				return fmt.Errorf("%w: batch %d requires batch %d, not an earlier one", ErrInvalidArgument, i, k)
			}
		}
	}
	return nil
}

// ValidateVersions reports the first row of rows whose Version the contract
// refuses (see Row), wrapping ErrInvalidArgument: above MaxVersion, or
// non-zero in a conditional batch (conditional). Drivers call it so that
// all refuse the same rows.
func ValidateVersions(rows []Row, conditional bool) error {
	for j, r := range rows {
		switch {
		case r.Version > MaxVersion:
			return fmt.Errorf("%w: row %d: version %d above MaxVersion %d", ErrInvalidArgument, j, r.Version, uint64(MaxVersion))
		case r.Version != 0 && conditional:
			return fmt.Errorf("%w: row %d: a versioned row in a batch with conditions", ErrInvalidArgument, j)
		}
	}
	return nil
}

// Replaces reports whether an unconditional write of version v replaces a
// stored row of version stored (see Row): embedded drivers apply it with
// the row's version kept beside its value.
func Replaces(v, stored uint64) bool { return v >= stored }
