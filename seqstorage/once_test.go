package seqstorage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
