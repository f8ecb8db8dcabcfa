package seqstorage

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/drivertest"
	"github.com/cqlseq/cqlseq/storage/faulty"
	"github.com/cqlseq/cqlseq/storage/mem"
	"github.com/cqlseq/cqlseq/vvmadapter"
)

// partitionFaults is a Storage (the contract only) that fails writes as a
// replicated store with one replica out does, one partition at a time: a
// PutBatch whose rows include a row of a failing workspace fails, after
// writing its other rows (CQL writes a batch's partitions concurrently, so
// any subset may land). It counts PutBatch attempts per workspace and logs
// the writes that took effect, in order. It can hold the next write of the
// partition's next PLog offset until released.
type partitionFaults struct {
	storage.Storage
	mu       sync.Mutex
	ws       map[string]isequencer.WSID // WSKey -> WSID
	failing  map[isequencer.WSID]int    // failures left per workspace
	attempts map[isequencer.WSID]int
	log      []string // "ws N" per workspace whose rows landed, "offset N"
	hold     chan struct{}
	held     chan struct{}
}

func newPartitionFaults(inner storage.Storage, wss ...isequencer.WSID) *partitionFaults {
	f := &partitionFaults{Storage: inner, ws: map[string]isequencer.WSID{},
		failing: map[isequencer.WSID]int{}, attempts: map[isequencer.WSID]int{}, held: make(chan struct{}, 1)}
	for _, ws := range wss {
		f.ws[string(vvmadapter.WSKey(app, ws))] = ws
	}
	return f
}

func (f *partitionFaults) PutBatch(ctx context.Context, rows []storage.Row) error {
	if len(rows) == 1 && bytes.Equal(rows[0].PKey, vvmadapter.PartKey(app, part)) {
		return f.putOffset(ctx, rows)
	}
	f.mu.Lock()
	var fail error
	failed := map[isequencer.WSID]bool{}
	seen := map[isequencer.WSID]bool{}
	for _, r := range rows {
		ws, ok := f.ws[string(r.PKey)]
		if !ok {
			f.mu.Unlock()
			return fmt.Errorf("partitionFaults: row of an unknown partition %x", r.PKey)
		}
		if seen[ws] {
			continue
		}
		seen[ws] = true
		f.attempts[ws]++
		if f.failing[ws] > 0 {
			f.failing[ws]--
			failed[ws] = true
			fail = fmt.Errorf("partitionFaults: WSID %d: %w", ws, storage.ErrUnavailable)
		}
	}
	f.mu.Unlock()
	// The rows of the other workspaces land either way.
	var landed []storage.Row
	for _, r := range rows {
		if !failed[f.ws[string(r.PKey)]] {
			landed = append(landed, r)
		}
	}
	if err := f.Storage.PutBatch(ctx, landed); err != nil {
		return err
	}
	f.mu.Lock()
	for _, r := range landed {
		e := fmt.Sprintf("ws %d", f.ws[string(r.PKey)])
		if len(f.log) == 0 || f.log[len(f.log)-1] != e {
			f.log = append(f.log, e)
		}
	}
	f.mu.Unlock()
	return fail
}

// putOffset writes the partition's next PLog offset (one row), held while
// hold is set.
func (f *partitionFaults) putOffset(ctx context.Context, rows []storage.Row) error {
	f.mu.Lock()
	hold := f.hold
	f.hold = nil
	f.mu.Unlock()
	if hold != nil {
		f.held <- struct{}{}
		<-hold
	}
	if err := f.Storage.PutBatch(ctx, rows); err != nil {
		return err
	}
	off, err := vvmadapter.DecodeU64(rows[0].Value, "offset")
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.log = append(f.log, fmt.Sprintf("offset %d", off))
	f.mu.Unlock()
	return nil
}

