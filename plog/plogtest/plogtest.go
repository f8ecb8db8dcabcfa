// Package plogtest holds the fenced-mode scenarios (plog.FencedWriter,
// plog.Sweep, vvmadapter epochs) as functions over any storage.Storage, so
// that the unit tests (mem, bbolt) and the integration tests (a real CQL
// cluster) run the same checks. Each scenario uses only the PLog partition
// it is given (and vvmadapter rows of App and that partition), so
// scenarios can share one store when their partitions differ.
package plogtest

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage"
)

// App is the application the scenarios' vvmadapter rows belong to.
const App isequencer.ClusterAppID = 77

// Owner tags an event with the writer that made it: its WSID.
type Owner = isequencer.WSID

// OwnerOf returns the k-th owner of partition part's scenario (k < 256).
// Records are keyed by WSID, not by partition, so scenarios that share a
// store tag their events with owners of their own.
func OwnerOf(part isequencer.PartitionID, k int) Owner { return Owner(uint64(part)<<8 | uint64(k)) }

// Event returns the event owner writes at off: WSID owner, number off of
// SeqID 1, one record (ID off), payload naming both.
func Event(owner Owner, off isequencer.PLogOffset) *plog.Event {
	return &plog.Event{
		Offset: off, WSID: owner, WSKind: 1, WLogOffset: uint64(off),
		Numbers: []plog.SeqNumber{{SeqID: 1, Number: isequencer.Number(off)}},
		Records: []plog.RecordID{plog.RecordID(off)},
		Payload: fmt.Appendf(nil, "owner %d offset %d", owner, off),
	}
}

// Group returns owner's events at offsets from..from+n-1.
func Group(owner Owner, from isequencer.PLogOffset, n int) []*plog.Event {
	g := make([]*plog.Event, n)
	for i := range g {
		g[i] = Event(owner, from+isequencer.PLogOffset(i))
	}
	return g
}

// Stored is one event as read back.
type Stored struct {
	Offset isequencer.PLogOffset
	Owner  Owner
}

// ReadLog reads partition part's PLog from from to its first gap. Every
// event must be one Event made (checked byte for byte).
func ReadLog(tb testing.TB, st storage.Storage, part isequencer.PartitionID, from isequencer.PLogOffset) []Stored {
	tb.Helper()
	got, err := readLog(context.Background(), st, part, from)
	require.NoError(tb, err)
	return got
}

func readLog(ctx context.Context, st storage.Storage, part isequencer.PartitionID, from isequencer.PLogOffset) ([]Stored, error) {
	r, err := plog.NewReader(st, plog.ReaderOptions{})
	if err != nil {
		return nil, err
	}
	var got []Stored
	err = r.ReadEvents(ctx, part, from, func(e *plog.Event) error {
		want, _ := plog.AppendEncoded(nil, Event(e.WSID, e.Offset))
		have, _ := plog.AppendEncoded(nil, e)
		if !bytes.Equal(want, have) {
			return fmt.Errorf("event at offset %d is not Event(%d, %d)", e.Offset, e.WSID, e.Offset)
		}
		got = append(got, Stored{e.Offset, e.WSID})
		return nil
	})
	return got, err
}

// Span returns owner's Stored events at offsets from..to.
func Span(owner Owner, from, to isequencer.PLogOffset) []Stored {
	var out []Stored
	for o := from; o <= to; o++ {
		out = append(out, Stored{o, owner})
	}
	return out
}

// NewWriter returns a FencedWriter of epoch on part with the given caps (0:
// defaults).
func NewWriter(tb testing.TB, st storage.Storage, part isequencer.PartitionID, epoch uint64, maxEvents, maxBytes int) *plog.FencedWriter {
	tb.Helper()
	w, err := plog.NewFencedWriter(plog.FencedWriterOptions{Storage: st, Partition: part, Epoch: epoch, MaxChunkEvents: maxEvents, MaxChunkBytes: maxBytes})
	require.NoError(tb, err)
	return w
}

// Batch is one ApplyBatchIf call as Recorder saw it.
type Batch struct {
	PKey    []byte
	Conds   []storage.Condition
	Rows    []storage.Row
	Applied bool
}

// Recorder wraps a Storage and records every ApplyBatchIf and PutBatch.
// BeforePutBatch, if set, is called with each PutBatch's rows before they
// are written; BeforeApplyBatchIf, if set, before each ApplyBatchIf.
type Recorder struct {
	storage.Storage
	BeforePutBatch     func(rows []storage.Row)
	BeforeApplyBatchIf func()
	mu                 sync.Mutex
	batches            []Batch
	putBatches         int
}

