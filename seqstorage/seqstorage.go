// Package seqstorage implements isequencer.ISeqStorage for one application
// partition: the sequencer's numbers and next PLog offset through
// vvmadapter, actualization from the partition's PLog through a
// plog.PLogReader, and the lifetime of these calls (CancelCalls ends them
// when the sequencer is cleaned up).
//
// Modes: every mode writes the seed cells with its owner's versions, and
// ReadNumbers returns per SeqID the largest number stored in any of the
// workspace's cells (the seed cell and the per-epoch cells fenced owners
// wrote before version ranges), raised to the partition's floor. So a
// partition opened in a trust mode after fenced use (or the other way
// round) starts above every number an earlier owner flushed, in any order
// of modes.
package seqstorage

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/vvmadapter"
)

var (
	// ErrInvalidOptions wraps every problem New finds in Options.
	ErrInvalidOptions = errors.New("seqstorage: invalid options")

	// ErrCanceled wraps the error of every call that CancelCalls ended or
	// that came after it.
	ErrCanceled = errors.New("seqstorage: calls cancelled")

	// ErrNotOwner: a write of a Storage without an Owner (Options.Owner),
	// which only reads.
	ErrNotOwner = errors.New("seqstorage: not the partition's owner: this Storage only reads")
)

// DefaultTimeout bounds each ISeqStorage call when Options.Timeout is 0.
const DefaultTimeout = 5 * time.Second

// Options configure a Storage.
type Options struct {
	// Storage holds the sequencer's numbers and next PLog offset (and,
	// unless Reader is set, the PLog). Required.
	Storage storage.Storage

	// Capabilities are Storage's (storage.Probe), found once by the caller
	// that builds every user of Storage. With PutBatchOneTransaction the
	// numbers are written with one PutBatch (see
	// WriteValuesAndNextPLogOffset). nil: New probes Storage itself.
	Capabilities *storage.Capabilities

	// App and Partition select the application partition.
	App       isequencer.ClusterAppID
	Partition isequencer.PartitionID

	// Reader reads the partition's PLog. Default: a plog.Reader over
	// Storage whose PageTimeout is Timeout.
	Reader plog.PLogReader

	// Timeout bounds each ReadNumbers, ReadNextPLogOffset and
	// WriteValuesAndNextPLogOffset call (ISeqStorage passes no context) and,
	// for the default Reader, the read of each PLog storage partition.
	// Default 5 s.
	Timeout time.Duration

	// MinAccepted is, per SeqID, the smallest number actualization passes
	// to the batcher (the reference design's #688 threshold). An event's
	// number list is built from the IDs its records got, and IDs of other
	// kinds share it: singleton IDs (65,536..66,047) and raw IDs are fixed
	// per record type, not issued by the sequence. Fed to the batcher they
	// would be recorded as the sequence's last issued number, which they
	// never were; the threshold keeps them out. SeqIDs not in the map
	// accept every number.
	MinAccepted map[isequencer.SeqID]isequencer.Number

	// WriteWorkers bounds the workspaces whose numbers
	// WriteValuesAndNextPLogOffset writes concurrently, one PutBatch per
	// workspace (see there). Default storage.DefaultWriteWorkers.
	WriteWorkers int

	// Owner is the partition's owner (TakeOver, vvmadapter.Adapter.TakeOver),
	// for a Storage that writes: WriteValuesAndNextPLogOffset and
	// ActualizeOnce with write write through it, every write carrying a
	// version of its epoch. nil: a Storage that only reads; its writes fail
	// with ErrNotOwner. Its App and Partition must be App and Partition.
	Owner *vvmadapter.Owner
}

// EnsureDefaults sets zero fields to their defaults.
func (o *Options) EnsureDefaults() {
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.WriteWorkers == 0 {
		o.WriteWorkers = storage.DefaultWriteWorkers
	}
}

// Validate reports every problem of o at once. Call it after
// EnsureDefaults.
func (o *Options) Validate() error {
	var errs []error
	if o.Storage == nil {
		errs = append(errs, fmt.Errorf("%w: Storage is nil", ErrInvalidOptions))
	}
	if o.Timeout < 0 {
		errs = append(errs, fmt.Errorf("%w: Timeout %v, must be >= 0", ErrInvalidOptions, o.Timeout))
	}
	if o.WriteWorkers < 1 {
		errs = append(errs, fmt.Errorf("%w: WriteWorkers %d, must be >= 1", ErrInvalidOptions, o.WriteWorkers))
	}
	if o.Owner != nil && (o.Owner.App() != o.App || o.Owner.Partition() != o.Partition) {
		errs = append(errs, fmt.Errorf("%w: Owner of app %d partition %d, for app %d partition %d",
			ErrInvalidOptions, o.Owner.App(), o.Owner.Partition(), o.App, o.Partition))
	}
	return errors.Join(errs...)
}