// TestFlushRetriesOnlyFailedWorkspaces: a flush of 20 workspaces' numbers
// of which one workspace's write fails writes that workspace again, and
// only it; the next PLog offset is written once, after every number below
// it; a restart continues above every number issued.
func TestFlushRetriesOnlyFailedWorkspaces(t *testing.T) {
	const n, warm, bad = 20, isequencer.WSID(100), isequencer.WSID(7)
	wss := []isequencer.WSID{warm}
	for ws := isequencer.WSID(1); ws <= n; ws++ {
		wss = append(wss, ws)
	}
	state := mem.New(mem.Options{})
	defer state.Close()
	plogSt := mem.New(mem.Options{})
	defer plogSt.Close()
	f := newPartitionFaults(state, wss...)
	reader, err := plog.NewReader(plogSt, plog.ReaderOptions{})
	require.NoError(t, err)
	w, err := plog.NewWriter(plog.WriterOptions{Storage: plogSt, Partition: part, Mode: plog.ModeTrust2})
	require.NoError(t, err)

	newSeq := func() (isequencer.ISequencer, func()) {
		seq, cleanup, err := isequencer.New(&isequencer.Params{
			SeqTypes:   map[isequencer.WSKind]map[isequencer.SeqID]isequencer.Number{1: {1: 1}},
			SeqStorage: newStorage(t, Options{Storage: f, Reader: reader}),
			RetryDelay: time.Millisecond, MaxRetryDelay: time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		require.NoError(t, err)
		t.Cleanup(cleanup)
		return seq, cleanup
	}
	issue := func(seq isequencer.ISequencer, ws isequencer.WSID) (isequencer.PLogOffset, isequencer.Number) {
		var off isequencer.PLogOffset
		require.Eventually(t, func() bool {
			var ok bool
			off, ok = seq.Start(1, ws)
			return ok
		}, 10*time.Second, 100*time.Microsecond)
		num, err := seq.Next(1)
		require.NoError(t, err)
		require.NoError(t, w.Write(context.Background(), &plog.Event{Offset: off, WSID: ws, Numbers: []plog.SeqNumber{{SeqID: 1, Number: num}}}))
		seq.Flush()
		return off, num
	}
	storedOffset := func() isequencer.PLogOffset {
		off, _, err := vvmadapter.New(state, app).GetPLogOffset(context.Background(), part)
		require.NoError(t, err)
		return off
	}

	seq, cleanup := newSeq()
	// The warm-up's flush is held at its offset write while the 20
	// transactions are flushed, so that they form one batch.
	f.mu.Lock()
	f.hold = make(chan struct{})
	hold := f.hold
	f.failing[bad] = 1
	f.mu.Unlock()
	issue(seq, warm)
	<-f.held
	for ws := isequencer.WSID(1); ws <= n; ws++ {
		issue(seq, ws)
	}
	close(hold)
	require.Eventually(t, func() bool { return storedOffset() == n+2 }, 10*time.Second, time.Millisecond)

	f.mu.Lock()
	attempts, log := f.attempts, slices.Clone(f.log)
	f.mu.Unlock()
	for _, ws := range wss {
		want := 1
		if ws == bad {
			want = 2
		}
		assert.Equal(t, want, attempts[ws], "PutBatch attempts with rows of WSID %d", ws)
	}
	require.Len(t, log, n+3, "%q", log)
	assert.Equal(t, []string{"ws 100", "offset 2"}, log[:2])
	assert.Equal(t, fmt.Sprintf("ws %d", bad), log[n+1], "the failed workspace lands last")
	assert.Equal(t, fmt.Sprintf("offset %d", n+2), log[n+2], "then the offset, once")

	cleanup()
	seq, _ = newSeq()
	for ws := isequencer.WSID(1); ws <= n; ws++ {
		off, num := issue(seq, ws)
		require.Equal(t, isequencer.PLogOffset(n+2)+isequencer.PLogOffset(ws-1), off)
		require.Equal(t, isequencer.Number(2), num, "WSID %d continues above its flushed number", ws)
	}
}

// TestWriteReportsFailedWorkspaces: the values of workspaces whose write
// failed are reported by index into the caller's batch (in any order of
// the batch); the others are stored; the offset is written only by a call
// in which every value was.
func TestWriteReportsFailedWorkspaces(t *testing.T) {
	state := mem.New(mem.Options{})
	defer state.Close()
	f := newPartitionFaults(state, 1, 2, 3, 4, 5, 6)
	s := newStorage(t, Options{Storage: f, WriteWorkers: 2})
	f.failing[2], f.failing[5] = 1, 2
	// Unsorted, several SeqIDs per workspace.
	batch := []isequencer.SeqValue{
		{Key: key(5, 1), Value: 51}, {Key: key(1, 1), Value: 11}, {Key: key(2, 2), Value: 22},
		{Key: key(6, 1), Value: 61}, {Key: key(2, 1), Value: 21}, {Key: key(3, 1), Value: 31},
		{Key: key(5, 2), Value: 52}, {Key: key(4, 1), Value: 41},
	}
	err := s.WriteValuesAndNextPLogOffset(batch, 9)
	var pe *isequencer.PartialWriteError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, []int{0, 2, 4, 6}, pe.Failed, "the values of WSIDs 2 and 5")
	require.ErrorIs(t, err, storage.ErrUnavailable)
	assert.Contains(t, err.Error(), "2 of 6 workspaces not written")
	assert.Contains(t, err.Error(), "app 7 partition 3")
	stored := func(ws isequencer.WSID) []isequencer.Number {
		nums, err := s.ReadNumbers(ws, []isequencer.SeqID{1, 2})
		require.NoError(t, err)
		return nums
	}
	for ws, want := range map[isequencer.WSID][]isequencer.Number{1: {11, 0}, 2: {0, 0}, 3: {31, 0}, 4: {41, 0}, 5: {0, 0}, 6: {61, 0}} {
		assert.Equal(t, want, stored(ws), "WSID %d", ws)
	}
	off, err := s.ReadNextPLogOffset()
	require.NoError(t, err)
	assert.Zero(t, off, "no offset while a value below it is not written")

	var retry []isequencer.SeqValue
	for _, i := range pe.Failed {
		retry = append(retry, batch[i])
	}
	err = s.WriteValuesAndNextPLogOffset(retry, 9)
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, []int{0, 3}, pe.Failed, "WSID 5 fails once more")
	require.NoError(t, s.WriteValuesAndNextPLogOffset([]isequencer.SeqValue{retry[0], retry[3]}, 9))
	assert.Equal(t, []isequencer.Number{21, 22}, stored(2))
	assert.Equal(t, []isequencer.Number{51, 52}, stored(5))
	off, err = s.ReadNextPLogOffset()
	require.NoError(t, err)
	assert.Equal(t, isequencer.PLogOffset(9), off)
	assert.Equal(t, "offset 9", f.log[len(f.log)-1])
	assert.Equal(t, 1, f.attempts[1], "a written workspace is not written again")
}

