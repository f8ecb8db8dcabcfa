package plogtest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/vvmadapter"
)

// BlockBoundary: a group across a block boundary is two batches, each
// establishing its block's fence; the next group in the block writes
// under the established fence, without a fence row.
func BlockBoundary(t *testing.T, st storage.Storage, part isequencer.PartitionID) {
	ctx := context.Background()
	o1 := OwnerOf(part, 1)
	rec := &Recorder{Storage: st}
	w := NewWriter(t, rec, part, 1, 0, 0)
	require.NoError(t, w.WriteGroup(ctx, Group(o1, 4090, 11)))
	batches, puts := rec.Take()
	require.Len(t, batches, 2)
	checkBatch(t, batches[0], part, 1, 4090, 6, true)
	checkBatch(t, batches[1], part, 1, 4096, 5, true)
	assert.Equal(t, 2, puts, "one record PutBatch per applied batch")
	for _, off := range []isequencer.PLogOffset{4090, 4096} {
		e, ok := fence(t, st, part, off)
		assert.True(t, ok)
		assert.Equal(t, uint64(1), e, "fence of offset %d's block", off)
	}

	require.NoError(t, w.WriteGroup(ctx, Group(o1, 4101, 3)))
	batches, _ = rec.Take()
	require.Len(t, batches, 1)
	checkBatch(t, batches[0], part, 1, 4101, 3, false)
	assert.Equal(t, Span(o1, 4090, 4103), ReadLog(t, st, part, 4090))
	for off := isequencer.PLogOffset(4090); off <= 4103; off++ {
		v, ok := recordOf(t, st, o1, plog.RecordID(off))
		assert.True(t, ok, "record %d", off)
		assert.Equal(t, plog.RecordValue(off), v)
	}
	require.NoError(t, w.Stopped())
}

// GroupCaps: MaxChunkEvents and MaxChunkBytes split a group; an event
// above MaxChunkBytes goes alone.
func GroupCaps(t *testing.T, st storage.Storage, part isequencer.PartitionID) {
	ctx := context.Background()
	o1 := OwnerOf(part, 1)
	rec := &Recorder{Storage: st}
	w := NewWriter(t, rec, part, 1, 4, 0)
	require.NoError(t, w.WriteGroup(ctx, Group(o1, 1, 10)))
	batches, _ := rec.Take()
	require.Len(t, batches, 3)
	checkBatch(t, batches[0], part, 1, 1, 4, true)
	checkBatch(t, batches[1], part, 1, 5, 4, false)
	checkBatch(t, batches[2], part, 1, 9, 2, false)

	// Byte cap: events of offsets 11..19 encode to the same size.
	enc, err := plog.AppendEncoded(nil, Event(o1, 11))
	require.NoError(t, err)
	size := plog.BatchBytes(Event(o1, 11), len(enc))
	w = NewWriter(t, rec, part, 1, 0, 2*size+size/2)
	require.NoError(t, w.WriteGroup(ctx, Group(o1, 11, 5)))
	batches, _ = rec.Take()
	require.Len(t, batches, 4)
	checkBatch(t, batches[0], part, 1, 11, 2, true) // a new writer: establishes, learns the fence is its own
	assert.False(t, batches[0].Applied)
	checkBatch(t, batches[1], part, 1, 11, 2, false)
	checkBatch(t, batches[2], part, 1, 13, 2, false)
	checkBatch(t, batches[3], part, 1, 15, 1, false)
	assert.True(t, batches[3].Applied)

	w = NewWriter(t, rec, part, 1, 0, 2*size+size/2)
	require.NoError(t, w.WriteGroup(ctx, Group(o1, 16, 1)), "learn the fence")
	rec.Take()
	require.NoError(t, w.WriteGroup(ctx, Group(o1, 17, 5)))
	batches, _ = rec.Take()
	require.Len(t, batches, 3)
	checkBatch(t, batches[0], part, 1, 17, 2, false)
	checkBatch(t, batches[1], part, 1, 19, 2, false)
	checkBatch(t, batches[2], part, 1, 21, 1, false)

	w = NewWriter(t, rec, part, 1, 0, 1)
	require.NoError(t, w.WriteGroup(ctx, Group(o1, 22, 3)))
	batches, _ = rec.Take()
	require.Len(t, batches, 4, "one to learn the fence, then one event per batch")
	assert.Equal(t, Span(o1, 1, 24), ReadLog(t, st, part, 1))
}

