package apppart

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/boltdb"
	"github.com/cqlseq/cqlseq/storage/mem"
	"github.com/cqlseq/cqlseq/vvmadapter"
)

const (
	testApp  isequencer.ClusterAppID = 1
	testPart isequencer.PartitionID  = 2

	seqWLogOff isequencer.SeqID = 1
	seqRecID   isequencer.SeqID = 2

	firstRecordID isequencer.Number = 322685000131072
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func openOptions(st storage.Storage, mode plog.Mode) OpenOptions {
	return OpenOptions{
		Storage: st, App: testApp, Partition: testPart, Mode: mode,
		SeqTypes:      map[isequencer.WSKind]map[isequencer.SeqID]isequencer.Number{kind: {seqWLogOff: 1, seqRecID: firstRecordID}},
		RecordSeqs:    []isequencer.SeqID{seqRecID},
		WLogOffsetSeq: seqWLogOff,
		Sequencer:     isequencer.Params{RetryDelay: time.Millisecond, MaxRetryDelay: 20 * time.Millisecond, MaxNumUnflushedValues: 10_000},
		Logger:        quiet(),
	}
}

func open(t testing.TB, o OpenOptions) *Partition {
	t.Helper()
	p, err := Open(context.Background(), o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func cmdFor(ws isequencer.WSID) Command {
	return Command{WSKind: kind, WSID: ws, Seqs: []isequencer.SeqID{seqWLogOff, seqRecID}, Payload: []byte("cmd")}
}

// drivers runs f on each embedded driver.
func drivers(t *testing.T, f func(t *testing.T, st storage.Storage)) {
	t.Run("mem", func(t *testing.T) {
		st := mem.New(mem.Options{})
		t.Cleanup(func() { _ = st.Close() })
		f(t, st)
	})
	t.Run("bbolt", func(t *testing.T) {
		st, err := boltdb.Open(filepath.Join(t.TempDir(), "part.db"), boltdb.Options{NoSync: true})
		require.NoError(t, err)
		t.Cleanup(func() { _ = st.Close() })
		f(t, st)
	})
}

func storedOffset(t testing.TB, st storage.Storage) isequencer.PLogOffset {
	t.Helper()
	off, _, err := vvmadapter.New(st, testApp).GetPLogOffset(context.Background(), testPart)
	require.NoError(t, err)
	return off
}

// maxes tracks the largest number handed out per (WSID, SeqID).
type maxes map[isequencer.NumberKey]isequencer.Number

func (m maxes) add(cmd Command, r Result) {
	for i, id := range cmd.Seqs {
		k := isequencer.NumberKey{WSID: cmd.WSID, SeqID: id}
		m[k] = max(m[k], r.Numbers[i])
	}
}

// requireAbove fails unless every number of r is above every number
// handed out before for its (WSID, SeqID).
func (m maxes) requireAbove(t testing.TB, cmd Command, r Result) {
	t.Helper()
	for i, id := range cmd.Seqs {
		k := isequencer.NumberKey{WSID: cmd.WSID, SeqID: id}
		require.Greater(t, r.Numbers[i], m[k], "WSID %d SeqID %d", cmd.WSID, id)
	}
}

// TestRestartReplaysOnlyTail: 100,000 events across 1,000 workspaces;
// after a restart the replay reads exactly the events from the stored next
// offset on, and every number is above every number handed out before. A
// second restart after the stored offset was set back (a lost offset
// write) replays exactly the longer tail. (-short, or bbolt under -race:
// 20,000 events.)
func TestRestartReplaysOnlyTail(t *testing.T) {
	const workspaces = 1000
	drivers(t, func(t *testing.T, st storage.Storage) {
		n := 100_000
		if _, bolt := st.(*boltdb.Store); testing.Short() || (bolt && raceEnabled) {
			n = 20_000
		}
		o := openOptions(st, plog.ModeTrust0)
		o.Sequencer.BatcherDelay = time.Millisecond // leave a tail at Close
		before := maxes{}
		p := open(t, o)
		for i := range n {
			cmd := cmdFor(isequencer.WSID(1 + i%workspaces))
			r, err := do(t, p, cmd)
			require.NoError(t, err)
			require.Equal(t, isequencer.PLogOffset(i+1), r.Offset)
			before.add(cmd, r)
		}
		require.NoError(t, p.Close())
		stored := storedOffset(t, st)
		require.LessOrEqual(t, stored, isequencer.PLogOffset(n+1))
		t.Logf("%d events written, stored next offset %d: tail %d", n, stored, n-int(stored)+1)

		p2 := open(t, o)
		for ws := isequencer.WSID(1); ws <= workspaces; ws++ {
			cmd := cmdFor(ws)
			r, err := do(t, p2, cmd)
			require.NoError(t, err)
			if ws == 1 {
				assert.Equal(t, uint64(n)-uint64(stored)+1, p2.SeqStorage().EventsRead(), "the replay reads only the tail")
				assert.Equal(t, isequencer.PLogOffset(n+1), r.Offset)
			}
			before.requireAbove(t, cmd, r)
			before.add(cmd, r)
		}
		require.NoError(t, p2.Close())

		total := n + workspaces
		rewound := isequencer.PLogOffset(n/2 + 1)
		require.NoError(t, vvmadapter.New(st, testApp).PutPLogOffset(context.Background(), testPart, rewound))
		p3 := open(t, o)
		cmd := cmdFor(7)
		r, err := do(t, p3, cmd)
		require.NoError(t, err)
		assert.Equal(t, uint64(total)-uint64(rewound)+1, p3.SeqStorage().EventsRead(), "the replay reads from the stored offset")
		assert.Equal(t, isequencer.PLogOffset(total+1), r.Offset)
		before.requireAbove(t, cmd, r)
	})
}

// faultyLog fails chosen event writes of the wrapped storage: every
// failBefore-th one is not written and reports ErrUnavailable; every
// failAfter-th one is written and then reports ErrUnknownOutcome.
type faultyLog struct {
	storage.Storage
	failBefore, failAfter int64
	writes                atomic.Int64
	before, after         atomic.Int64
}

func isEventRow(pKey []byte) bool {
	return len(pKey) == 12 && pKey[0] == byte(plog.PLogView>>8) && pKey[1] == byte(plog.PLogView)
}

func (s *faultyLog) fault(apply func() error) error {
	n := s.writes.Add(1)
	switch {
	case s.failBefore > 0 && n%s.failBefore == 0:
		s.before.Add(1)
		return fmt.Errorf("faulty: event write %d refused: %w", n, storage.ErrUnavailable)
	case s.failAfter > 0 && n%s.failAfter == 0:
		if err := apply(); err != nil {
			return err
		}
		s.after.Add(1)
		return fmt.Errorf("faulty: event write %d applied, reported lost: %w", n, storage.ErrUnknownOutcome)
	}
	return apply()
}

func (s *faultyLog) InsertIfNotExists(ctx context.Context, pKey, cCols, value []byte, ttl time.Duration) (bool, error) {
	if !isEventRow(pKey) {
		return s.Storage.InsertIfNotExists(ctx, pKey, cCols, value, ttl)
	}
	var ok bool
	err := s.fault(func() (err error) {
		ok, err = s.Storage.InsertIfNotExists(ctx, pKey, cCols, value, ttl)
		return err
	})
	return ok, err
}

func (s *faultyLog) PutBatch(ctx context.Context, rows []storage.Row) error {
	if len(rows) == 0 || !isEventRow(rows[0].PKey) {
		return s.Storage.PutBatch(ctx, rows)
	}
	return s.fault(func() error { return s.Storage.PutBatch(ctx, rows) })
}

// TestFailedWritesReuseNoNumber: event writes fail mid-stream, some before
// and some after being applied; the partition actualizes and goes on, and
// no number is ever handed out twice, neither to callers nor in the PLog.
func TestFailedWritesReuseNoNumber(t *testing.T) {
	for _, mode := range []plog.Mode{plog.ModeTrust0, plog.ModeTrust2} {
		t.Run(mode.String(), func(t *testing.T) {
			inner := mem.New(mem.Options{})
			defer inner.Close()
			st := &faultyLog{Storage: inner, failBefore: 37, failAfter: 53}
			p := open(t, openOptions(st, mode))
			handed := maxes{}
			results := map[isequencer.PLogOffset]Result{}
			failed := 0
			for i := range 3000 {
				cmd := cmdFor(isequencer.WSID(1 + i%20))
				r, err := do(t, p, cmd)
				if err != nil {
					require.ErrorIs(t, err, ErrWrite)
					failed++
					continue
				}
				handed.requireAbove(t, cmd, r)
				handed.add(cmd, r)
				require.NotContains(t, results, r.Offset, "offset handed out twice")
				results[r.Offset] = r
			}
			require.NoError(t, p.Close())
			require.Positive(t, st.before.Load())
			require.Positive(t, st.after.Load())
			assert.Equal(t, int(st.before.Load()+st.after.Load()), failed)

			// The PLog: contiguous offsets, and per (WSID, SeqID) numbers
			// strictly increasing with the offset, including the events
			// whose write was reported lost.
			r, err := plog.NewReader(inner, plog.ReaderOptions{})
			require.NoError(t, err)
			last := maxes{}
			var next isequencer.PLogOffset = 1
			require.NoError(t, r.ReadEvents(context.Background(), testPart, 1, func(e *plog.Event) error {
				require.Equal(t, next, e.Offset)
				next++
				for _, n := range e.Numbers {
					k := isequencer.NumberKey{WSID: e.WSID, SeqID: n.SeqID}
					require.Greater(t, n.Number, last[k], "offset %d: WSID %d SeqID %d reused", e.Offset, e.WSID, n.SeqID)
					last[k] = n.Number
				}
				if res, ok := results[e.Offset]; ok {
					assert.Equal(t, res.Numbers[0], isequencer.Number(e.WLogOffset))
					assert.Equal(t, []plog.RecordID{plog.RecordID(res.Numbers[1])}, e.Records)
				}
				return nil
			}))
			assert.Equal(t, isequencer.PLogOffset(len(results)+int(st.after.Load())+1), next,
				"the PLog holds the successful events and those reported lost")
		})
	}
}

// TestTrustLevelConflicts: a planted event row at the next offset, or a
// planted record row at the next record ID. Trust levels 0 and 1 refuse to
// overwrite the event (ErrConflict) and stop the partition; level 0 also
// refuses the record; levels 1 and 2 overwrite the record; level 2 also
// overwrites the event (its documented price).
func TestTrustLevelConflicts(t *testing.T) {
	planted := []byte{1}
	for _, tc := range []struct {
		mode      plog.Mode
		plantRec  bool
		wconflict bool
	}{
		{plog.ModeTrust0, false, true},
		{plog.ModeTrust0, true, true},
		{plog.ModeTrust1, false, true},
		{plog.ModeTrust1, true, false},
		{plog.ModeTrust2, false, false},
		{plog.ModeTrust2, true, false},
	} {
		what := "event"
		if tc.plantRec {
			what = "record"
		}
		t.Run(tc.mode.String()+"/"+what, func(t *testing.T) {
			st := mem.New(mem.Options{})
			defer st.Close()
			ctx := context.Background()
			p := open(t, openOptions(st, tc.mode))
			var r Result
			var err error
			for range 5 {
				r, err = do(t, p, cmdFor(1))
				require.NoError(t, err)
			}
			nextOff, nextRec := r.Offset+1, plog.RecordID(r.Numbers[1]+1)
			evKey, evCC := plog.EventPKey(testPart, nextOff), plog.EventCCols(nextOff)
			recKey, recCC := plog.RecordPKey(1, nextRec), plog.RecordCCols(nextRec)
			if tc.plantRec {
				require.NoError(t, st.Put(ctx, recKey, recCC, planted))
			} else {
				require.NoError(t, st.Put(ctx, evKey, evCC, planted))
			}

			r, err = do(t, p, cmdFor(1))
			ev, evOK, gerr := st.Get(ctx, evKey, evCC)
			require.NoError(t, gerr)
			rec, recOK, gerr := st.Get(ctx, recKey, recCC)
			require.NoError(t, gerr)
			if tc.wconflict {
				require.ErrorIs(t, err, ErrWrite)
				require.ErrorIs(t, err, plog.ErrConflict)
				require.ErrorIs(t, err, ErrStopped)
				if tc.plantRec {
					assert.Equal(t, planted, rec, "the planted record is not overwritten")
					assert.True(t, evOK, "the event was written before its records")
				} else {
					assert.Equal(t, planted, ev, "the planted event is not overwritten")
					assert.False(t, recOK, "no record of the refused event")
				}
				_, err = p.Do(ctx, cmdFor(2))
				require.ErrorIs(t, err, ErrStopped, "the partition stays stopped")
				require.ErrorIs(t, err, plog.ErrConflict)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, nextOff, r.Offset)
			assert.Equal(t, isequencer.Number(nextRec), r.Numbers[1])
			var e plog.Event
			require.True(t, evOK)
			require.NoError(t, plog.Decode(testPart, nextOff, ev, &e), "the event at the offset is the command's")
			assert.Equal(t, []plog.RecordID{nextRec}, e.Records)
			require.True(t, recOK)
			assert.Equal(t, plog.RecordValue(nextOff), rec, "the planted record is overwritten")
		})
	}
}

// logCapture is a slog.Handler that keeps every record's text.
type logCapture struct {
	mu   sync.Mutex
	recs []string
	sig  chan struct{}
}

func newLogCapture() *logCapture { return &logCapture{sig: make(chan struct{}, 1)} }

func (h *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (h *logCapture) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logCapture) WithGroup(string) slog.Handler            { return h }

func (h *logCapture) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
	h.mu.Lock()
	h.recs = append(h.recs, b.String())
	h.mu.Unlock()
	select {
	case h.sig <- struct{}{}:
	default:
	}
	return nil
}

// waitFor waits until n records contain all of subs and returns the last.
func (h *logCapture) waitFor(t *testing.T, n int, subs ...string) string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		h.mu.Lock()
		var hits []string
		for _, r := range h.recs {
			all := true
			for _, s := range subs {
				all = all && strings.Contains(r, s)
			}
			if all {
				hits = append(hits, r)
			}
		}
		h.mu.Unlock()
		if len(hits) >= n {
			return hits[n-1]
		}
		select {
		case <-h.sig:
		case <-timeout:
			t.Fatalf("no %d log records with %q", n, subs)
		}
	}
}

