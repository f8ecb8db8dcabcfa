// Package isequencer is the sequencer core: it owns the in-memory state of
// the per-workspace sequence numbers and PLog offsets it hands out. It keeps
// the next values of recently used sequences in an LRU, flushes issued
// values to an injected ISeqStorage in batches, and on start (or after a
// failed PLog write) actualizes its state from the PLog tail that follows
// the last flushed offset. Its one long-lived goroutine, the worker, is
// stopped by cleanup, which also cancels the storage calls still in flight
// after a grace of 50 ms (ISeqStorageCanceler).
//
// The package imports nothing of cqlseq: storage is injected through
// ISeqStorage.
package isequencer

import (
	"context"
	"log/slog"
	"time"
)

// SeqID identifies a sequence within a workspace kind.
type SeqID uint16

// WSKind is the kind of a workspace; it selects the set of sequences.
type WSKind uint16

// WSID identifies a workspace. 0 is not a valid workspace.
type WSID uint64

// Number is a sequence value. 0 means "no value".
type Number uint64

// PLogOffset is an offset in a partition's event log. The first offset of a
// fresh partition is 1; 0 means "nothing yet".
type PLogOffset uint64

// PartitionID identifies an application partition.
type PartitionID uint16

// ClusterAppID identifies an application in the cluster.
type ClusterAppID uint32

// NumberKey identifies one sequence of one workspace.
type NumberKey struct {
	WSID  WSID
	SeqID SeqID
}

// SeqValue is a value of one sequence of one workspace.
type SeqValue struct {
	Key   NumberKey
	Value Number
}

// ISeqStorage is the durable state of one application partition's sequences.
// It is injected into the sequencer. Implementations must bound every call by
// a timeout of their own (the sequencer retries failed calls, it does not
// abandon them).
//
// Calls are made from one goroutine at a time, except that
// ReadNumbers may run concurrently with WriteValuesAndNextPLogOffset, and,
// once IReadAhead.ReadAhead is used, with every call and with itself.
type ISeqStorage interface {
	// ReadNumbers returns the stored values of the given sequences of one
	// workspace, in the order of seqIDs. A sequence that has no stored value
	// is returned as 0. The returned slice is owned by the caller.
	ReadNumbers(WSID, []SeqID) ([]Number, error)

	// ReadNextPLogOffset returns the stored next PLog offset, the offset the
	// first event not yet reflected in the stored numbers has (or will
	// have). 0 means nothing was ever stored.
	ReadNextPLogOffset() (PLogOffset, error)

	// WriteValuesAndNextPLogOffset durably writes batch, then nextPLogOffset.
	// Keys in batch are unique; len(batch) may be 0. The batch must be
	// durable before the offset is: a reader that sees the offset must see
	// the values. The batch slice is owned by the caller and may be reused
	// after the call returns.
	//
	// An implementation that knows which values it wrote when the call
	// fails (it writes the values of different workspaces separately)
	// returns, possibly wrapped, a *PartialWriteError naming the values
	// that may not be durable; the sequencer then retries with those only.
	// Any other error means that nothing of the call is known durable.
	WriteValuesAndNextPLogOffset(batch []SeqValue, nextPLogOffset PLogOffset) error

	// ActualizeSequencesFromPLog reads the PLog from offset (inclusive) to its
	// end and calls batcher once per event, in offset order, with the numbers
	// the event took (keys not unique, unordered) and the event's offset.
	// It stops at the first batcher error and returns it. It returns
	// ctx.Err() if ctx is done. The batch slice passed to batcher is only
	// valid during the call.
	ActualizeSequencesFromPLog(ctx context.Context, offset PLogOffset, batcher func(batch []SeqValue, offset PLogOffset) error) (err error)
}

// ISeqStorageCanceler is implemented by an ISeqStorage whose calls can be
// ended from another goroutine. ISeqStorage passes no context, so without
// it a call stuck in an outage holds the sequencer's cleanup until the
// storage's own timeout. If Params.SeqStorage implements it, cleanup,
// having stopped the sequencer's work, calls CancelCalls if the storage
// calls in flight (the worker's and ReadAhead's) have not returned 50 ms
// later (a healthy store's call finishes, and its write lands). CancelCalls
// must make the calls in flight return promptly and every later call fail;
// it must be safe to call concurrently with them.
type ISeqStorageCanceler interface {
	CancelCalls()
}