// SecondOwner: owner A (epoch e) writes; B raises the epoch and sweeps
// from A's stored offset; A's next group is fenced and writes nothing; B
// writes at the same offsets; A's late group into the block after (the
// first empty block) is fenced too; an older epoch's sweep is fenced.
func SecondOwner(t *testing.T, st storage.Storage, part isequencer.PartitionID) {
	ctx := context.Background()
	o1, o2 := OwnerOf(part, 1), OwnerOf(part, 2)
	vvm := vvmadapter.New(st, App)
	ownerA, err := vvm.TakeOver(ctx, part)
	require.NoError(t, err)
	eA := ownerA.Epoch()
	n, err := plog.Sweep(ctx, st, part, 0, eA)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "a fresh partition: the first (empty) block is fenced")

	recA := &Recorder{Storage: st}
	a := NewWriter(t, recA, part, eA, 0, 0)
	require.NoError(t, a.WriteGroup(ctx, Group(o1, 1, 10)))
	require.NoError(t, a.WriteGroup(ctx, Group(o1, 11, 10)))
	require.NoError(t, ownerA.PutPLogOffset(ctx, 21))

	eB, err := vvm.NextEpoch(ctx, part)
	require.NoError(t, err)
	require.Greater(t, eB, eA)
	from, ok, err := vvm.GetPLogOffset(ctx, part)
	require.NoError(t, err)
	require.True(t, ok)
	n, err = plog.Sweep(ctx, st, part, from, eB)
	require.NoError(t, err)
	assert.Equal(t, 2, n, "block 0 (A's) swapped, block 1 (the first empty one) inserted")
	for _, off := range []isequencer.PLogOffset{1, 4096} {
		e, ok := fence(t, st, part, off)
		assert.True(t, ok)
		assert.Equal(t, eB, e)
	}

	recA.Take()
	err = a.WriteGroup(ctx, Group(o1, 21, 5))
	require.ErrorIs(t, err, plog.ErrFenced)
	require.ErrorIs(t, a.Stopped(), plog.ErrFenced)
	err = a.WriteGroup(ctx, Group(o1, 26, 5))
	require.ErrorIs(t, err, plog.ErrFenced, "sticky")
	batches, puts := recA.Take()
	assert.Len(t, batches, 1, "the sticky error is returned without a write")
	assert.Zero(t, puts, "no records of a refused group")
	assert.Equal(t, Span(o1, 1, 20), ReadLog(t, st, part, 1), "none of A's later events")
	_, ok = recordOf(t, st, o1, 21)
	assert.False(t, ok)

	b := NewWriter(t, st, part, eB, 0, 0)
	require.NoError(t, b.WriteGroup(ctx, Group(o2, 21, 5)))
	assert.Equal(t, append(Span(o1, 1, 20), Span(o2, 21, 25)...), ReadLog(t, st, part, 1))

	// A's late group into a new block (A's writer rebuilt, not knowing it
	// is deposed): the first empty block's fence stops it.
	late := NewWriter(t, st, part, eA, 0, 0)
	err = late.WriteGroup(ctx, Group(o1, 4096, 3))
	require.ErrorIs(t, err, plog.ErrFenced)
	assert.False(t, exists(t, st, part, 4096))
	e, _ := fence(t, st, part, 4096)
	assert.Equal(t, eB, e, "the fence is left as it was")

	_, err = plog.Sweep(ctx, st, part, 1, eA)
	require.ErrorIs(t, err, plog.ErrFenced, "a sweep of an older epoch")
	n, err = plog.Sweep(ctx, st, part, from, eB)
	require.NoError(t, err)
	assert.Zero(t, n, "sweeping again with the same epoch writes nothing")
	require.NoError(t, b.WriteGroup(ctx, Group(o2, 26, 4071)), "B fills block 0 and goes on into block 1")
	assert.Len(t, ReadLog(t, st, part, 1), 4096)
}