// Storage implements isequencer.ISeqStorage for one application partition.
// Calls follow ISeqStorage's concurrency contract; CancelCalls may be
// called at any time.
//
// Every call runs under the Storage's lifetime context (and its own
// Options.Timeout): CancelCalls, which the sequencer's cleanup calls, ends
// the calls in flight at once and fails every later one with ErrCanceled,
// so that closing a partition during an outage does not wait out the
// timeout.
type Storage struct {
	o      Options
	ad     *vvmadapter.Adapter
	reader plog.PLogReader
	batch  []isequencer.SeqValue // reused by ActualizeSequencesFromPLog
	// oneCall: Options.Storage's PutBatch is one transaction
	// (storage.Capabilities.PutBatchOneTransaction()): the numbers are
	// written with one PutBatch.
	oneCall bool
	life    context.Context // the lifetime context; done after CancelCalls
	cancel  context.CancelFunc
	// floors are the partition's number floors (vvmadapter.Floor), read
	// once, by ReadNextPLogOffset or the first number read: only `cqlseq
	// advance` writes them, while no owner runs.
	floors atomic.Pointer[map[isequencer.SeqID]isequencer.Number]
}

var (
	_ isequencer.ISeqStorage         = (*Storage)(nil)
	_ isequencer.ISeqStorageCanceler = (*Storage)(nil)
)

// New validates o and returns a Storage.
func New(o Options) (*Storage, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	oneCall := storage.CapabilitiesOf(o.Capabilities, o.Storage).PutBatchOneTransaction()
	s := &Storage{o: o, ad: vvmadapter.New(o.Storage, o.App), reader: o.Reader, oneCall: oneCall}
	s.life, s.cancel = context.WithCancel(context.Background())
	if s.reader == nil {
		r, err := plog.NewReader(o.Storage, plog.ReaderOptions{PageTimeout: o.Timeout})
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
		}
		s.reader = r
	}
	s.o.MinAccepted = maps.Clone(o.MinAccepted)
	return s, nil
}

// CancelCalls implements isequencer.ISeqStorageCanceler: it cancels the
// Storage's lifetime context, which ends the calls in flight and fails every
// later call with ErrCanceled. It is idempotent and does not close
// Options.Storage.
func (s *Storage) CancelCalls() { s.cancel() }

// call returns the context of one call: the lifetime context bounded by
// Options.Timeout.
func (s *Storage) call() (context.Context, context.CancelFunc) {
	return context.WithTimeout(s.life, s.o.Timeout)
}

// callWithin returns the context of one call made for a caller's ctx:
// ended by ctx, by CancelCalls, and after Options.Timeout.
func (s *Storage) callWithin(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	stop := context.AfterFunc(s.life, cancel)
	return ctx, func() { stop(); cancel() }
}

// wrap returns err, marked with ErrCanceled if CancelCalls ended the call.
func (s *Storage) wrap(err error) error {
	if s.life.Err() != nil {
		return fmt.Errorf("%w: %w", ErrCanceled, err)
	}
	return err
}

// ReadNumbers implements isequencer.ISeqStorage with one partition read of
// the workspace: per SeqID the largest number of any cell, whichever mode
// wrote it: the seed cell, and the epoch cells fenced owners wrote before
// version ranges (vvmadapter.GetNumbersMax).
func (s *Storage) ReadNumbers(ws isequencer.WSID, ids []isequencer.SeqID) ([]isequencer.Number, error) {
	ctx, cancel := s.call()
	defer cancel()
	return s.readNumbers(ctx, ws, ids)
}

// readNumbers is ReadNumbers within ctx, a context of call or callWithin.
func (s *Storage) readNumbers(ctx context.Context, ws isequencer.WSID, ids []isequencer.SeqID) ([]isequencer.Number, error) {
	floors, err := s.readFloors(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]isequencer.Number, len(ids))
	if err := s.ad.GetNumbersMax(ctx, ws, ids, out); err != nil {
		return nil, s.wrap(fmt.Errorf("seqstorage: app %d partition %d: %w", s.o.App, s.o.Partition, err))
	}
	applyFloors(floors, ids, out)
	return out, nil
}