// ISequencer issues sequence numbers and PLog offsets for one application
// partition.
//
// Methods must not be called concurrently. Use:
//
//	{ Start {Next} ( Flush | Cancel | Actualize ) }
//
// A Sequencing Transaction is Start, then Next calls, then Flush (the event
// was written to the PLog), Cancel (no write of the event was attempted) or
// Actualize (a write of the event was attempted and failed: it may or may
// not be stored).
type ISequencer interface {
	// Start begins a Sequencing Transaction for the workspace and returns the
	// PLog offset the transaction's event must be written at.
	//
	// It returns (0, false) while actualization is in progress and while the
	// number of unflushed values exceeds Params.MaxNumUnflushedValues; the
	// caller should report "busy" and retry later.
	//
	// Panics if a Sequencing Transaction is already in progress, or if wsID is 0.
	Start(wsKind WSKind, wsID WSID) (plogOffset PLogOffset, ok bool)

	// Next returns the next number of seqID in the current workspace.
	// Numbers of one (WSID, SeqID) strictly increase and are never issued
	// twice by this or any earlier sequencer on the same storage, provided
	// every event of a flushed transaction was durably written at its offset;
	// only the numbers of a cancelled or actualized transaction, which no
	// event carries, may be issued again.
	//
	// Errors: ErrUnknownSeqID if seqID is not defined for the workspace's
	// kind; ErrNumberOverflow if the sequence is exhausted; ErrReadNumbers,
	// wrapping the storage error, if the workspace's numbers could not be
	// read (a cache miss, which happens only before the transaction took
	// its first number; a later Next reads them again). After an error
	// the transaction is still in progress and must be completed; a caller
	// that gives the command up without writing its event calls Cancel,
	// which needs no actualization.
	//
	// Panics if no Sequencing Transaction is in progress.
	Next(seqID SeqID) (num Number, err error)

	// Flush completes the Sequencing Transaction: the numbers taken and the
	// PLog offset are accepted and will be written to storage in the
	// background.
	//
	// Panics if no Sequencing Transaction is in progress.
	Flush()

	// Cancel ends the Sequencing Transaction without an event: its PLog
	// offset and the numbers it took are not used, and the next
	// transaction gets the same offset and may get the same numbers. No
	// actualization is needed: the state the transaction changed is only
	// in memory (the workspace's cached numbers, dropped if it took any,
	// so that the next cache miss rebuilds them from storage and the values
	// accepted before). Use it when no write of the event was attempted,
	// for example after a Next error; after a failed or unknown event
	// write, use Actualize.
	//
	// Panics if no Sequencing Transaction is in progress.
	Cancel()

	// Actualize cancels the Sequencing Transaction (if any) and starts
	// actualization: unflushed state is dropped and rebuilt from storage and
	// the PLog tail. Start returns (0, false) until it completes.
	//
	// Panics if actualization is already in progress.
	Actualize()
}

// Params configures a sequencer. Zero fields (except SeqStorage and SeqTypes)
// take defaults; see EnsureDefaults.
type Params struct {
	// SeqTypes lists, per workspace kind, the managed sequences and their
	// initial values (the first number issued). Initial values must be >= 1.
	SeqTypes map[WSKind]map[SeqID]Number

	// SeqStorage is the durable state. Required.
	SeqStorage ISeqStorage

	// MaxNumUnflushedValues is the number of values waiting to be flushed
	// above which Start returns (0, false): the headroom that lets a
	// partition keep issuing numbers while its flushes stall (a write to a
	// replica that does not answer holds a flush until the storage's call
	// timeout, seqstorage's default 5 s, and its workspaces are retried
	// after it). At most MaxMaxNumUnflushedValues. Default 10,000: at about
	// 650 values/s (300 commands/s taking two numbers each) it covers 15 s
	// of stalled flushes, so a one-replica outage of 5-15 s does not make
	// the partition busy.
	//
	// It also bounds memory and work: the ring of unflushed values grows on
	// demand up to the next power of two at or above
	// MaxNumUnflushedValues+256 values (24 bytes each: 384 KiB at the
	// default; with GroupCommit, as many transaction marks of 16 bytes), a
	// cache miss scans the unflushed values (a few microseconds per
	// thousand) to overlay them on the stored numbers, and a restart
	// replays the PLog events of the unflushed values.
	MaxNumUnflushedValues int

	// FlushAfterEvents is how far the durable PLog offset may run ahead of
	// the stored next PLog offset before the flusher writes: at most about
	// that many durable events are left for a restart to replay (the
	// design's "PLog tail after the stored offset"), and every transaction
	// of the window goes into one write, one value per (WSID, SeqID). The
	// flusher writes sooner when the unflushed values or the transactions
	// waiting reach a quarter of MaxNumUnflushedValues (the rest is the
	// headroom for stalled flushes), when values overflowed the ring, and
	// after an actualization. 0 or 1: a transaction's values are written
	// as soon as it is durable, as the design's flusher does. At most
	// MaxFlushAfterEvents.
	FlushAfterEvents int

	// LRUCacheSize is the number of (WSID, SeqID) next values kept in
	// memory. Default 100,000.
	LRUCacheSize int

	// BatcherDelay is how long the flusher waits after a signal before it
	// writes, to collect more values into one batch. 0 means no wait;
	// negative is invalid. EnsureDefaults does not change it.
	BatcherDelay time.Duration

	// RetryDelay is the first wait after a failed storage call; it doubles
	// with each failure in a row, up to MaxRetryDelay, and starts again from
	// RetryDelay after a partial write that made progress. Each wait is
	// drawn uniformly from [d/2, d] for the current d, so that partitions
	// that failed together do not retry in step. Default 10 ms.
	RetryDelay time.Duration

	// MaxRetryDelay caps RetryDelay's doubling. Default 250 ms: a failed
	// call to a store with a replica out has usually spent its own timeout
	// already, so the backoff does not need to shield the store; its cap is
	// the most a flush or an actualization lags behind the store's
	// recovery.
	MaxRetryDelay time.Duration

	// Logger receives storage errors and actualization reports. Default:
	// slog.Default().
	Logger *slog.Logger

	// GroupCommit makes Flush tentative: the transaction's values and its
	// next PLog offset are accepted (the next Start gets the following
	// offset at once) but written to SeqStorage only after Durable has
	// reported its event durable. A caller that writes several transactions'
	// events as one group uses it, and reports them with the Sequencer's
	// Durable (IGroupCommit). Without it Flush reports its own event
	// durable: both go through the same marks and write path. Unflushed
	// values include tentative ones, so MaxNumUnflushedValues bounds the
	// group size too.
	GroupCommit bool

	// Metrics, if set, receives counters and observations. Its methods are
	// called from the caller's goroutine and from the sequencer's background
	// goroutines and must be safe for concurrent use and cheap.
	Metrics Metrics
}