// PlantedConflict: an event already stored at an offset is an ErrConflict
// (in a block fenced with the writer's epoch, one fenced by a sweep, and
// one with no fence); nothing is written or overwritten; the writer stays
// stopped.
func PlantedConflict(t *testing.T, st storage.Storage, part isequencer.PartitionID) {
	ctx := context.Background()
	o1 := OwnerOf(part, 1)
	planted := []byte{0xEE}
	rec := &Recorder{Storage: st}
	w := NewWriter(t, rec, part, 1, 0, 0)
	require.NoError(t, w.WriteGroup(ctx, Group(o1, 1, 4)))
	require.NoError(t, st.Put(ctx, plog.EventPKey(part, 6), plog.EventCCols(6), planted))
	rec.Take()
	err := w.WriteGroup(ctx, Group(o1, 5, 4))
	require.ErrorIs(t, err, plog.ErrConflict)
	assert.Contains(t, err.Error(), "offsets [6]")
	_, puts := rec.Take()
	assert.Zero(t, puts, "no records")
	v, _, _ := st.Get(ctx, plog.EventPKey(part, 6), plog.EventCCols(6))
	assert.Equal(t, planted, v, "not overwritten")
	for _, off := range []isequencer.PLogOffset{5, 7, 8} {
		assert.False(t, exists(t, st, part, off), "all or nothing: offset %d", off)
	}
	require.ErrorIs(t, w.WriteGroup(ctx, Group(o1, 9, 1)), plog.ErrConflict, "sticky")
	assert.False(t, exists(t, st, part, 9))

	// No fence in the block.
	require.NoError(t, st.Put(ctx, plog.EventPKey(part, 4097), plog.EventCCols(4097), planted))
	err = NewWriter(t, st, part, 1, 0, 0).WriteGroup(ctx, Group(o1, 4096, 3))
	require.ErrorIs(t, err, plog.ErrConflict)
	assert.Contains(t, err.Error(), "no fence")
	_, ok := fence(t, st, part, 4096)
	assert.False(t, ok, "the fence is not written either")
	assert.False(t, exists(t, st, part, 4096))

	// A block fenced by the writer's own sweep.
	_, err = plog.Sweep(ctx, st, part, 8192, 2)
	require.NoError(t, err)
	require.NoError(t, st.Put(ctx, plog.EventPKey(part, 8194), plog.EventCCols(8194), planted))
	err = NewWriter(t, st, part, 2, 0, 0).WriteGroup(ctx, Group(o1, 8192, 3))
	require.ErrorIs(t, err, plog.ErrConflict)
	assert.Contains(t, err.Error(), "offsets [8194]")
	assert.False(t, exists(t, st, part, 8192))
}

// SplitGroupTakeover: a takeover (a sweep with a later epoch) between two
// chunks of one group. The chunk applied before it stays stored with its
// records, and WriteGroup's *plog.GroupError reads, per event: stored
// (nil), refused (ErrFenced, the chunk that met the new fence), not
// written (ErrNotWritten, the chunk after it).
func SplitGroupTakeover(t *testing.T, st storage.Storage, part isequencer.PartitionID) {
	ctx := context.Background()
	o1 := OwnerOf(part, 1)
	calls := 0
	rec := &Recorder{Storage: st}
	rec.BeforeApplyBatchIf = func() {
		if calls++; calls == 2 {
			_, err := plog.Sweep(ctx, st, part, 1, 2)
			require.NoError(t, err)
		}
	}
	w := NewWriter(t, rec, part, 1, 3, 0)
	err := w.WriteGroup(ctx, Group(o1, 1, 9))
	require.ErrorIs(t, err, plog.ErrFenced)
	var ge *plog.GroupError
	require.ErrorAs(t, err, &ge)
	assert.Equal(t, 3, ge.Stored(), "the first chunk (3 events) is stored")
	assert.Contains(t, err.Error(), "the first 3 of 9 events stored")
	require.Len(t, ge.Errs, 9)
	for i, err := range ge.Errs {
		switch {
		case i < 3:
			assert.NoError(t, err, "event %d", i)
		case i < 6:
			assert.ErrorIs(t, err, plog.ErrFenced, "event %d", i)
			assert.NotErrorIs(t, err, plog.ErrNotWritten, "event %d: its chunk was sent", i)
		default:
			assert.ErrorIs(t, err, plog.ErrNotWritten, "event %d", i)
			assert.ErrorIs(t, err, plog.ErrFenced, "event %d: after the refused chunk", i)
		}
	}
	assert.Equal(t, Span(o1, 1, 3), ReadLog(t, st, part, 1))
	for off := range isequencer.PLogOffset(3) {
		_, ok := recordOf(t, st, o1, plog.RecordID(1+off))
		assert.True(t, ok, "record of offset %d", 1+off)
	}
	_, ok := recordOf(t, st, o1, 4)
	assert.False(t, ok, "no record of a refused chunk")

	// Refused at its first chunk: nothing stored.
	err = w.WriteGroup(ctx, Group(o1, 4, 2))
	require.ErrorIs(t, err, plog.ErrFenced)
	require.ErrorAs(t, err, &ge)
	assert.Zero(t, ge.Stored())
	assert.Equal(t, Span(o1, 1, 3), ReadLog(t, st, part, 1))
}