// readWorkspacesNumbers reads the numbers of many workspaces in one
// request (vvmadapter.GetWorkspacesNumbersMax).
func (s *Storage) readWorkspacesNumbers(ctx context.Context, reads []vvmadapter.WorkspaceNumbers) error {
	floors, err := s.readFloors(ctx)
	if err != nil {
		return err
	}
	if err := s.ad.GetWorkspacesNumbersMax(ctx, reads); err != nil {
		return s.wrap(fmt.Errorf("seqstorage: app %d partition %d: %w", s.o.App, s.o.Partition, err))
	}
	for i := range reads {
		applyFloors(floors, reads[i].IDs, reads[i].Numbers)
	}
	return nil
}

// readFloors returns the partition's number floors, read from the store
// the first time only.
func (s *Storage) readFloors(ctx context.Context) (map[isequencer.SeqID]isequencer.Number, error) {
	if f := s.floors.Load(); f != nil {
		return *f, nil
	}
	stored, err := s.ad.GetFloors(ctx, s.o.Partition)
	if err != nil {
		return nil, s.wrap(fmt.Errorf("seqstorage: app %d: %w", s.o.App, err))
	}
	f := floorMap(stored)
	s.floors.Store(f)
	return *f, nil
}

// applyFloors raises each of numbers (of ids) to its SeqID's floor.
func applyFloors(floors map[isequencer.SeqID]isequencer.Number, ids []isequencer.SeqID, numbers []isequencer.Number) {
	if len(floors) == 0 {
		return
	}
	for i, id := range ids {
		numbers[i] = max(numbers[i], floors[id])
	}
}

// ReadNextPLogOffset implements isequencer.ISeqStorage; 0 if none is
// stored.
func (s *Storage) ReadNextPLogOffset() (isequencer.PLogOffset, error) {
	ctx, cancel := s.call()
	defer cancel()
	return s.readNextPLogOffset(ctx)
}

// readNextPLogOffset is ReadNextPLogOffset within ctx: a caller's
// (callWithin) or the call's own (call).
func (s *Storage) readNextPLogOffset(ctx context.Context) (isequencer.PLogOffset, error) {
	if _, err := s.readFloors(ctx); err != nil {
		return 0, err
	}
	off, _, err := s.ad.GetPLogOffset(ctx, s.o.Partition)
	if err != nil {
		return 0, s.wrap(fmt.Errorf("seqstorage: app %d: %w", s.o.App, err))
	}
	return off, nil
}

// WriteValuesAndNextPLogOffset implements isequencer.ISeqStorage: the
// values (to the seed cells), then, only if every one of them was written, the offset (a
// plain write in every mode), every write with a version of the Owner's
// epoch. The timeout bounds the whole call. Without an Owner it writes
// nothing and returns an error wrapping ErrNotOwner.
//
// The values are written with one PutBatch per workspace (one storage
// partition each), up to Options.WriteWorkers at a time, so that a
// workspace whose write fails (a replica that does not answer) does not
// fail the others: the call then returns an *isequencer.PartialWriteError
// naming the values of the failed workspaces, which the sequencer retries
// alone. If only the offset write fails, the PartialWriteError names no
// value. On a store whose PutBatch is one transaction
// (Capabilities.PutBatchOneTransaction: storage/boltdb, storage/mem), the
// values are written with one PutBatch and a failure names no durable
// value.
func (s *Storage) WriteValuesAndNextPLogOffset(batch []isequencer.SeqValue, next isequencer.PLogOffset) error {
	if s.o.Owner == nil {
		return fmt.Errorf("%w: app %d partition %d: writing %d numbers and next PLog offset %d", ErrNotOwner, s.o.App, s.o.Partition, len(batch), next)
	}
	ctx, cancel := s.call()
	defer cancel()
	if err := s.writeNumbers(ctx, batch); err != nil {
		return s.wrap(err)
	}
	if err := s.o.Owner.PutPLogOffset(ctx, next); err != nil {
		return s.wrap(&isequencer.PartialWriteError{Err: fmt.Errorf("seqstorage: app %d: %w", s.o.App, err)})
	}
	return nil
}