// TestCorruptTailKeepsRetrying: corrupt event bytes in the replayed tail
// keep the partition busy, with an error naming partition and offset
// logged on every retry; once the bytes are repaired it goes on and
// nothing is lost.
func TestCorruptTailKeepsRetrying(t *testing.T) {
	drivers(t, func(t *testing.T, st storage.Storage) {
		ctx := context.Background()
		o := openOptions(st, plog.ModeTrust0)
		p := open(t, o)
		before := maxes{}
		const n = 3000
		for i := range n {
			cmd := cmdFor(isequencer.WSID(1 + i%10))
			r, err := do(t, p, cmd)
			require.NoError(t, err)
			before.add(cmd, r)
		}
		require.NoError(t, p.Close())
		// The offset write of the last 2,000 events was lost, and the
		// event at 2,500 rotted.
		require.NoError(t, vvmadapter.New(st, testApp).PutPLogOffset(ctx, testPart, 1001))
		const bad = 2500
		key, cc := plog.EventPKey(testPart, bad), plog.EventCCols(bad)
		good, ok, err := st.Get(ctx, key, cc)
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, st.Put(ctx, key, cc, []byte{plog.FormatV1, 0xFF}))

		logs := newLogCapture()
		o.Logger = slog.New(logs)
		p2 := open(t, o)
		msg := logs.waitFor(t, 1, "ActualizeSequencesFromPLog", "partition 2 offset 2500", plog.ErrCorrupt.Error())
		t.Log(msg)
		logs.waitFor(t, 2, "ActualizeSequencesFromPLog", "partition 2 offset 2500")
		_, err = p2.Do(ctx, cmdFor(1))
		require.ErrorIs(t, err, ErrBusy, "still actualizing")

		require.NoError(t, st.Put(ctx, key, cc, good))
		cmd := cmdFor(1)
		r, err := do(t, p2, cmd)
		require.NoError(t, err)
		assert.Equal(t, isequencer.PLogOffset(n+1), r.Offset, "no event lost")
		before.requireAbove(t, cmd, r)
		for ws := isequencer.WSID(2); ws <= 10; ws++ {
			cmd := cmdFor(ws)
			r, err := do(t, p2, cmd)
			require.NoError(t, err)
			before.requireAbove(t, cmd, r)
		}
	})
}