// RecordsAfterEvents: a group's records are written only once its events
// are stored, and never for a refused group.
func RecordsAfterEvents(t *testing.T, st storage.Storage, part isequencer.PartitionID) {
	ctx := context.Background()
	o1 := OwnerOf(part, 1)
	var checked atomic.Int64
	rec := &Recorder{Storage: st}
	rec.BeforePutBatch = func(rows []storage.Row) {
		for _, r := range rows {
			if !isRecordRow(r) {
				continue
			}
			off := isequencer.PLogOffset(binary.BigEndian.Uint64(r.Value))
			_, ok, err := st.Get(ctx, plog.EventPKey(part, off), plog.EventCCols(off))
			if err != nil || !ok {
				t.Errorf("record row %x written before its event at offset %d (ok %v, err %v)", r.CCols, off, ok, err)
			}
			checked.Add(1)
		}
	}
	w := NewWriter(t, rec, part, 1, 3, 0)
	require.NoError(t, w.WriteGroup(ctx, Group(o1, 4094, 7)))
	assert.Equal(t, int64(7), checked.Load())
	for off := isequencer.PLogOffset(4094); off <= 4100; off++ {
		_, ok := recordOf(t, st, o1, plog.RecordID(off))
		assert.True(t, ok, "record %d", off)
	}
	_, err := plog.Sweep(ctx, st, part, 4101, 2)
	require.NoError(t, err)
	rec.Take()
	require.ErrorIs(t, w.WriteGroup(ctx, Group(o1, 4101, 3)), plog.ErrFenced)
	_, puts := rec.Take()
	assert.Zero(t, puts)
	_, ok := recordOf(t, st, o1, 4101)
	assert.False(t, ok)
}

// FenceNotReadAsEvent: the reader reads a full block past its fence row
// into the next block, and never decodes a fence as an event.
func FenceNotReadAsEvent(t *testing.T, st storage.Storage, part isequencer.PartitionID) {
	ctx := context.Background()
	o1 := OwnerOf(part, 1)
	w := NewWriter(t, st, part, 1, 0, 0)
	require.NoError(t, w.WriteGroup(ctx, Group(o1, 1, 4095+3)), "block 0 full (offsets 1..4095), 3 in block 1")
	_, ok := fence(t, st, part, 1)
	require.True(t, ok)
	assert.Equal(t, Span(o1, 1, 4098), ReadLog(t, st, part, 1))
	assert.Equal(t, Span(o1, 4000, 4098), ReadLog(t, st, part, 4000))

	// A block with a fence and no event is an empty log there.
	_, err := plog.Sweep(ctx, st, part, 3*4096, 1)
	require.NoError(t, err)
	assert.Empty(t, ReadLog(t, st, part, 3*4096))
}

