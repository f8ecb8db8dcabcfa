package apppart

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage/mem"
)

// recMetrics records a partition's observations.
type recMetrics struct {
	mu sync.Mutex
	recorded
}

type recorded struct {
	epoch   uint64
	results map[CommandResult]int
	durable isequencer.PLogOffset
	stopped []StopReason
	slowest time.Duration
}

func (m *recMetrics) Opened(epoch uint64) { m.mu.Lock(); m.epoch = epoch; m.mu.Unlock() }
func (m *recMetrics) Command(r CommandResult, took time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.results == nil {
		m.results = map[CommandResult]int{}
	}
	m.results[r]++
	m.slowest = max(m.slowest, took)
}
func (m *recMetrics) Durable(next isequencer.PLogOffset) {
	m.mu.Lock()
	m.durable = next
	m.mu.Unlock()
}
func (m *recMetrics) Stopped(r StopReason) {
	m.mu.Lock()
	m.stopped = append(m.stopped, r)
	m.mu.Unlock()
}

func (m *recMetrics) snapshot() recorded {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := recorded{epoch: m.epoch, durable: m.durable, stopped: append([]StopReason(nil), m.stopped...), results: map[CommandResult]int{}}
	for k, v := range m.results {
		r.results[k] = v
	}
	return r
}

// TestMetricsReportEachResultAndTheStop: a partition's metrics see its
// epoch, every Do's result, the durable offset and, once, the stop with
// its reason.
func TestMetricsReportEachResultAndTheStop(t *testing.T) {
	st := mem.New(mem.Options{})
	defer st.Close()
	m := &recMetrics{}
	o := openOptions(st, plog.ModeTrust0)
	o.Metrics = m
	p := open(t, o)
	ctx := settleCtx(t)
	assert.NotZero(t, m.snapshot().epoch, "every mode takes an epoch")
	require.NoError(t, p.WaitReady(ctx))
	_, err := p.Do(ctx, Command{WSKind: kind})
	require.ErrorIs(t, err, ErrInvalidCommand)
	r1, err := p.Do(ctx, cmdFor(1))
	require.NoError(t, err)
	assert.Equal(t, r1.Offset+1, m.snapshot().durable)

	w, err := plog.NewWriter(plog.WriterOptions{Storage: st, Partition: testPart, Mode: plog.ModeTrust0})
	require.NoError(t, err)
	require.NoError(t, w.Write(ctx, &plog.Event{Partition: testPart, Offset: r1.Offset + 1, WSID: 77, WSKind: kind, Payload: []byte("other")}))
	_, err = p.Do(ctx, cmdFor(1))
	require.ErrorIs(t, err, ErrStopped)
	assert.Equal(t, []StopReason{StopConflict}, m.snapshot().stopped, "reported before any later Do")
	_, err = p.Do(ctx, cmdFor(1))
	require.ErrorIs(t, err, ErrStopped)
	require.NoError(t, p.Close())
	_, err = p.Do(ctx, cmdFor(1))
	require.ErrorIs(t, err, ErrClosed)

	got := m.snapshot()
	assert.Equal(t, []StopReason{StopConflict}, got.stopped, "reported once, with its reason")
	assert.Equal(t, map[CommandResult]int{
		ResultInvalid: 1, ResultStored: 1, ResultNotStored: 1, ResultStopped: 1, ResultClosed: 1,
	}, got.results)
}

func TestResultOf(t *testing.T) {
	cases := map[CommandResult]error{
		ResultStored:    nil,
		ResultNotStored: &EventError{Outcome: NotStored, Err: ErrWrite},
		ResultUnknown:   &EventError{Outcome: Unknown, Err: context.Canceled},
		ResultBusy:      ErrBusy,
		ResultInvalid:   fmt.Errorf("%w: WSID 0", ErrInvalidCommand),
		ResultStopped:   fmt.Errorf("%w: %w", ErrStopped, plog.ErrConflict),
		ResultNotLeader: ErrNotLeader,
		ResultClosed:    ErrClosed,
		ResultCanceled:  context.DeadlineExceeded,
		ResultError:     fmt.Errorf("apppart: WSID 1 SeqID 1: %w", isequencer.ErrReadNumbers),
	}
	require.Len(t, cases, int(NumCommandResults))
	for want, err := range cases {
		assert.Equal(t, want, ResultOf(err), "%v", err)
	}
	assert.Equal(t, "not_leader", ResultNotLeader.String())
	assert.Equal(t, "CommandResult(10)", NumCommandResults.String())
	assert.Equal(t, StopFenced, stopReason(fmt.Errorf("x: %w", plog.ErrFenced)))
	assert.Equal(t, StopConflict, stopReason(plog.ErrConflict))
}
