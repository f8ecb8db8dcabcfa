package apppart

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/faulty"
	"github.com/cqlseq/cqlseq/storage/mem"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	kind   isequencer.WSKind = 1
	seqRec isequencer.SeqID  = 1
	seqLog isequencer.SeqID  = 2
)

// newPartition opens a trust-mode partition over st with two plain
// sequences (no record IDs, no WLog offset).
func newPartition(t *testing.T, st storage.Storage) *Partition {
	t.Helper()
	return open(t, OpenOptions{
		Storage: st, App: testApp, Partition: testPart,
		SeqTypes:  map[isequencer.WSKind]map[isequencer.SeqID]isequencer.Number{kind: {seqRec: 100, seqLog: 1}},
		Sequencer: isequencer.Params{RetryDelay: time.Millisecond},
		Logger:    quiet(),
	})
}

// readEvent returns the event stored at off, if any.
func readEvent(t *testing.T, st storage.Storage, off isequencer.PLogOffset) (plog.Event, bool) {
	t.Helper()
	v, ok, err := st.Get(context.Background(), plog.EventPKey(testPart, off), plog.EventCCols(off))
	require.NoError(t, err)
	var e plog.Event
	if ok {
		require.NoError(t, plog.Decode(testPart, off, v, &e))
	}
	return e, ok
}

// do retries ErrBusy, which Open's actualization returns first.
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
	st := mem.New(mem.Options{})
	defer st.Close()
	p := newPartition(t, st)
	r, err := do(t, p, Command{WSKind: kind, WSID: 9, Seqs: []isequencer.SeqID{seqRec, seqRec, seqLog}, Payload: []byte("x")})
	require.NoError(t, err)
	assert.Equal(t, isequencer.PLogOffset(1), r.Offset)
	assert.Equal(t, []isequencer.Number{100, 101, 1}, r.Numbers)
	ev, ok := readEvent(t, st, 1)
	require.True(t, ok)
	assert.Equal(t, isequencer.WSID(9), ev.WSID)
	assert.Equal(t, []byte("x"), ev.Payload)
	assert.Equal(t, []plog.SeqNumber{{SeqID: seqRec, Number: 101}, {SeqID: seqLog, Number: 1}}, ev.Numbers)
}

func TestDoRefusesInvalidCommands(t *testing.T) {
	st := mem.New(mem.Options{})
	defer st.Close()
	p := newPartition(t, st)
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
	inner := mem.New(mem.Options{})
	defer inner.Close()
	st, err := faulty.New(inner, faulty.Options{})
	require.NoError(t, err)
	p := newPartition(t, st)
	cmd := Command{WSKind: kind, WSID: 1, Seqs: []isequencer.SeqID{seqRec}}
	r1, err := do(t, p, cmd)
	require.NoError(t, err)
	// The next command's group: one ApplyBatchesIf of its event and
	// record (mem is a storage.MultiApplier).
	require.NoError(t, st.SetRules(faulty.Rule{
		Ops: []string{faulty.OpApplyBatchesIf}, Times: 1,
		Action: faulty.Fail, Err: errors.New("disk on fire"),
	}))
	_, err = do(t, p, cmd)
	require.ErrorIs(t, err, ErrWrite)
	assert.Contains(t, err.Error(), "disk on fire")
	st.Clear()
	r3, err := do(t, p, cmd)
	require.NoError(t, err)
	assert.Equal(t, r1.Offset+1, r3.Offset, "the failed command's offset is reused")
	assert.Equal(t, r1.Numbers[0]+1, r3.Numbers[0], "numbers continue after the last durable one")
}

func TestRestartContinues(t *testing.T) {
	st := mem.New(mem.Options{})
	defer st.Close()
	p := newPartition(t, st)
	var last Result
	for i := range 50 {
		r, err := do(t, p, Command{WSKind: kind, WSID: isequencer.WSID(1 + i%5), Seqs: []isequencer.SeqID{seqRec}})
		require.NoError(t, err)
		last = r
	}
	require.NoError(t, p.Close())
	_, err := p.Do(context.Background(), Command{WSKind: kind, WSID: 1})
	require.ErrorIs(t, err, ErrClosed)

	p2 := newPartition(t, st)
	r, err := do(t, p2, Command{WSKind: kind, WSID: 5, Seqs: []isequencer.SeqID{seqRec}})
	require.NoError(t, err)
	assert.Equal(t, last.Offset+1, r.Offset)
	assert.Greater(t, r.Numbers[0], last.Numbers[0])
}

// TestCloseCancelsHungNumbersRead: Close does not wait out the storage
// timeout while a command waits on a numbers read that never returns (its
// read ahead, before the partition's lock), and neither does the command.
func TestCloseCancelsHungNumbersRead(t *testing.T) {
	const hang = 30 * time.Second
	inner := mem.New(mem.Options{})
	defer inner.Close()
	st, err := faulty.New(inner, faulty.Options{})
	require.NoError(t, err)
	p, err := Open(context.Background(), OpenOptions{
		Storage: st, App: testApp, Partition: testPart,
		SeqTypes:       map[isequencer.WSKind]map[isequencer.SeqID]isequencer.Number{kind: {seqRec: 100}},
		Sequencer:      isequencer.Params{RetryDelay: time.Millisecond},
		StorageTimeout: hang,
		Logger:         quiet(),
	})
	require.NoError(t, err)
	_, err = do(t, p, Command{WSKind: kind, WSID: 1, Seqs: []isequencer.SeqID{seqRec}})
	require.NoError(t, err)

	// WSID 2 is not cached: Do reads its numbers, and the read hangs.
	require.NoError(t, st.SetRules(faulty.Rule{Ops: []string{faulty.OpRead}, Action: faulty.Timeout}))
	done := make(chan error, 1)
	go func() {
		_, err := p.Do(context.Background(), Command{WSKind: kind, WSID: 2, Seqs: []isequencer.SeqID{seqRec}})
		done <- err
	}()
	require.Eventually(t, func() bool { return st.InjectedOn(faulty.OpRead) > 0 }, 10*time.Second, time.Millisecond)

	start := time.Now()
	require.NoError(t, p.Close())
	took := time.Since(start)
	err = <-done
	ended := time.Since(start)
	require.Error(t, err)
	assert.Less(t, took, hang/3, "Close waited for the hung read")
	assert.Less(t, ended, hang/3, "the command waited for the hung read after Close")
	_, err = p.Do(context.Background(), Command{WSKind: kind, WSID: 1, Seqs: []isequencer.SeqID{seqRec}})
	require.ErrorIs(t, err, ErrClosed)
}