// RaceFreshBlock: two writers of different epochs (on their own sessions)
// and a sweep of a third epoch race for a fresh partition. All events come
// from one owner, whoever's group established the first block's fence;
// every event a writer acknowledged is stored; both writers end fenced.
func RaceFreshBlock(t *testing.T, stA, stB, stS storage.Storage, part isequencer.PartitionID) {
	ctx := context.Background()
	start := make(chan struct{})
	type result struct {
		acked      []isequencer.PLogOffset
		err        error
		sawUnknown bool
	}
	results := make([]result, 2)
	var wg sync.WaitGroup
	for i, st := range []storage.Storage{stA, stB} {
		owner, epoch := OwnerOf(part, i+1), uint64(i+1)
		res := &results[i]
		wg.Go(func() {
			w, err := plog.NewFencedWriter(plog.FencedWriterOptions{Storage: st, Partition: part, Epoch: epoch})
			if err != nil {
				res.err = err
				return
			}
			<-start
			next := isequencer.PLogOffset(1)
			for g := 0; res.err == nil; g++ {
				n := 1 + g%4
				err := w.WriteGroup(ctx, Group(owner, next, n))
				switch {
				case err == nil:
					for k := range n {
						res.acked = append(res.acked, next+isequencer.PLogOffset(k))
					}
					next += isequencer.PLogOffset(n)
				case errors.Is(err, plog.ErrFenced), errors.Is(err, plog.ErrConflict):
					res.err = err
				default:
					// Outcome unknown: re-read the log's end, as a
					// committer's actualization would.
					res.sawUnknown = true
					log, rerr := readLog(ctx, st, part, 1)
					if rerr != nil {
						res.err = rerr
						continue
					}
					next = isequencer.PLogOffset(len(log) + 1)
				}
			}
		})
	}
	var swept int
	var sweepErr error
	wg.Go(func() {
		<-start
		swept, sweepErr = plog.Sweep(ctx, stS, part, 1, 3)
	})
	close(start)
	wg.Wait()

	require.NoError(t, sweepErr)
	assert.GreaterOrEqual(t, swept, 1)
	e, ok := fence(t, stS, part, 1)
	require.True(t, ok)
	assert.Equal(t, uint64(3), e, "the sweep's epoch is the first block's last fence")
	log := ReadLog(t, stS, part, 1)
	own := owners(log)
	t.Logf("partition %d: %d events of owners %v; acknowledged: A %d, B %d; sweep wrote %d fences", part, len(log), own, len(results[0].acked), len(results[1].acked), swept)
	assert.LessOrEqual(t, len(own), 1, "one owner's events, never both: %v", own)
	for i, r := range results {
		owner := OwnerOf(part, i+1)
		if len(r.acked) > 0 {
			assert.Equal(t, []Owner{owner}, own, "owner %d acknowledged events", owner)
			assert.Subset(t, offsets(log), r.acked)
		}
		switch {
		case errors.Is(r.err, plog.ErrFenced):
		case errors.Is(r.err, plog.ErrConflict) && r.sawUnknown:
			// A write with an unknown outcome that applied after the
			// re-read: refused, never overwritten.
		default:
			t.Errorf("owner %d ended with %v, want ErrFenced (the sweep fences everyone)", owner, r.err)
		}
	}
}

// RaceTakeover: owner A writes groups on its session while B raises the
// epoch, sweeps from A's stored offset and, after a replay, writes on
// another session. A is fenced once the sweep returns: no group A starts
// after that is acknowledged; A's acknowledged events are all stored and
// all precede B's; the log has no gap.
func RaceTakeover(t *testing.T, stA, stB storage.Storage, part isequencer.PartitionID, bGroups int) {
	ctx := context.Background()
	o1, o2 := OwnerOf(part, 1), OwnerOf(part, 2)
	vvmA, vvmB := vvmadapter.New(stA, App), vvmadapter.New(stB, App)
	ownerA, err := vvmA.TakeOver(ctx, part)
	require.NoError(t, err)
	eA := ownerA.Epoch()
	_, err = plog.Sweep(ctx, stA, part, 0, eA)
	require.NoError(t, err)

	var (
		swept   atomic.Bool
		aAcked  []isequencer.PLogOffset
		aErr    error
		aLate   []isequencer.PLogOffset // acknowledged though started after the sweep returned
		started = make(chan struct{})
		wg      sync.WaitGroup
	)
	w := NewWriter(t, stA, part, eA, 0, 0)
	wg.Go(func() {
		var once sync.Once
		defer once.Do(func() { close(started) })
		next := isequencer.PLogOffset(1)
		for g := 0; aErr == nil; g++ {
			if g == 3 {
				once.Do(func() { close(started) })
			}
			n := 1 + g%7
			after := swept.Load()
			err := w.WriteGroup(ctx, Group(o1, next, n))
			switch {
			case err == nil:
				for k := range n {
					aAcked = append(aAcked, next+isequencer.PLogOffset(k))
					if after {
						aLate = append(aLate, next+isequencer.PLogOffset(k))
					}
				}
				next += isequencer.PLogOffset(n)
				if g%5 == 0 {
					if err := ownerA.PutPLogOffset(ctx, next); err != nil {
						aErr = err
					}
				}
			case errors.Is(err, plog.ErrFenced), errors.Is(err, plog.ErrConflict):
				aErr = err
			default:
				log, rerr := readLog(ctx, stA, part, 1)
				if rerr != nil {
					aErr = rerr
					continue
				}
				next = isequencer.PLogOffset(len(log) + 1)
			}
		}
	})

	<-started
	eB, err := vvmB.NextEpoch(ctx, part)
	require.NoError(t, err)
	from, _, err := vvmB.GetPLogOffset(ctx, part)
	require.NoError(t, err)
	_, err = plog.Sweep(ctx, stB, part, from, eB)
	swept.Store(true)
	require.NoError(t, err)
	replayed := ReadLog(t, stB, part, 1)
	bFrom := isequencer.PLogOffset(len(replayed) + 1)
	b := NewWriter(t, stB, part, eB, 0, 0)
	var bAcked []isequencer.PLogOffset
	next := bFrom
	for g := 0; g < bGroups; {
		n := 1 + g%5
		err := b.WriteGroup(ctx, Group(o2, next, n))
		switch {
		case err == nil:
			for k := range n {
				bAcked = append(bAcked, next+isequencer.PLogOffset(k))
			}
			next += isequencer.PLogOffset(n)
			g++
		case errors.Is(err, plog.ErrFenced), errors.Is(err, plog.ErrConflict):
			require.NoError(t, err, "B")
		default:
			t.Logf("B: outcome unknown, re-reading the log: %v", err)
			next = isequencer.PLogOffset(len(ReadLog(t, stB, part, 1)) + 1)
		}
	}
	wg.Wait()

	t.Logf("partition %d: A acknowledged %d events, swept from %d, B replayed %d and wrote from %d", part, len(aAcked), from, len(replayed), bFrom)
	require.ErrorIs(t, aErr, plog.ErrFenced, "A ends fenced")
	assert.Empty(t, aLate, "A acknowledged groups it started after the sweep returned")
	log := ReadLog(t, stB, part, 1)
	require.Equal(t, append(Span(o1, 1, bFrom-1), Span(o2, bFrom, isequencer.PLogOffset(len(log)))...), log,
		"A's events, then B's, no gap, never both at one offset")
	for _, off := range aAcked {
		require.Less(t, off, bFrom, "A's acknowledged event at %d is after B's first", off)
	}
	assert.Subset(t, offsets(log), bAcked)
	assert.Subset(t, offsets(log), aAcked)
}

