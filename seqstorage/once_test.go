package seqstorage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/mem"
	"github.com/cqlseq/cqlseq/vvmadapter"
)

// wsReadStore calls onRead before every Read of a workspace's numbers
// partition of app; an error it returns is the Read's.
type wsReadStore struct {
	storage.Storage
	onRead func(ctx context.Context, ws isequencer.WSID) error
}

func (s *wsReadStore) Read(ctx context.Context, pKey, from, to []byte, cb func(cCols, value []byte) error) error {
	for ws := isequencer.WSID(1); ws <= 10; ws++ {
		if bytes.Equal(pKey, vvmadapter.WSKey(app, ws)) {
			if err := s.onRead(ctx, ws); err != nil {
				return err
			}
		}
	}
	return s.Storage.Read(ctx, pKey, from, to, cb)
}

func (s *wsReadStore) ReadPartitions(ctx context.Context, pKeys [][]byte, from, to []byte, cb func(pKey, cCols, value []byte) error) error {
	for _, k := range pKeys {
		for ws := isequencer.WSID(1); ws <= 10; ws++ {
			if bytes.Equal(k, vvmadapter.WSKey(app, ws)) {
				if err := s.onRead(ctx, ws); err != nil {
					return err
				}
			}
		}
	}
	return s.Storage.ReadPartitions(ctx, pKeys, from, to, cb)
}

func ev(off isequencer.PLogOffset, ws isequencer.WSID, nums ...plog.SeqNumber) *plog.Event {
	return &plog.Event{Partition: part, Offset: off, WSID: ws, Numbers: nums}
}

func sn(id isequencer.SeqID, n isequencer.Number) plog.SeqNumber {
	return plog.SeqNumber{SeqID: id, Number: n}
}

// eventsFrom is a PLogReader of events (by offset) that calls before(i)
// ahead of the i-th event it passes; an error it returns ends the read.
func eventsFrom(events []*plog.Event, before func(ctx context.Context, i int) error) readerFunc {
	return func(ctx context.Context, _ isequencer.PartitionID, from isequencer.PLogOffset, cb func(*plog.Event) error) error {
		for i, e := range events {
			if e.Offset < from {
				continue
			}
			if before != nil {
				if err := before(ctx, i); err != nil {
					return err
				}
			}
			if err := cb(e); err != nil {
				return err
			}
		}
		return nil
	}
}

// TestActualizeOnce: per (workspace, SeqID), the larger of the stored number
// and the events'; initial SeqIDs of every workspace the events name; SeqIDs
// beyond initial, also when an event names them after the workspace's
// stored numbers were read; with write, only numbers above the stored ones.
func TestActualizeOnce(t *testing.T) {
	st := mem.New(mem.Options{})
	defer st.Close()
	events := []*plog.Event{
		ev(9, 1, sn(1, 99999)), // before the stored offset: not read
		ev(10, 1, sn(1, 100), sn(2, 7)),
		ev(11, 2, sn(2, 8)),
		ev(12, 1, sn(9, 4)), // a SeqID beyond initial, workspace 1 already read
		ev(13, 3, sn(9, 2)), // a new workspace, a SeqID beyond initial
		ev(14, 2, sn(2, 9)),
	}
	s := newStorage(t, Options{Storage: st, Reader: eventsFrom(events, nil)})
	require.NoError(t, s.WriteValuesAndNextPLogOffset([]isequencer.SeqValue{
		{Key: key(1, 1), Value: 5000}, {Key: key(1, 2), Value: 3}, {Key: key(3, 9), Value: 10}, {Key: key(4, 1), Value: 77},
	}, 10))
	initial := map[isequencer.SeqID]isequencer.Number{1: 1, 2: 500}
	want := []ActualizedNumber{
		{WSID: 1, SeqID: 1, Last: 5000, Next: 5001},
		{WSID: 1, SeqID: 2, Last: 7, Next: 500},
		{WSID: 1, SeqID: 9, Last: 4, Next: 5},
		{WSID: 2, SeqID: 1, Last: 0, Next: 1},
		{WSID: 2, SeqID: 2, Last: 9, Next: 500},
		{WSID: 3, SeqID: 1, Last: 0, Next: 1},
		{WSID: 3, SeqID: 2, Last: 0, Next: 500},
		{WSID: 3, SeqID: 9, Last: 10, Next: 11},
	}

	a, err := s.ActualizeOnce(context.Background(), initial, false)
	require.NoError(t, err)
	assert.Equal(t, &Actualized{Partition: part, StoredNext: 10, Next: 15, Events: 5, Numbers: want}, a)
	off, err := s.ReadNextPLogOffset()
	require.NoError(t, err)
	assert.Equal(t, isequencer.PLogOffset(10), off, "nothing written without write")

	a, err = s.ActualizeOnce(context.Background(), initial, true)
	require.NoError(t, err)
	assert.Equal(t, want, a.Numbers)
	assert.True(t, a.Written)
	off, err = s.ReadNextPLogOffset()
	require.NoError(t, err)
	assert.Equal(t, isequencer.PLogOffset(15), off)
	for ws, w := range map[isequencer.WSID][]isequencer.Number{1: {5000, 7, 4}, 2: {0, 9, 0}, 3: {0, 0, 10}, 4: {77, 0, 0}} {
		nums, err := s.ReadNumbers(ws, []isequencer.SeqID{1, 2, 9})
		require.NoError(t, err)
		assert.Equal(t, w, nums, "workspace %d", ws)
	}

	a, err = s.ActualizeOnce(context.Background(), initial, true)
	require.NoError(t, err)
	assert.Equal(t, &Actualized{Partition: part, StoredNext: 15, Next: 15, Written: true}, a, "nothing after the stored offset")
}

