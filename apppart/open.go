package apppart

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/seqstorage"
	"github.com/cqlseq/cqlseq/storage"
)

// OpenOptions configure Open.
type OpenOptions struct {
	// Storage holds the sequencer's state: numbers and next PLog offset
	// (vvmadapter's rows, keyed by App). Required.
	Storage storage.Storage
	// AppStorage holds the application's PLog and records (plog's rows,
	// which carry no application ID: one storage per application).
	// Default Storage, which then must serve one application only.
	AppStorage storage.Storage

	// App and Partition select the application partition.
	App       isequencer.ClusterAppID
	Partition isequencer.PartitionID

	// Mode is the event log's write mode (the sequences trust level). The
	// zero value is plog.ModeTrust0.
	Mode plog.Mode

	// SeqTypes lists, per workspace kind, the sequences and their initial
	// values. Required.
	SeqTypes map[isequencer.WSKind]map[isequencer.SeqID]isequencer.Number
	// RecordSeqs are the SeqIDs whose numbers are record IDs: each number
	// a command takes of one of them is written as a record row (with the
	// write mode's records semantics).
	RecordSeqs []isequencer.SeqID
	// WLogOffsetSeq, if not 0, is the SeqID whose first number a command
	// takes becomes the event's WLogOffset.
	WLogOffsetSeq isequencer.SeqID
	// MinAccepted is seqstorage.Options.MinAccepted (the #688 threshold).
	MinAccepted map[isequencer.SeqID]isequencer.Number

	// Sequencer tunes the sequencer (MaxNumUnflushedValues,
	// FlushAfterEvents, LRUCacheSize, BatcherDelay, RetryDelay,
	// MaxRetryDelay, Logger, Metrics). Its SeqTypes and SeqStorage must be
	// left empty: Open sets them. FlushAfterEvents 0 means
	// DefaultFlushAfterEvents (4,096) here, not the sequencer's "as soon
	// as durable": set 1 to store numbers after every group.
	Sequencer isequencer.Params

	// LeaseDeadline, in fenced mode, returns the local (monotonic) deadline
	// of the lease under which this process owns the partition; a command
	// that Do begins once it has passed gets ErrNotLeader, before any read
	// and whatever its context does. It saves futile writes: safety does
	// not depend on it. Do calls it from the callers' goroutines, so it
	// must be safe for concurrent use. nil: no lease check.
	LeaseDeadline func() time.Time
	// MaxGroupEvents caps the events of one group write of the command
	// flow: a group holds the events queued when the committer takes it,
	// up to the cap and the end of their PLog block, and the event log
	// splits it into chunks by the store's limits. Default
	// DefaultMaxGroupEvents; 1 writes each command's event alone (the
	// commands still overlap: one is written while the next takes its
	// numbers), to compare with.
	MaxGroupEvents int
	// Hooks pause points of the command flow, for tests only.
	Hooks Hooks

	// StorageTimeout bounds each sequencer storage call and each PLog page
	// read. Default seqstorage.DefaultTimeout (5 s).
	StorageTimeout time.Duration
	// WriteTimeout bounds one event write. Default 5 s.
	WriteTimeout time.Duration
	// Logger receives write failures. Default slog.Default().
	Logger *slog.Logger
	// Metrics receives the partition's observations (package metrics'
	// Collectors.Partition). nil: none.
	Metrics Metrics
}

// EnsureDefaults sets zero fields to their defaults.
func (o *OpenOptions) EnsureDefaults() {
	if o.AppStorage == nil {
		o.AppStorage = o.Storage
	}
	if o.StorageTimeout == 0 {
		o.StorageTimeout = seqstorage.DefaultTimeout
	}
	if o.MaxGroupEvents == 0 {
		o.MaxGroupEvents = DefaultMaxGroupEvents
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Sequencer.Logger == nil {
		o.Sequencer.Logger = o.Logger
	}
	if o.Sequencer.FlushAfterEvents == 0 {
		o.Sequencer.FlushAfterEvents = DefaultFlushAfterEvents
	}
	if o.Metrics == nil {
		o.Metrics = nopMetrics{}
	}
}

// Validate reports every problem of o at once. Call it after
// EnsureDefaults. The options passed on to the sequencer, seqstorage and
// plog are validated by Open when it builds them.
func (o *OpenOptions) Validate() error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, a...)...))
	}
	if o.Storage == nil {
		bad("Storage is nil")
	}
	if err := o.Mode.Validate(); err != nil {
		bad("%v", err)
	}
	if o.Sequencer.SeqStorage != nil {
		bad("Sequencer.SeqStorage is set; Open builds it")
	}
	if o.Sequencer.SeqTypes != nil {
		bad("Sequencer.SeqTypes is set; use SeqTypes")
	}
	if o.StorageTimeout < 0 {
		bad("StorageTimeout %v, must be >= 0", o.StorageTimeout)
	}
	if o.WriteTimeout < 0 {
		bad("WriteTimeout %v, must be >= 0", o.WriteTimeout)
	}
	if o.MaxGroupEvents < 1 {
		bad("MaxGroupEvents %d, must be >= 1", o.MaxGroupEvents)
	}
	if o.Sequencer.GroupCommit {
		bad("Sequencer.GroupCommit is set; Open sets it")
	}
	return errors.Join(errs...)
}