// ApplyBatchIf calls BeforeApplyBatchIf, then writes and records the call.
func (r *Recorder) ApplyBatchIf(ctx context.Context, pKey []byte, conds []storage.Condition, rows []storage.Row) (bool, error) {
	if r.BeforeApplyBatchIf != nil {
		r.BeforeApplyBatchIf()
	}
	ok, err := r.Storage.ApplyBatchIf(ctx, pKey, conds, rows)
	b := Batch{PKey: bytes.Clone(pKey), Applied: ok && err == nil}
	for _, c := range conds {
		b.Conds = append(b.Conds, storage.Condition{CCols: bytes.Clone(c.CCols), Expected: bytes.Clone(c.Expected)})
	}
	for _, row := range rows {
		b.Rows = append(b.Rows, storage.Row{PKey: bytes.Clone(row.PKey), CCols: bytes.Clone(row.CCols), Value: bytes.Clone(row.Value)})
	}
	r.mu.Lock()
	r.batches = append(r.batches, b)
	r.mu.Unlock()
	return ok, err
}

// PutBatch calls BeforePutBatch, then writes.
func (r *Recorder) PutBatch(ctx context.Context, rows []storage.Row) error {
	r.mu.Lock()
	r.putBatches++
	r.mu.Unlock()
	if r.BeforePutBatch != nil {
		r.BeforePutBatch(rows)
	}
	return r.Storage.PutBatch(ctx, rows)
}

// Take returns the batches recorded since the last Take and the number of
// PutBatch calls, and resets both.
func (r *Recorder) Take() ([]Batch, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, p := r.batches, r.putBatches
	r.batches, r.putBatches = nil, 0
	return b, p
}

// EpochBytes is a fence value.
func EpochBytes(epoch uint64) []byte { return binary.BigEndian.AppendUint64(nil, epoch) }

// checkBatch checks one group batch: in off's block, a fence condition
// (absent and written with epoch when establish, else Expected epoch),
// and n absent-conditioned event rows from off.
func checkBatch(t *testing.T, b Batch, part isequencer.PartitionID, epoch uint64, off isequencer.PLogOffset, n int, establish bool) {
	t.Helper()
	require.Equal(t, plog.EventPKey(part, off), b.PKey, "batch at offset %d: block", off)
	require.NotEmpty(t, b.Conds)
	assert.Equal(t, plog.FenceCCols(), b.Conds[0].CCols, "the first condition is the fence")
	var events []storage.Row
	fenceRows := 0
	for _, r := range b.Rows {
		if bytes.Equal(r.CCols, plog.FenceCCols()) {
			fenceRows++
			assert.Equal(t, EpochBytes(epoch), r.Value, "fence row value")
			continue
		}
		events = append(events, r)
	}
	if establish {
		assert.Nil(t, b.Conds[0].Expected, "establishing: the fence must be absent")
		assert.Equal(t, 1, fenceRows, "establishing: the fence row is written")
	} else {
		assert.Equal(t, EpochBytes(epoch), b.Conds[0].Expected, "established: the fence must hold the epoch")
		assert.Zero(t, fenceRows, "established: no fence row")
	}
	require.Len(t, events, n, "batch at offset %d: event rows", off)
	require.Len(t, b.Conds, n+1)
	for i, r := range events {
		cc := plog.EventCCols(off + isequencer.PLogOffset(i))
		assert.Equal(t, cc, r.CCols)
		assert.Equal(t, storage.Condition{CCols: cc}, b.Conds[i+1], "every event row must be absent")
	}
}

// fence reads part's fence of off's block.
func fence(t *testing.T, st storage.Storage, part isequencer.PartitionID, off isequencer.PLogOffset) (uint64, bool) {
	t.Helper()
	e, ok, err := plog.ReadFence(context.Background(), st, part, off)
	require.NoError(t, err)
	return e, ok
}

// exists reports whether an event row is stored at off.
func exists(t *testing.T, st storage.Storage, part isequencer.PartitionID, off isequencer.PLogOffset) bool {
	t.Helper()
	_, ok, err := st.Get(context.Background(), plog.EventPKey(part, off), plog.EventCCols(off))
	require.NoError(t, err)
	return ok
}

// recordOf reads record id of owner's workspace: the offset it points to.
func recordOf(t *testing.T, st storage.Storage, owner Owner, id plog.RecordID) ([]byte, bool) {
	t.Helper()
	v, ok, err := st.Get(context.Background(), plog.RecordPKey(owner, id), plog.RecordCCols(id))
	require.NoError(t, err)
	return v, ok
}

func isRecordRow(r storage.Row) bool {
	return len(r.PKey) >= 2 && r.PKey[0] == byte(plog.RecordsView>>8) && r.PKey[1] == byte(plog.RecordsView)
}

func offsets(s []Stored) []isequencer.PLogOffset {
	out := make([]isequencer.PLogOffset, len(s))
	for i, e := range s {
		out[i] = e.Offset
	}
	return out
}

func owners(s []Stored) []Owner {
	var out []Owner
	for _, e := range s {
		if !slices.Contains(out, e.Owner) {
			out = append(out, e.Owner)
		}
	}
	return out
}
