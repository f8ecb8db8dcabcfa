package cli

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/vvmadapter"
)

// killPointFlags make bench kill itself at the crash point of issue 36:
// after a flush wrote a partition's numbers and before it writes the
// partition's next PLog offset (seqstorage writes the numbers, then the
// offset). The fault campaign's tools phase uses it. Hidden from help.
type killPointFlags struct {
	beforeOffsetWrite float64
}

func (k *killPointFlags) add(fs *pflag.FlagSet) {
	fs.Float64Var(&k.beforeOffsetWrite, "kill-before-offset-write", 0,
		"SIGKILL the process, with this probability (0..1), before each write of a partition's next PLog offset (after its numbers were written); testing only")
	_ = fs.MarkHidden("kill-before-offset-write")
}

// validate reports a probability out of [0, 1].
func (k *killPointFlags) validate() []error {
	if p := k.beforeOffsetWrite; !(p >= 0 && p <= 1) {
		return []error{fmt.Errorf("--kill-before-offset-write %v: want a probability in [0, 1]", p)}
	}
	return nil
}

// wrap returns st wrapped so that it kills the process before an offset
// write (see killPoint), or st itself when the probability is 0.
func (k *killPointFlags) wrap(st storage.Storage, app isequencer.ClusterAppID, log io.Writer) storage.Storage {
	if k.beforeOffsetWrite <= 0 {
		return st
	}
	return newKillPoint(st, app, k.beforeOffsetWrite, log, killSelf)
}

// killSelf SIGKILLs this process: nothing after it runs (no deferred
// call, no buffered write, no further storage write).
func killSelf() { _ = syscall.Kill(os.Getpid(), syscall.SIGKILL) }

// killPoint is a storage.Storage that, before a Put or PutBatch that
// writes a partition's next-PLog-offset row of its application
// (vvmadapter.PartKey, PartCCols(PLogOffsetCC)), logs one line and calls
// kill with probability p. The write is not made when kill returns (a
// test's kill): the call fails instead. Every other call, and every other
// row, passes through. It is a storage.Wrapper and passes
// storage.MultiApplier through, so that the store's callers take the
// paths they take without it.
type killPoint struct {
	storage.Storage
	app  isequencer.ClusterAppID
	p    float64
	log  io.Writer
	kill func()
	rnd  func() float64 // in [0, 1); rand.Float64 unless a test sets it
}

var (
	_ storage.Wrapper      = (*killPoint)(nil)
	_ storage.MultiApplier = (*killPoint)(nil)
)

func newKillPoint(st storage.Storage, app isequencer.ClusterAppID, p float64, log io.Writer, kill func()) *killPoint {
	return &killPoint{Storage: st, app: app, p: p, log: log, kill: kill, rnd: rand.Float64}
}

// errKilled is what a write returns when the kill function returned.
var errKilled = fmt.Errorf("killpoint: killed before the write: %w", storage.ErrUnavailable)

// offsetPartition reports whether (pKey, cCols) is the next-PLog-offset
// row of a partition of k's application, and which partition.
func (k *killPoint) offsetPartition(pKey, cCols []byte) (isequencer.PartitionID, bool) {
	if !bytes.Equal(cCols, vvmadapter.PartCCols(vvmadapter.PLogOffsetCC)) || len(pKey) < 2 {
		return 0, false
	}
	part := isequencer.PartitionID(binary.BigEndian.Uint16(pKey[len(pKey)-2:]))
	return part, bytes.Equal(pKey, vvmadapter.PartKey(k.app, part))
}

// before is called before a write of rows; it returns errKilled when the
// process was to die and kill returned.
func (k *killPoint) before(rows []storage.Row) error {
	for _, r := range rows {
		part, ok := k.offsetPartition(r.PKey, r.CCols)
		if !ok || k.rnd() >= k.p {
			continue
		}
		fmt.Fprintf(k.log, "killpoint: SIGKILL before the next-offset write of partition %d\n", part)
		k.kill()
		return errKilled
	}
	return nil
}

// Put implements storage.Storage.
func (k *killPoint) Put(ctx context.Context, pKey, cCols, value []byte) error {
	if err := k.before([]storage.Row{{PKey: pKey, CCols: cCols}}); err != nil {
		return err
	}
	return k.Storage.Put(ctx, pKey, cCols, value)
}

// PutBatch implements storage.Storage.
func (k *killPoint) PutBatch(ctx context.Context, rows []storage.Row) error {
	if err := k.before(rows); err != nil {
		return err
	}
	return k.Storage.PutBatch(ctx, rows)
}

// ApplyBatchesIf implements storage.MultiApplier over a wrapped
// MultiApplier (no caller writes the offset row with it).
func (k *killPoint) ApplyBatchesIf(ctx context.Context, batches []storage.CondBatch, applied []bool) error {
	ma, ok := k.Storage.(storage.MultiApplier)
	if !ok {
		return fmt.Errorf("killpoint: %w", storage.ErrNotMultiApplier)
	}
	return ma.ApplyBatchesIf(ctx, batches, applied)
}

// Unwrap implements storage.Wrapper.
func (k *killPoint) Unwrap() storage.Storage { return k.Storage }