// LargeGroups: groups far larger than one batch, of events that cost a
// batch much (a 300-byte payload, three numbers and three records each),
// are stored whole by every writer with the default caps (trust 2, trust
// 0 and fenced, each in a PLog block of its own): no batch the writers send
// is one the store refuses as too large (Cassandra's
// batch_size_fail_threshold, 50 KiB by default).
func LargeGroups(t *testing.T, st storage.Storage, part isequencer.PartitionID) {
	ctx := context.Background()
	const n = 1500
	trust2, err := plog.NewWriter(plog.WriterOptions{Storage: st, Partition: part, Mode: plog.ModeTrust2})
	require.NoError(t, err)
	trust0, err := plog.NewWriter(plog.WriterOptions{Storage: st, Partition: part, Mode: plog.ModeTrust0})
	require.NoError(t, err)
	for i, w := range []plog.GroupWriter{trust2, trust0, NewWriter(t, st, part, 1, 0, 0)} {
		owner := OwnerOf(part, 100+i)
		from := isequencer.PLogOffset(4096 * (i + 1))
		group := make([]*plog.Event, n)
		for k := range group {
			off := from + isequencer.PLogOffset(k)
			id := plog.RecordID(3 * off)
			group[k] = &plog.Event{
				Offset: off, WSID: owner, WSKind: 1, WLogOffset: uint64(off),
				Numbers: []plog.SeqNumber{{SeqID: 1, Number: isequencer.Number(off)}, {SeqID: 2, Number: isequencer.Number(id)}, {SeqID: 3, Number: 1 << 40}},
				Records: []plog.RecordID{id, id + 1, id + 2},
				Payload: bytes.Repeat([]byte{'p'}, 300),
			}
		}
		require.NoError(t, w.WriteGroup(ctx, group), "writer %d", i)
		r, err := plog.NewReader(st, plog.ReaderOptions{})
		require.NoError(t, err)
		read := 0
		require.NoError(t, r.ReadEvents(ctx, part, from, func(e *plog.Event) error {
			if e.WSID != owner || e.Offset != from+isequencer.PLogOffset(read) {
				return fmt.Errorf("offset %d: WSID %d, want %d at offset %d", e.Offset, e.WSID, owner, from+isequencer.PLogOffset(read))
			}
			read++
			return nil
		}), "writer %d", i)
		assert.Equal(t, n, read, "writer %d: events read back", i)
	}
}
