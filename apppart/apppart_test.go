package apppart

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cqlseq/cqlseq/isequencer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// memLog is an EventLog and the ISeqStorage that replays it: the minimum a
// partition needs, in memory.
type memLog struct {
	mu        sync.Mutex
	events    map[isequencer.PLogOffset]Event
	numbers   map[isequencer.NumberKey]isequencer.Number
	next      isequencer.PLogOffset
	failWrite error
}

func newMemLog() *memLog {
	return &memLog{events: map[isequencer.PLogOffset]Event{}, numbers: map[isequencer.NumberKey]isequencer.Number{}}
}

func (m *memLog) Append(_ context.Context, e *Event) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failWrite != nil {
		return m.failWrite
	}
	if _, ok := m.events[e.Offset]; ok {
		return errors.New("memLog: offset taken")
	}
	c := *e
	c.Numbers = slices.Clone(e.Numbers)
	m.events[e.Offset] = c
	return nil
}

func (m *memLog) ReadNumbers(ws isequencer.WSID, ids []isequencer.SeqID) ([]isequencer.Number, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]isequencer.Number, len(ids))
	for i, id := range ids {
		out[i] = m.numbers[isequencer.NumberKey{WSID: ws, SeqID: id}]
	}
	return out, nil
}

func (m *memLog) ReadNextPLogOffset() (isequencer.PLogOffset, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.next, nil
}

func (m *memLog) WriteValuesAndNextPLogOffset(b []isequencer.SeqValue, next isequencer.PLogOffset) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, v := range b {
		m.numbers[v.Key] = v.Value
	}
	m.next = next
	return nil
}

func (m *memLog) ActualizeSequencesFromPLog(ctx context.Context, from isequencer.PLogOffset, cb func([]isequencer.SeqValue, isequencer.PLogOffset) error) error {
	m.mu.Lock()
	var offs []isequencer.PLogOffset
	for o := range m.events {
		if o >= from {
			offs = append(offs, o)
		}
	}
	slices.Sort(offs)
	evs := make([]Event, len(offs))
	for i, o := range offs {
		evs[i] = m.events[o]
	}
	m.mu.Unlock()
	for _, e := range evs {
		if err := cb(e.Numbers, e.Offset); err != nil {
			return err
		}
	}
	return ctx.Err()
}

const (
	kind   isequencer.WSKind = 1
	seqRec isequencer.SeqID  = 1
	seqLog isequencer.SeqID  = 2
)

func newPartition(t *testing.T, log *memLog) *Partition {
	t.Helper()
	p, err := New(Options{
		Sequencer: isequencer.Params{
			SeqTypes:   map[isequencer.WSKind]map[isequencer.SeqID]isequencer.Number{kind: {seqRec: 100, seqLog: 1}},
			SeqStorage: log,
			RetryDelay: time.Millisecond,
		},
		Log:    log,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// do retries ErrBusy, which New's actualization returns first.
func do(t testing.TB, p *Partition, cmd Command) (Result, error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := p.Do(context.Background(), cmd)
		if !errors.Is(err, ErrBusy) || time.Now().After(deadline) {
			return r, err
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func TestDoWritesEventAtOffset(t *testing.T) {
	log := newMemLog()
	p := newPartition(t, log)
	r, err := do(t, p, Command{WSKind: kind, WSID: 9, Seqs: []isequencer.SeqID{seqRec, seqRec, seqLog}, Payload: []byte("x")})
	require.NoError(t, err)
	assert.Equal(t, isequencer.PLogOffset(1), r.Offset)
	assert.Equal(t, []isequencer.Number{100, 101, 1}, r.Numbers)
	ev := log.events[1]
	assert.Equal(t, isequencer.WSID(9), ev.WSID)
	assert.Equal(t, []byte("x"), ev.Payload)
	assert.Len(t, ev.Numbers, 3)
}

func TestDoRefusesInvalidCommands(t *testing.T) {
	p := newPartition(t, newMemLog())
	for name, cmd := range map[string]Command{
		"WSID 0":       {WSKind: kind, WSID: 0},
		"unknown kind": {WSKind: 7, WSID: 1},
		"unknown seq":  {WSKind: kind, WSID: 1, Seqs: []isequencer.SeqID{99}},
	} {
		_, err := p.Do(context.Background(), cmd)
		require.ErrorIs(t, err, ErrInvalidCommand, name)
	}
	_, err := do(t, p, Command{WSKind: kind, WSID: 1, Seqs: []isequencer.SeqID{seqRec}})
	require.NoError(t, err, "an invalid command leaves the partition usable")
}

func TestFailedWriteVoidsNumbersAndActualizes(t *testing.T) {
	log := newMemLog()
	p := newPartition(t, log)
	cmd := Command{WSKind: kind, WSID: 1, Seqs: []isequencer.SeqID{seqRec}}
	r1, err := do(t, p, cmd)
	require.NoError(t, err)
	log.mu.Lock()
	log.failWrite = errors.New("disk on fire")
	log.mu.Unlock()
	_, err = do(t, p, cmd)
	require.ErrorIs(t, err, ErrWrite)
	assert.Contains(t, err.Error(), "disk on fire")
	log.mu.Lock()
	log.failWrite = nil
	log.mu.Unlock()
	r3, err := do(t, p, cmd)
	require.NoError(t, err)
	assert.Equal(t, r1.Offset+1, r3.Offset, "the failed command's offset is reused")
	assert.Equal(t, r1.Numbers[0]+1, r3.Numbers[0], "numbers continue after the last durable one")
}

func TestRestartContinues(t *testing.T) {
	log := newMemLog()
	p := newPartition(t, log)
	var last Result
	for i := range 50 {
		r, err := do(t, p, Command{WSKind: kind, WSID: isequencer.WSID(1 + i%5), Seqs: []isequencer.SeqID{seqRec}})
		require.NoError(t, err)
		last = r
	}
	require.NoError(t, p.Close())
	_, err := p.Do(context.Background(), Command{WSKind: kind, WSID: 1})
	require.ErrorIs(t, err, ErrClosed)

	p2 := newPartition(t, log)
	r, err := do(t, p2, Command{WSKind: kind, WSID: 5, Seqs: []isequencer.SeqID{seqRec}})
	require.NoError(t, err)
	assert.Equal(t, last.Offset+1, r.Offset)
	assert.Greater(t, r.Numbers[0], last.Numbers[0])
}

func TestNewValidatesOptions(t *testing.T) {
	_, err := New(Options{WriteTimeout: -1, Sequencer: isequencer.Params{GroupCommit: true}})
	require.ErrorIs(t, err, ErrInvalidOptions)
	assert.Contains(t, err.Error(), "Log is nil")
	assert.Contains(t, err.Error(), "WriteTimeout")
	assert.Contains(t, err.Error(), "SeqStorage is nil")
	assert.Contains(t, err.Error(), "GroupCommit")
}