// countingMulti is a storage.MultiApplier (mem) that counts PutBatch calls.
type countingMulti struct {
	*mem.Store
	putBatches atomic.Int64
}

func (c *countingMulti) PutBatch(ctx context.Context, rows []storage.Row) error {
	c.putBatches.Add(1)
	return c.Store.PutBatch(ctx, rows)
}

// TestWriteOneCallOnEmbeddedStores: on a storage.MultiApplier the numbers
// of every workspace are written with one PutBatch (one local
// transaction); on the contract alone, one per workspace.
func TestWriteOneCallOnEmbeddedStores(t *testing.T) {
	batch := []isequencer.SeqValue{{Key: key(1, 1), Value: 1}, {Key: key(2, 1), Value: 2}, {Key: key(3, 1), Value: 3}}
	multi := &countingMulti{Store: mem.New(mem.Options{})}
	defer multi.Close()
	var _ storage.MultiApplier = multi
	require.NoError(t, newStorage(t, Options{Storage: multi}).WriteValuesAndNextPLogOffset(batch, 4))
	assert.EqualValues(t, 2, multi.putBatches.Load(), "one for the numbers, one for the offset")

	counting := drivertest.NewCounting(mem.New(mem.Options{}))
	defer counting.Close()
	require.NoError(t, newStorage(t, Options{Storage: counting}).WriteValuesAndNextPLogOffset(batch, 4))
	assert.EqualValues(t, 3+1, counting.Calls(faulty.OpPutBatch))

	// A wrapper claims ApplyBatchesIf whatever it wraps: over the contract
	// alone the numbers are still written one PutBatch per workspace, so
	// that a failed workspace fails alone (a bare type check took the
	// wrapper for an embedded store).
	counting = drivertest.NewCounting(mem.New(mem.Options{}))
	defer counting.Close()
	wrapped, err := faulty.New(counting, faulty.Options{})
	require.NoError(t, err)
	var _ storage.MultiApplier = wrapped
	require.NoError(t, newStorage(t, Options{Storage: wrapped}).WriteValuesAndNextPLogOffset(batch, 4))
	assert.EqualValues(t, 3+1, counting.Calls(faulty.OpPutBatch), "one PutBatch per workspace (and the offset's) under a wrapper of a CQL-like store")
}

// TestWriteFollowsGivenCapabilities: Options.Capabilities, when given,
// decides the write path, not a probe of Storage: a store probed as one
// transaction per PutBatch is written one PutBatch per workspace when the
// caller's Capabilities say otherwise, and the other way round.
func TestWriteFollowsGivenCapabilities(t *testing.T) {
	batch := []isequencer.SeqValue{{Key: key(1, 1), Value: 1}, {Key: key(2, 1), Value: 2}, {Key: key(3, 1), Value: 3}}
	multi := &countingMulti{Store: mem.New(mem.Options{})}
	defer multi.Close()
	require.True(t, storage.Probe(multi).PutBatchOneTransaction())
	require.NoError(t, newStorage(t, Options{Storage: multi, Capabilities: &storage.Capabilities{}}).WriteValuesAndNextPLogOffset(batch, 4))
	assert.EqualValues(t, 3+1, multi.putBatches.Load(), "one per workspace and one for the offset")

	counting := drivertest.NewCounting(drivertest.ContractOnly(mem.New(mem.Options{})))
	defer counting.Close()
	require.False(t, storage.Probe(counting).PutBatchOneTransaction())
	caps := storage.Capabilities{MultiApplier: multi} // says: one transaction per PutBatch
	require.NoError(t, newStorage(t, Options{Storage: counting, Capabilities: &caps}).WriteValuesAndNextPLogOffset(batch, 4))
	assert.EqualValues(t, 1+1, counting.Calls(faulty.OpPutBatch), "one for the numbers, one for the offset")
}
