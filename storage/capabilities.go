package storage

// Capabilities are what a store can do beyond the Storage contract, found
// once by Probe and passed down to every caller that chooses a write path
// by them (plog's writers, seqstorage), so that all choose from the same
// answer. The zero value is a store with no optional capability (CQL).
type Capabilities struct {
	// MultiApplier, when not nil, applies ApplyBatchesIf: conditional
	// batches of several partitions, each judged after the ones before it,
	// in one transaction (see MultiApplier). It is the store itself or the
	// outermost wrapper over it, so that every wrapper's faults and
	// metrics still apply.
	MultiApplier MultiApplier

	// GroupCommitter, when not nil, reports the commits a store that
	// commits concurrent callers' writes together made (see
	// GroupCommitter). It changes no write path; benchmarks read it.
	GroupCommitter GroupCommitter
}

// Probe returns st's Capabilities, looking through every wrapper
// (Wrapper.Unwrap) down to the driver: a capability counts only if the
// driver has it and every wrapper on the way passes it through (for
// MultiApplier, see AsMultiApplier); GroupCommitter is reported wherever
// it is found (see AsGroupCommitter).
func Probe(st Storage) Capabilities {
	var c Capabilities
	c.MultiApplier, _ = AsMultiApplier(st)
	c.GroupCommitter, _ = AsGroupCommitter(st)
	return c
}

// PutBatchOneTransaction reports that PutBatch writes its rows, of any
// partitions, in one transaction: on a nil error all are durable, on an
// error none is (or, for an unknown outcome, all or none). Without it
// PutBatch is atomic per partition at most (see Storage.PutBatch), and a
// caller that must know which partitions were written writes them apart.
// It holds exactly when MultiApplier is set: a MultiApplier driver commits
// PutBatch as one transaction too.
func (c Capabilities) PutBatchOneTransaction() bool { return c.MultiApplier != nil }

// CapabilitiesOf returns *given, or st's Probe when given is nil: how a
// user of st that may be handed its Capabilities (plog's writers,
// seqstorage) finds them.
func CapabilitiesOf(given *Capabilities, st Storage) Capabilities {
	if given != nil {
		return *given
	}
	return Probe(st)
}