// writeNumbers writes batch; see WriteValuesAndNextPLogOffset.
func (s *Storage) writeNumbers(ctx context.Context, batch []isequencer.SeqValue) error {
	if len(batch) == 0 {
		return nil
	}
	// order lists batch's indexes grouped by workspace (the sequencer's
	// batches are sorted by key already).
	order := make([]int, len(batch))
	for i := range order {
		order[i] = i
	}
	byWS := func(i, j int) int { return cmp.Compare(batch[i].Key.WSID, batch[j].Key.WSID) }
	if !slices.IsSortedFunc(order, byWS) {
		slices.SortStableFunc(order, byWS)
	}
	var groups [][2]int // [from, to) ranges of order, one per workspace
	for i := range order {
		if i == 0 || batch[order[i]].Key.WSID != batch[order[i-1]].Key.WSID {
			groups = append(groups, [2]int{i, i})
		}
		groups[len(groups)-1][1] = i + 1
	}
	if s.oneCall || len(groups) == 1 {
		if err := s.putNumbers(ctx, batch); err != nil {
			return fmt.Errorf("seqstorage: app %d partition %d: %w", s.o.App, s.o.Partition, err)
		}
		return nil
	}
	values := make([]isequencer.SeqValue, len(batch))
	for i, j := range order {
		values[i] = batch[j]
	}
	errs := make([]error, len(groups))
	var eg errgroup.Group
	eg.SetLimit(s.o.WriteWorkers)
	for g, r := range groups {
		eg.Go(func() error {
			errs[g] = s.putNumbers(ctx, values[r[0]:r[1]])
			return nil // every workspace is tried: errs names the failed ones
		})
	}
	_ = eg.Wait()
	var failed []int
	var first error
	nFailed := 0
	for g, err := range errs {
		if err == nil {
			continue
		}
		if first == nil {
			first = err
		}
		nFailed++
		failed = append(failed, order[groups[g][0]:groups[g][1]]...)
	}
	if nFailed == 0 {
		return nil
	}
	slices.Sort(failed)
	return &isequencer.PartialWriteError{Failed: failed,
		Err: fmt.Errorf("seqstorage: app %d partition %d: %d of %d workspaces not written (first: %w)", s.o.App, s.o.Partition, nFailed, len(groups), first)}
}

// putNumbers writes values through the Owner, to the seed cells, in every
// mode: its versions order them above every earlier owner's writes.
func (s *Storage) putNumbers(ctx context.Context, values []isequencer.SeqValue) error {
	return s.o.Owner.PutNumbers(ctx, values)
}

// ActualizeSequencesFromPLog implements isequencer.ISeqStorage. It pages
// through the partition's PLog from offset to its first missing offset and
// calls batcher once per event with the event's numbers, less those below
// Options.MinAccepted (an event with none left is still passed, with an
// empty batch, so that the sequencer learns its offset). A corrupt event
// stops actualization with an error wrapping plog.ErrCorrupt that names the
// partition and the offset. A batcher error is returned as is; ctx.Err()
// once ctx is done.
func (s *Storage) ActualizeSequencesFromPLog(ctx context.Context, offset isequencer.PLogOffset, batcher func(batch []isequencer.SeqValue, offset isequencer.PLogOffset) error) error {
	return s.actualizeFromPLog(ctx, offset, nil, batcher)
}

// actualizeFromPLog is ActualizeSequencesFromPLog that also shows each
// event read to onEvent (if not nil) before batcher: the event is valid
// during the call only, and an error of onEvent, returned as is, ends the
// reading as a batcher error does.
func (s *Storage) actualizeFromPLog(ctx context.Context, offset isequencer.PLogOffset, onEvent func(*plog.Event) error, batcher func(batch []isequencer.SeqValue, offset isequencer.PLogOffset) error) error {
	// The caller's ctx, ended by CancelCalls too.
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.life, cancel)()
	var callerErr error // onEvent's or batcher's: returned as is
	err := s.reader.ReadEvents(rctx, s.o.Partition, offset, func(e *plog.Event) error {
		if onEvent != nil {
			if callerErr = onEvent(e); callerErr != nil {
				return callerErr
			}
		}
		b := s.batch[:0]
		for _, n := range e.Numbers {
			if least, ok := s.o.MinAccepted[n.SeqID]; ok && n.Number < least {
				continue
			}
			b = append(b, isequencer.SeqValue{Key: isequencer.NumberKey{WSID: e.WSID, SeqID: n.SeqID}, Value: n.Number})
		}
		s.batch = b
		// A gap marker's offset is the last one it covers: the sequencer's
		// next offset is then the one after the gap.
		callerErr = batcher(b, e.NextOffset()-1)
		return callerErr
	})
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case callerErr != nil:
		return callerErr
	case err != nil:
		return s.wrap(fmt.Errorf("seqstorage: app %d: actualizing from PLog offset %d: %w", s.o.App, offset, err))
	}
	return nil
}