// TestActualizeOnceReadsWhileReplaying: a workspace's stored numbers are
// read while the replay goes on, not after it. The reader holds its last
// event until the store has served a workspace's read.
func TestActualizeOnceReadsWhileReplaying(t *testing.T) {
	read := make(chan struct{})
	var once sync.Once
	st := &wsReadStore{Storage: mem.New(mem.Options{}), onRead: func(context.Context, isequencer.WSID) error {
		once.Do(func() { close(read) })
		return nil
	}}
	defer st.Close()
	events := []*plog.Event{ev(1, 1, sn(1, 1)), ev(2, 2, sn(1, 2)), ev(3, 1, sn(1, 3))}
	s := newStorage(t, Options{Storage: st, Reader: eventsFrom(events, func(ctx context.Context, i int) error {
		if i < len(events)-1 {
			return nil
		}
		select {
		case <-read:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(30 * time.Second):
			return errors.New("the replay reached its last event and no workspace's stored numbers were read")
		}
	})})
	a, err := s.ActualizeOnce(context.Background(), map[isequencer.SeqID]isequencer.Number{1: 1}, false)
	require.NoError(t, err)
	assert.Equal(t, []ActualizedNumber{{WSID: 1, SeqID: 1, Last: 3, Next: 4}, {WSID: 2, SeqID: 1, Last: 2, Next: 3}}, a.Numbers)
}

// TestActualizeOnceReadFailureEndsReplay: a failed stored read ends the
// replay and is what ActualizeOnce returns. The reader waits after the
// first event until its context ends.
func TestActualizeOnceReadFailureEndsReplay(t *testing.T) {
	boom := errors.New("workspace 2 unreadable")
	st := &wsReadStore{Storage: mem.New(mem.Options{}), onRead: func(_ context.Context, ws isequencer.WSID) error {
		if ws == 2 {
			return boom
		}
		return nil
	}}
	defer st.Close()
	events := []*plog.Event{ev(1, 2, sn(1, 1)), ev(2, 1, sn(1, 2))}
	s := newStorage(t, Options{Storage: st, Reader: eventsFrom(events, func(ctx context.Context, i int) error {
		if i == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(30 * time.Second):
			return errors.New("the replay went on 30 s after a stored read failed")
		}
	})})
	_, err := s.ActualizeOnce(context.Background(), nil, true)
	require.ErrorIs(t, err, boom)
	assert.Contains(t, err.Error(), "seqstorage: app 7 partition 3")
	off, err := s.ReadNextPLogOffset()
	require.NoError(t, err)
	assert.Zero(t, off, "nothing written")
}

// TestActualizeOnceReplayFailureEndsReads: a failed replay is what
// ActualizeOnce returns, and it cancels the stored reads in flight. The
// reader fails once the store has begun a workspace's read, which waits
// for its context.
func TestActualizeOnceReplayFailureEndsReads(t *testing.T) {
	began := make(chan struct{})
	ended := make(chan error, 1)
	st := &wsReadStore{Storage: mem.New(mem.Options{}), onRead: func(ctx context.Context, _ isequencer.WSID) error {
		close(began)
		<-ctx.Done()
		ended <- ctx.Err()
		return ctx.Err()
	}}
	defer st.Close()
	events := []*plog.Event{ev(1, 1, sn(1, 1)), ev(2, 1, sn(1, 2))}
	s := newStorage(t, Options{Storage: st, Timeout: time.Minute, Reader: eventsFrom(events, func(_ context.Context, i int) error {
		if i == 0 {
			return nil
		}
		select {
		case <-began:
			return fmt.Errorf("%w: offset 2", plog.ErrCorrupt)
		case <-time.After(30 * time.Second):
			return errors.New("no stored read began during the replay")
		}
	})})
	_, err := s.ActualizeOnce(context.Background(), nil, false)
	require.ErrorIs(t, err, plog.ErrCorrupt)
	assert.Equal(t, context.Canceled, <-ended, "the read in flight was cancelled, not timed out")
}