func TestOpenValidates(t *testing.T) {
	_, err := Open(context.Background(), OpenOptions{
		Mode:           9,
		Sequencer:      isequencer.Params{SeqStorage: newMemLog(), SeqTypes: map[isequencer.WSKind]map[isequencer.SeqID]isequencer.Number{}},
		StorageTimeout: -1,
	})
	require.ErrorIs(t, err, ErrInvalidOptions)
	for _, s := range []string{"Storage is nil", "unknown mode", "Sequencer.SeqStorage", "Sequencer.SeqTypes", "StorageTimeout"} {
		assert.Contains(t, err.Error(), s)
	}

	st := mem.New(mem.Options{})
	defer st.Close()
	_, err = Open(context.Background(), OpenOptions{Storage: st})
	require.ErrorIs(t, err, ErrInvalidOptions)
	assert.Contains(t, err.Error(), "SeqTypes is empty", "New's validation")

	require.NoError(t, st.Close())
	_, err = Open(context.Background(), openOptions(st, plog.ModeTrust0))
	require.ErrorIs(t, err, storage.ErrClosed, "Open reads the storage once")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = Open(ctx, openOptions(mem.New(mem.Options{}), plog.ModeTrust0))
	require.True(t, errors.Is(err, context.Canceled), "%v", err)
}

// TestOpenAppStorage: the PLog and records go to AppStorage, the
// sequencer's state to Storage.
func TestOpenAppStorage(t *testing.T) {
	vvm, appSt := mem.New(mem.Options{}), mem.New(mem.Options{})
	defer vvm.Close()
	defer appSt.Close()
	o := openOptions(vvm, plog.ModeTrust0)
	o.AppStorage = appSt
	p := open(t, o)
	r, err := do(t, p, cmdFor(3))
	require.NoError(t, err)
	require.NoError(t, p.Close())
	_, ok, _ := appSt.Get(context.Background(), plog.EventPKey(testPart, r.Offset), plog.EventCCols(r.Offset))
	assert.True(t, ok, "event in AppStorage")
	_, ok, _ = vvm.Get(context.Background(), plog.EventPKey(testPart, r.Offset), plog.EventCCols(r.Offset))
	assert.False(t, ok, "no event in Storage")
	assert.Equal(t, r.Offset+1, storedOffset(t, vvm), "the sequencer's state in Storage")
}
