package isequencer

import (
	"bytes"
	"io"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	kindApp  WSKind = 1
	kindUser WSKind = 2

	seqWLog   SeqID = 1
	seqRecord SeqID = 2
	seqCDoc   SeqID = 3
)

func testSeqTypes() map[WSKind]map[SeqID]Number {
	return map[WSKind]map[SeqID]Number{
		kindApp:  {seqWLog: 1, seqRecord: 200_000, seqCDoc: 322_680_000},
		kindUser: {seqWLog: 1},
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newTestSequencer(t *testing.T, st ISeqStorage, tune func(p *Params)) (*Sequencer, func()) {
	t.Helper()
	p := &Params{SeqTypes: testSeqTypes(), SeqStorage: st, RetryDelay: time.Millisecond, MaxRetryDelay: 5 * time.Millisecond, Logger: quietLogger()}
	if tune != nil {
		tune(p)
	}
	s, cleanup, err := New(p)
	require.NoError(t, err)
	t.Cleanup(cleanup)
	return s, cleanup
}

// waitStart polls Start until it returns ok (the observable end of
// actualization or of backpressure) and returns the offset.
func waitStart(t testing.TB, s ISequencer, kind WSKind, ws WSID) PLogOffset {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if off, ok := s.Start(kind, ws); ok {
			return off
		}
		if time.Now().After(deadline) {
			t.Fatalf("Start(%d, %d) still busy after 10 s", kind, ws)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// waitFor polls cond until it holds.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

func TestNewValidatesParams(t *testing.T) {
	_, _, err := New(nil)
	require.ErrorIs(t, err, ErrInvalidParams)

	_, _, err = New(&Params{
		SeqTypes:              map[WSKind]map[SeqID]Number{1: {1: 0, 2: 5}, 2: {}},
		MaxNumUnflushedValues: -1,
		LRUCacheSize:          -2,
		BatcherDelay:          -time.Second,
		RetryDelay:            time.Second,
		MaxRetryDelay:         time.Millisecond,
	})
	require.ErrorIs(t, err, ErrInvalidParams)
	for _, want := range []string{
		"SeqStorage is nil",
		"WSKind 1 SeqID 1: initial value 0",
		"WSKind 2 has no sequences",
		"MaxNumUnflushedValues -1",
		"LRUCacheSize -2",
		"BatcherDelay -1s",
		"MaxRetryDelay 1ms, must be >= RetryDelay 1s",
	} {
		assert.Contains(t, err.Error(), want)
	}

	p := Params{SeqTypes: testSeqTypes(), SeqStorage: newMockStorage()}
	p.EnsureDefaults()
	require.NoError(t, p.Validate())
	assert.Equal(t, 10_000, p.MaxNumUnflushedValues)
	assert.Equal(t, 100_000, p.LRUCacheSize)
	assert.Equal(t, 10*time.Millisecond, p.RetryDelay)
	assert.Equal(t, 250*time.Millisecond, p.MaxRetryDelay)

	p.MaxNumUnflushedValues = MaxMaxNumUnflushedValues + 1
	err = p.Validate()
	require.ErrorIs(t, err, ErrInvalidParams)
	assert.Contains(t, err.Error(), "MaxNumUnflushedValues 1048577, must be <= 1048576")
	p.MaxNumUnflushedValues = MaxMaxNumUnflushedValues
	require.NoError(t, p.Validate())

	p = Params{SeqTypes: testSeqTypes(), SeqStorage: newMockStorage(), RetryDelay: time.Second}
	p.EnsureDefaults()
	assert.Equal(t, time.Second, p.MaxRetryDelay, "the default cap is raised to a longer RetryDelay")
}

func TestJitter(t *testing.T) {
	for _, d := range []time.Duration{0, 1, 2, 3, 10 * time.Millisecond, 250 * time.Millisecond} {
		seen := map[time.Duration]bool{}
		for range 1000 {
			w := jitter(d)
			require.GreaterOrEqual(t, w, d-d/2, "d %v", d)
			require.LessOrEqual(t, w, d, "d %v", d)
			seen[w] = true
		}
		if d >= 10*time.Millisecond {
			assert.Greater(t, len(seen), 100, "d %v: waits spread over [d/2, d]", d)
		}
	}
}

func TestNewMustStartActualization(t *testing.T) {
	st := newMockStorage()
	st.block = make(chan struct{})
	st.actualizeStarted = make(chan struct{}, 1)
	s, _ := newTestSequencer(t, st, nil)
	<-st.actualizeStarted
	for range 10 {
		off, ok := s.Start(kindApp, 1)
		require.False(t, ok)
		require.Zero(t, off)
	}
	require.Panics(t, func() { s.Actualize() }, "Actualize during actualization")
	close(st.block)
	require.Equal(t, PLogOffset(1), waitStart(t, s, kindApp, 1), "first offset of a fresh partition")
	s.Flush()
}

func TestFirstNumbersAreInitialValues(t *testing.T) {
	st := newMockStorage()
	s, _ := newTestSequencer(t, st, nil)
	waitStart(t, s, kindApp, 7)
	for _, tc := range []struct {
		seq  SeqID
		wnum Number
	}{{seqWLog, 1}, {seqRecord, 200_000}, {seqCDoc, 322_680_000}, {seqRecord, 200_001}, {seqWLog, 2}} {
		n, err := s.Next(tc.seq)
		require.NoError(t, err)
		assert.Equal(t, tc.wnum, n, "SeqID %d", tc.seq)
	}
	s.Flush()
	assert.Equal(t, 1, st.reads, "one ReadNumbers per cache miss")
	assert.Equal(t, []SeqID{seqWLog, seqRecord, seqCDoc}, st.readIDs[0], "a miss reads all SeqIDs of the kind")

	off := waitStart(t, s, kindApp, 7)
	assert.Equal(t, PLogOffset(2), off)
	n, err := s.Next(seqRecord)
	require.NoError(t, err)
	assert.Equal(t, Number(200_002), n)
	s.Flush()
	assert.Equal(t, 1, st.reads, "a cached workspace is not read again")
}

func TestStoredNumberBelowInitialValueYieldsInitialValue(t *testing.T) {
	st := newMockStorage()
	st.numbers[NumberKey{WSID: 3, SeqID: seqRecord}] = 10
	st.numbers[NumberKey{WSID: 3, SeqID: seqWLog}] = 10
	s, _ := newTestSequencer(t, st, nil)
	waitStart(t, s, kindApp, 3)
	n, err := s.Next(seqRecord)
	require.NoError(t, err)
	assert.Equal(t, Number(200_000), n)
	n, err = s.Next(seqWLog)
	require.NoError(t, err)
	assert.Equal(t, Number(11), n)
	s.Flush()
}

func TestUnknownSeqID(t *testing.T) {
	s, _ := newTestSequencer(t, newMockStorage(), nil)
	waitStart(t, s, kindUser, 1)
	_, err := s.Next(seqRecord)
	require.ErrorIs(t, err, ErrUnknownSeqID)
	n, err := s.Next(seqWLog)
	require.NoError(t, err, "the transaction goes on after an error")
	assert.Equal(t, Number(1), n)
	s.Flush()

	waitStart(t, s, WSKind(99), 1)
	_, err = s.Next(seqWLog)
	require.ErrorIs(t, err, ErrUnknownSeqID)
	assert.Contains(t, err.Error(), "WSKind")
	s.Flush()
}

func TestNumberOverflow(t *testing.T) {
	st := newMockStorage()
	st.numbers[NumberKey{WSID: 1, SeqID: seqWLog}] = math.MaxUint64 - 1
	s, _ := newTestSequencer(t, st, nil)
	waitStart(t, s, kindUser, 1)
	n, err := s.Next(seqWLog)
	require.NoError(t, err)
	require.Equal(t, Number(math.MaxUint64), n)
	_, err = s.Next(seqWLog)
	require.ErrorIs(t, err, ErrNumberOverflow)
	_, err = s.Next(seqWLog)
	require.ErrorIs(t, err, ErrNumberOverflow, "never wraps")
	s.Flush()
}

func TestProtocolMisusePanics(t *testing.T) {
	s, _ := newTestSequencer(t, newMockStorage(), nil)
	require.Panics(t, func() { _, _ = s.Next(seqWLog) }, "Next without Start")
	require.Panics(t, func() { s.Flush() }, "Flush without Start")
	waitStart(t, s, kindApp, 1)
	require.Panics(t, func() { s.Start(kindApp, 2) }, "Start in a transaction")
	s.Flush()
	require.Panics(t, func() { s.Start(kindApp, 0) }, "WSID 0")
}

func TestReadNumbersErrorKeepsTransaction(t *testing.T) {
	st := newMockStorage()
	metrics := &countingMetrics{}
	s, _ := newTestSequencer(t, st, func(p *Params) { p.Metrics = metrics })
	waitStart(t, s, kindApp, 5)
	st.set(func(m *mockStorage) { m.failRead = errStorage })
	_, err := s.Next(seqWLog)
	require.ErrorIs(t, err, errStorage)
	assert.Contains(t, err.Error(), "WSID 5")
	st.set(func(m *mockStorage) { m.failRead = nil })
	n, err := s.Next(seqWLog)
	require.NoError(t, err)
	assert.Equal(t, Number(1), n)
	s.Flush()
	assert.Equal(t, 1, metrics.storageErrors("ReadNumbers"))
}

func TestFlushWritesValuesAndNextOffset(t *testing.T) {
	st := newMockStorage()
	s, _ := newTestSequencer(t, st, nil)
	for ws := WSID(1); ws <= 3; ws++ {
		off := waitStart(t, s, kindApp, ws)
		n, err := s.Next(seqRecord)
		require.NoError(t, err)
		require.True(t, st.writeEvent(off, []SeqValue{{Key: NumberKey{WSID: ws, SeqID: seqRecord}, Value: n}}))
		s.Flush()
	}
	waitFor(t, "flush", func() bool { _, off := st.stored(); return off == 4 })
	nums, _ := st.stored()
	for ws := WSID(1); ws <= 3; ws++ {
		assert.Equal(t, Number(200_000), nums[NumberKey{WSID: ws, SeqID: seqRecord}])
	}
}

func TestBusyWhileTooManyUnflushed(t *testing.T) {
	st := newMockStorage()
	metrics := &countingMetrics{}
	s, _ := newTestSequencer(t, st, func(p *Params) { p.MaxNumUnflushedValues = 5; p.Metrics = metrics })
	waitStart(t, s, kindApp, 1)
	s.Flush()
	st.set(func(m *mockStorage) { m.failWrite = errStorage })
	busy := false
	for ws := WSID(1); ws < 100 && !busy; ws++ {
		if _, ok := s.Start(kindApp, ws); !ok {
			busy = true
			break
		}
		_, err := s.Next(seqRecord)
		require.NoError(t, err)
		s.Flush()
	}
	require.True(t, busy, "Start must report busy once unflushed values exceed the limit")
	assert.Positive(t, metrics.busy(BusyUnflushed))
	waitFor(t, "a failed write", func() bool { return metrics.storageErrors("WriteValuesAndNextPLogOffset") > 0 })
	st.set(func(m *mockStorage) { m.failWrite = nil })
	waitStart(t, s, kindApp, 1)
	s.Flush()
}

// TestEvictedWorkspaceKeepsUnflushedValues: a workspace evicted from the
// LRU while its values wait to be flushed continues from those values, not
// from the stale stored ones.
func TestEvictedWorkspaceKeepsUnflushedValues(t *testing.T) {
	st := newMockStorage()
	s, _ := newTestSequencer(t, st, func(p *Params) { p.LRUCacheSize = 3 }) // one workspace
	waitStart(t, s, kindApp, 1)
	s.Flush()
	st.set(func(m *mockStorage) { m.failWrite = errStorage })
	var last Number
	for i := range 20 {
		ws := WSID(1 + i%2)
		waitStart(t, s, kindApp, ws)
		n, err := s.Next(seqRecord)
		require.NoError(t, err)
		if ws == 1 {
			require.Greater(t, n, last)
			last = n
		}
		s.Flush()
	}
	assert.Equal(t, Number(200_009), last)
	assert.GreaterOrEqual(t, st.reads, 20, "every switch is a miss with a one-workspace cache")
}

func TestRestartContinuesFromFlushedAndReplayed(t *testing.T) {
	st := newMockStorage()
	s, cleanup := newTestSequencer(t, st, nil)
	issue := func(s ISequencer, ws WSID) (PLogOffset, Number) {
		off := waitStart(t, s, kindApp, ws)
		n, err := s.Next(seqRecord)
		require.NoError(t, err)
		require.True(t, st.writeEvent(off, []SeqValue{{Key: NumberKey{WSID: ws, SeqID: seqRecord}, Value: n}}))
		s.Flush()
		return off, n
	}
	for range 5 {
		issue(s, 1)
	}
	waitFor(t, "flush", func() bool { _, off := st.stored(); return off == 6 })
	// These are in the PLog only: writes fail until the restart.
	st.set(func(m *mockStorage) { m.failWrite = errStorage })
	issue(s, 1)
	issue(s, 1)
	_, lastBefore := issue(s, 1)
	cleanup()
	st.set(func(m *mockStorage) { m.failWrite = nil; m.eventsReplayed = 0 })

	s2, _ := newTestSequencer(t, st, nil)
	off, n := issue(s2, 1)
	assert.Equal(t, PLogOffset(9), off)
	assert.Greater(t, n, lastBefore)
	assert.Equal(t, 3, st.eventsReplayed, "only the tail after the stored offset is replayed")
}

func TestReplayMergesByMaximum(t *testing.T) {
	st := newMockStorage()
	k := NumberKey{WSID: 4, SeqID: seqRecord}
	st.writeEvent(1, []SeqValue{{Key: k, Value: 200_050}, {Key: k, Value: 200_051}})
	st.writeEvent(2, []SeqValue{{Key: k, Value: 200_010}}) // a smaller number later must not lower it
	st.writeEvent(3, nil)
	s, _ := newTestSequencer(t, st, nil)
	off := waitStart(t, s, kindApp, 4)
	assert.Equal(t, PLogOffset(4), off)
	n, err := s.Next(seqRecord)
	require.NoError(t, err)
	assert.Equal(t, Number(200_052), n)
	s.Flush()
	waitFor(t, "flush of replayed values", func() bool { nums, off := st.stored(); return off == 5 && nums[k] == 200_052 })
}

func TestActualizeCancelsTransaction(t *testing.T) {
	st := newMockStorage()
	s, _ := newTestSequencer(t, st, nil)
	off := waitStart(t, s, kindApp, 1)
	n1, err := s.Next(seqRecord)
	require.NoError(t, err)
	s.Actualize() // the event was not written
	off2 := waitStart(t, s, kindApp, 1)
	assert.Equal(t, off, off2, "the offset of an unwritten event is reused")
	n2, err := s.Next(seqRecord)
	require.NoError(t, err)
	assert.Equal(t, n1, n2, "a number of an unwritten event may be issued again")
	s.Flush()
}

// TestLongRecovery is the spec's LongRecovery: a long PLog tail with a
// small unflushed limit.
func TestLongRecovery(t *testing.T) {
	st := newMockStorage()
	const events = 20_000
	for i := 1; i <= events; i++ {
		ws := WSID(1 + i%100)
		st.writeEvent(PLogOffset(i), []SeqValue{{Key: NumberKey{WSID: ws, SeqID: seqRecord}, Value: Number(200_000 + i)}})
	}
	s, _ := newTestSequencer(t, st, func(p *Params) { p.MaxNumUnflushedValues = 5 })
	for ws := WSID(1); ws <= 100; ws++ {
		off := waitStart(t, s, kindApp, ws)
		require.Equal(t, PLogOffset(events+int(ws)), off)
		n, err := s.Next(seqRecord)
		require.NoError(t, err)
		// The largest i with 1+i%100 == ws.
		wlast := events - (events-int(ws)+1)%100
		require.Equal(t, Number(200_000+wlast+1), n, "ws %d", ws)
		s.Flush()
	}
}

// TestMultipleActualizes is the spec's MultipleActualizes.
func TestMultipleActualizes(t *testing.T) {
	st := newMockStorage()
	s, _ := newTestSequencer(t, st, nil)
	var lastDurable Number
	for i := range 100 {
		off := waitStart(t, s, kindApp, 1)
		n, err := s.Next(seqRecord)
		require.NoError(t, err)
		require.Greater(t, n, lastDurable)
		if i%3 == 0 {
			s.Actualize()
			continue
		}
		require.True(t, st.writeEvent(off, []SeqValue{{Key: NumberKey{WSID: 1, SeqID: seqRecord}, Value: n}}))
		lastDurable = n
		s.Flush()
	}
}

// TestFlushPermanentlyFails is the spec's FlushPermanentlyFails: recovery
// works, then every write fails. Start turns busy, errors are logged and
// counted, and cleanup returns promptly.
func TestFlushPermanentlyFails(t *testing.T) {
	st := newMockStorage()
	metrics := &countingMetrics{}
	var logs syncBuffer
	s, cleanup := newTestSequencer(t, st, func(p *Params) {
		p.MaxNumUnflushedValues = 10
		p.Metrics = metrics
		p.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	waitStart(t, s, kindApp, 1)
	s.Flush()
	st.set(func(m *mockStorage) { m.failWrite = errStorage })
	busy := false
	for ws := WSID(1); ws < 1000; ws++ {
		if _, ok := s.Start(kindApp, ws); !ok {
			busy = true
			break
		}
		for _, id := range []SeqID{seqWLog, seqRecord} {
			_, err := s.Next(id)
			require.NoError(t, err)
		}
		s.Flush()
	}
	require.True(t, busy)
	waitFor(t, "a logged write failure", func() bool { return strings.Contains(logs.String(), "WriteValuesAndNextPLogOffset") })
	began := time.Now()
	cleanup()
	assert.Less(t, time.Since(began), time.Second, "cleanup while storage keeps failing")
	assert.Positive(t, metrics.storageErrors("WriteValuesAndNextPLogOffset"))
	_, ok := s.Start(kindApp, 1)
	assert.False(t, ok, "Start after cleanup")
}

func TestCleanupWhileActualizationFails(t *testing.T) {
	st := newMockStorage()
	st.failReadOffset = errStorage
	_, cleanup := newTestSequencer(t, st, nil)
	time.Sleep(20 * time.Millisecond) // let it retry a few times
	began := time.Now()
	cleanup()
	cleanup()
	assert.Less(t, time.Since(began), time.Second)
}

func TestActualizationRetriesFailedReplay(t *testing.T) {
	st := newMockStorage()
	st.writeEvent(1, []SeqValue{{Key: NumberKey{WSID: 1, SeqID: seqWLog}, Value: 41}})
	st.failActualize = errStorage
	metrics := &countingMetrics{}
	s, _ := newTestSequencer(t, st, func(p *Params) { p.Metrics = metrics })
	waitFor(t, "a failed replay", func() bool { return metrics.storageErrors("ActualizeSequencesFromPLog") > 0 })
	st.set(func(m *mockStorage) { m.failActualize = nil })
	waitStart(t, s, kindUser, 1)
	n, err := s.Next(seqWLog)
	require.NoError(t, err)
	assert.Equal(t, Number(42), n)
	s.Flush()
	assert.Equal(t, 1, metrics.actualized())
}

// countingMetrics is a Metrics that counts.
type countingMetrics struct {
	mu      sync.Mutex
	tx      int
	busyBy  map[BusyReason]int
	errsBy  map[string]int
	actuals int
	flushes int
}

func (c *countingMetrics) Transaction() { c.mu.Lock(); c.tx++; c.mu.Unlock() }
func (c *countingMetrics) Busy(r BusyReason) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.busyBy == nil {
		c.busyBy = map[BusyReason]int{}
	}
	c.busyBy[r]++
}
func (c *countingMetrics) Unflushed(int) {}
func (c *countingMetrics) Flushed(int, time.Duration) {
	c.mu.Lock()
	c.flushes++
	c.mu.Unlock()
}
func (c *countingMetrics) Actualized(int, time.Duration) {
	c.mu.Lock()
	c.actuals++
	c.mu.Unlock()
}
func (c *countingMetrics) StorageError(op string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.errsBy == nil {
		c.errsBy = map[string]int{}
	}
	c.errsBy[op]++
}
func (c *countingMetrics) storageErrors(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.errsBy[op]
}
func (c *countingMetrics) busy(r BusyReason) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.busyBy[r]
}
func (c *countingMetrics) actualized() int { c.mu.Lock(); defer c.mu.Unlock(); return c.actuals }

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}
func (b *syncBuffer) String() string { b.mu.Lock(); defer b.mu.Unlock(); return b.b.String() }
