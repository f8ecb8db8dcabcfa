package seqstorage

import (
	"errors"
	"fmt"
	"time"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog/voedger"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/vvmadapter"
)

// VoedgerOptions configure a Storage that takes over a partition of a
// Voedger application: it actualizes from Voedger's own PLog
// (plog/voedger) and keeps the numbers and the next PLog offset in the
// Voedger layout (vvmadapter), keyed by Voedger's ClusterAppID.
type VoedgerOptions struct {
	// PLog holds Voedger's PLog rows (the application's keyspace).
	// Required.
	PLog storage.Storage
	// Seq holds the sequence rows (Voedger's sys/vvm keyspace). Default:
	// PLog.
	Seq storage.Storage

	// App is Voedger's ClusterAppID of the application; Partition the
	// partition taken over.
	App       isequencer.ClusterAppID
	Partition isequencer.PartitionID

	// Timeout as Options.Timeout (also each PLog block's read). Default
	// 5 s.
	Timeout time.Duration

	// OpaqueCorrupted as voedger.ReaderOptions.OpaqueCorrupted.
	OpaqueCorrupted bool

	// Owner as Options.Owner: the partition's owner in Seq (TakeOver,
	// without FencePLog: Voedger's PLog has no fences), for a Storage that
	// writes; nil, one that only reads. Its versioned writes order above
	// every unversioned one: once a partition's numbers are written
	// through it, a Voedger VVM's own (unversioned) writes of them no
	// longer replace them, so the partition must not go back to Voedger.
	Owner *vvmadapter.Owner
}

// NewVoedger validates o and returns a Storage for a sequencer whose
// Params.SeqTypes give the Voedger workspace kinds voedger.SeqTypes().
// Actualization passes each event's voedger.Numbers: record IDs below
// FirstUserRecordID never count (a singleton does not pull the record-ID
// sequence below its initial value), and a sys.Corrupted event counts
// with the record IDs of the event it carries. From a stored next offset
// of 0 or 1 it starts at the partition's first stored event.
func NewVoedger(o VoedgerOptions) (*Storage, error) {
	var errs []error
	if o.PLog == nil {
		errs = append(errs, fmt.Errorf("%w: PLog is nil", ErrInvalidOptions))
	}
	if o.Timeout < 0 {
		errs = append(errs, fmt.Errorf("%w: Timeout %v, must be >= 0", ErrInvalidOptions, o.Timeout))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if o.Seq == nil {
		o.Seq = o.PLog
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	r, err := voedger.NewReader(o.PLog, voedger.ReaderOptions{PageTimeout: o.Timeout, OpaqueCorrupted: o.OpaqueCorrupted})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	return New(Options{
		Storage:     o.Seq,
		App:         o.App,
		Partition:   o.Partition,
		Reader:      r.SeqReader(),
		Timeout:     o.Timeout,
		MinAccepted: voedger.MinAccepted(),
		Owner:       o.Owner,
	})
}