// Open builds the partition App/Partition over the storages: seqstorage
// (reading the PLog with plog's reader) under a sequencer, and a
// plog.Writer in o.Mode as the event log. It takes the partition over
// under ctx, in every mode (a new ownership epoch, whose versions every
// write of this owner carries; in fenced mode also the PLog's fences), so
// that an unreachable storage fails Open rather than leaving a partition
// that is busy forever. Where an earlier owner's late write could replace
// what this owner reads or writes (a trust2 owner before or now), Open
// also replays the PLog tail and seals the block it ends in (sealZone).
// The partition actualizes first: Do returns ErrBusy until it is done.
func Open(ctx context.Context, o OpenOptions) (*Partition, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	reader, err := plog.NewReader(o.AppStorage, plog.ReaderOptions{PageTimeout: o.StorageTimeout})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	own, err := takeOver(ctx, o)
	if err != nil {
		return nil, err
	}
	versions, epoch := own.Owner.Versions(), own.Owner.Epoch()
	// What the stores can do, found once for every user of each.
	seqCaps, appCaps := storage.Probe(o.Storage), storage.Probe(o.AppStorage)
	ss, err := seqstorage.New(seqstorage.Options{
		Storage: o.Storage, Capabilities: &seqCaps, App: o.App, Partition: o.Partition,
		Reader: reader, Timeout: o.StorageTimeout, MinAccepted: o.MinAccepted,
		Owner: own.Owner,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	if err := sealZone(ctx, o, own, ss); err != nil {
		return nil, fmt.Errorf("apppart: app %d partition %d (epoch %d): %w", o.App, o.Partition, epoch, err)
	}
	gw, err := plog.NewGroupWriter(plog.WriterOptions{
		Storage: o.AppStorage, Capabilities: &appCaps, Partition: o.Partition, Mode: o.Mode, Versions: versions,
	}, epoch)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	params := o.Sequencer
	params.SeqTypes = o.SeqTypes
	params.SeqStorage = ss
	// The committer writes the events after Flush and reports them
	// durable (isequencer.IGroupCommit).
	params.GroupCommit = true
	params.EnsureDefaults()
	if err := params.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	seq, cleanup, err := isequencer.New(&params)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	p := &Partition{
		seqTypes: o.SeqTypes, shape: newEventShape(o.RecordSeqs, o.WLogOffsetSeq),
		logger: o.Logger, mode: o.Mode, epoch: epoch, deadline: o.LeaseDeadline, hooks: o.Hooks, m: o.Metrics,
		seq: seq, cleanup: cleanup, part: o.Partition, reader: reader, pathStart: max(own.StoredNext, 1),
		records: gw.(plog.RecordsWriter),
		flow: newCommitter(flowConfig{
			log: writerLog{gw}, durable: seq, metrics: o.Metrics, maxGroup: o.MaxGroupEvents, timeout: o.WriteTimeout,
			hooks: o.Hooks, logger: o.Logger, rewriteUnknown: o.Mode == plog.ModeTrust2,
		}),
	}
	o.Metrics.Opened(epoch)
	return p, nil
}

// Epoch returns the ownership epoch this Partition took as it opened, in
// every mode: each later open of the partition (an owner, actualize
// --write, advance) takes a higher one.
func (p *Partition) Epoch() uint64 { return p.epoch }

// GroupStats returns, for a partition that writes in groups, the number of
// group writes that stored events and the events they stored.
func (p *Partition) GroupStats() (groups, events int) {
	return p.flow.groupStats()
}

// eventShape turns a command's numbers into a plog.Event: the largest
// number per SeqID, the record IDs, the WLog offset.
type eventShape struct {
	records map[isequencer.SeqID]bool
	wlogSeq isequencer.SeqID
}

func newEventShape(recordSeqs []isequencer.SeqID, wlogSeq isequencer.SeqID) eventShape {
	s := eventShape{records: map[isequencer.SeqID]bool{}, wlogSeq: wlogSeq}
	for _, id := range recordSeqs {
		s.records[id] = true
	}
	return s
}

// fill sets pe to the event at off of cmd, which took nums (the numbers of
// cmd.Seqs' first len(nums) SeqIDs), reusing pe's slices.
func (s eventShape) fill(pe *plog.Event, off isequencer.PLogOffset, cmd Command, nums []isequencer.Number, payload []byte) {
	*pe = plog.Event{
		Offset: off, WSID: cmd.WSID, WSKind: cmd.WSKind, Payload: payload,
		Numbers: pe.Numbers[:0], Records: pe.Records[:0],
	}
	wlogSet := false
	for i, n := range nums {
		id := cmd.Seqs[i]
		j := slices.IndexFunc(pe.Numbers, func(sn plog.SeqNumber) bool { return sn.SeqID == id })
		if j < 0 {
			pe.Numbers = append(pe.Numbers, plog.SeqNumber{SeqID: id, Number: n})
		} else {
			pe.Numbers[j].Number = max(pe.Numbers[j].Number, n)
		}
		if s.records[id] {
			pe.Records = append(pe.Records, plog.RecordID(n))
		}
		if !wlogSet && s.wlogSeq != 0 && id == s.wlogSeq {
			pe.WLogOffset, wlogSet = uint64(n), true
		}
	}
}