// batchStore records the number of keys of each ReadPartitions, and holds
// the first until gate is closed.
type batchStore struct {
	storage.Storage
	gate  chan struct{}
	mu    sync.Mutex
	sizes []int
}

func (s *batchStore) ReadPartitions(ctx context.Context, pKeys [][]byte, from, to []byte, cb func(pKey, cCols, value []byte) error) error {
	s.mu.Lock()
	s.sizes = append(s.sizes, len(pKeys))
	first := len(s.sizes) == 1
	s.mu.Unlock()
	if first {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return s.Storage.ReadPartitions(ctx, pKeys, from, to, cb)
}

// TestActualizeOnceReadsWorkspacesInBatches: workspaces queued while the
// reads are busy are read storedReadBatch to a request, with every SeqID
// the events name; two queued reads of one workspace taken together are
// one read. One reader; its first request is held until the replay
// reaches its last event.
func TestActualizeOnceReadsWorkspacesInBatches(t *testing.T) {
	const workspaces = 1000
	st := &batchStore{Storage: mem.New(mem.Options{}), gate: make(chan struct{})}
	defer st.Close()
	var stored []isequencer.SeqValue
	var events []*plog.Event
	var want []ActualizedNumber
	for i := range workspaces {
		ws := isequencer.WSID(i + 1)
		stored = append(stored, isequencer.SeqValue{Key: key(ws, 2), Value: isequencer.Number(100 + i)})
		events = append(events, ev(isequencer.PLogOffset(len(events)+1), ws, sn(1, isequencer.Number(i+1))))
		want = append(want, ActualizedNumber{WSID: ws, SeqID: 1, Last: isequencer.Number(i + 1), Next: isequencer.Number(i + 2)},
			ActualizedNumber{WSID: ws, SeqID: 2, Last: isequencer.Number(100 + i), Next: isequencer.Number(101 + i)})
		if ws == 500 || ws == 501 {
			// A SeqID not in initial right after: a second queued read of
			// the workspace, next to its first (a batch's end parts at most
			// one of the two pairs).
			stored = append(stored, isequencer.SeqValue{Key: key(ws, 3), Value: 7000})
			events = append(events, ev(isequencer.PLogOffset(len(events)+1), ws, sn(3, 5)))
			want = append(want, ActualizedNumber{WSID: ws, SeqID: 3, Last: 7000, Next: 7001})
		}
	}
	// And one after workspace 1 was read: a read of its own.
	stored = append(stored, isequencer.SeqValue{Key: key(1, 3), Value: 6000})
	events = append(events, ev(isequencer.PLogOffset(len(events)+1), 1, sn(3, 5000)))
	want = slices.Insert(want, 2, ActualizedNumber{WSID: 1, SeqID: 3, Last: 6000, Next: 6001})
	require.NoError(t, newStorage(t, Options{Storage: st.Storage}).WriteValuesAndNextPLogOffset(stored, 1))
	s := newStorage(t, Options{Storage: st, WriteWorkers: 1, Reader: eventsFrom(events, func(_ context.Context, i int) error {
		if i == len(events)-1 {
			close(st.gate)
		}
		return nil
	})})
	a, err := s.ActualizeOnce(context.Background(), map[isequencer.SeqID]isequencer.Number{1: 1, 2: 1}, false)
	require.NoError(t, err)
	assert.Equal(t, want, a.Numbers)
	st.mu.Lock()
	defer st.mu.Unlock()
	total := 0
	for _, n := range st.sizes {
		assert.LessOrEqual(t, n, storedReadBatch)
		total += n
	}
	assert.Contains(t, []int{workspaces + 1, workspaces + 2}, total, "workspaces read: each, workspace 1 again, and at most one of 500 and 501 twice: %v", st.sizes)
	assert.Equal(t, storedReadBatch, slices.Max(st.sizes), "the queue read %d to a request", storedReadBatch)
	assert.LessOrEqual(t, len(st.sizes), 2+(workspaces-1)/storedReadBatch+1, "requests: %v", st.sizes)
}

// TestActualizeOnceCanceled: the caller's ctx ends the replay and the reads.
func TestActualizeOnceCanceled(t *testing.T) {
	st := mem.New(mem.Options{})
	defer st.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := []*plog.Event{ev(1, 1, sn(1, 1)), ev(2, 2, sn(1, 2))}
	s := newStorage(t, Options{Storage: st, Reader: eventsFrom(events, func(rctx context.Context, i int) error {
		if i == 1 {
			cancel()
			<-rctx.Done()
			return rctx.Err()
		}
		return nil
	})})
	_, err := s.ActualizeOnce(ctx, nil, true)
	require.ErrorIs(t, err, context.Canceled)
}