// IGroupCommit reports durable events to a sequencer made with
// Params.GroupCommit; *Sequencer implements it (its Durable panics
// without GroupCommit, where Flush reports each event itself).
type IGroupCommit interface {
	// Durable reports that the events of every flushed transaction at
	// offsets below next are durably written. Until a transaction is
	// covered, neither its values nor a next PLog offset that claims it are
	// written to SeqStorage. A next smaller than an earlier one is ignored.
	// Panics if the sequencer was not made with Params.GroupCommit.
	//
	// Safe for concurrent use with the ISequencer methods. It must not cover
	// transactions cancelled by Actualize: the caller must not call
	// Actualize while an event write it will report is in flight.
	Durable(next PLogOffset)
}

// Metrics receives the sequencer's observations. cqlseq's metrics package
// implements it with Prometheus collectors.
type Metrics interface {
	// Transaction counts a Start that returned ok.
	Transaction()
	// Busy counts a Start that returned (0, false).
	Busy(reason BusyReason)
	// Unflushed reports the number of values waiting to be flushed.
	Unflushed(n int)
	// Flushed reports one successful flush write.
	Flushed(values int, took time.Duration)
	// Actualized reports one completed actualization and the number of
	// PLog events it replayed, before Start can return ok again.
	Actualized(events int, took time.Duration)
	// StorageError counts a failed storage call by operation name
	// ("ReadNumbers", "ReadNextPLogOffset", "WriteValuesAndNextPLogOffset",
	// "ActualizeSequencesFromPLog").
	StorageError(op string)
}

// LimitReporter is an optional capability of a Metrics: the sequencer
// tells it Params.MaxNumUnflushedValues once, as it is created, so that
// the values Unflushed reports can be read as a share of the limit at
// which Start turns busy (BusyUnflushed).
type LimitReporter interface {
	UnflushedLimit(n int)
}

// BusyReason says why Start returned (0, false).
type BusyReason uint8

const (
	// BusyActualizing: actualization is in progress.
	BusyActualizing BusyReason = iota + 1
	// BusyUnflushed: too many values wait to be flushed.
	BusyUnflushed
)

func (r BusyReason) String() string {
	switch r {
	case BusyActualizing:
		return "actualizing"
	case BusyUnflushed:
		return "unflushed"
	}
	return "unknown"
}

// IReadAhead is implemented by the sequencer returned by New.
type IReadAhead interface {
	// ReadAhead reads the stored numbers of workspace wsID of kind wsKind,
	// unless the workspace is cached, so that the next transaction on it
	// does not read them in Next: a caller that serializes transactions
	// (a partition's lock) calls it before it takes the lock, and a cold
	// workspace then stalls only its own command. It blocks for at most
	// one ReadNumbers call, and is safe for concurrent use with itself and
	// with every ISequencer method.
	//
	// Next uses the numbers read only while they are provably current: if
	// a write that may have held the workspace's values completed, or an
	// actualization began, since the read began, Next reads again (see
	// readahead.go). A failed read is dropped: Next reads, and reports its
	// error. An unknown wsKind, WSID 0, or a sequencer that is actualizing
	// or closed makes it return at once. The cleanup New returns waits for
	// the ReadAhead calls in flight, and cancels their reads as it cancels
	// the worker's calls (ISeqStorageCanceler).
	ReadAhead(wsKind WSKind, wsID WSID)
}
