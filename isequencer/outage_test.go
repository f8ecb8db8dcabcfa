package isequencer

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stepStorage is a mockStorage whose writes the test completes one at a
// time: each write call is handed to the test (calls) and returns what the
// test answers (nil: the batch is written first). Time in a test over it
// is logical: the test decides how long each call takes in transactions,
// so that the result does not depend on the machine's speed. CancelCalls
// ends a call the test no longer answers.
type stepStorage struct {
	*mockStorage
	calls   chan stepCall
	stop    chan struct{}
	stopped sync.Once
}

type stepCall struct {
	values int
	answer chan error
}

var _ ISeqStorageCanceler = (*stepStorage)(nil)

func newStepStorage() *stepStorage {
	return &stepStorage{mockStorage: newMockStorage(), calls: make(chan stepCall), stop: make(chan struct{})}
}

func (s *stepStorage) WriteValuesAndNextPLogOffset(batch []SeqValue, next PLogOffset) error {
	c := stepCall{values: len(batch), answer: make(chan error)}
	select {
	case s.calls <- c:
	case <-s.stop:
		return errStorage
	}
	select {
	case err := <-c.answer:
		if err != nil {
			return err
		}
		return s.mockStorage.WriteValuesAndNextPLogOffset(batch, next)
	case <-s.stop:
		return errStorage
	}
}

func (s *stepStorage) CancelCalls() { s.stopped.Do(func() { close(s.stop) }) }

// TestKeepsIssuingWhileOneReplicaIsOut: one replica of three does not
// answer for 20 s, so one flush write in three hangs until the storage's
// 5 s timeout and fails (then is retried); the others take one tick. A
// closed-loop load of 300 commands/s, 2 numbers each, must see no busy
// Start with the default Params: the unflushed headroom outlasts a hung
// write. Time is counted in ticks of 10 commands (1/30 s); each write's
// duration is decided by the test, so the outcome is the same on any
// machine.
func TestKeepsIssuingWhileOneReplicaIsOut(t *testing.T) {
	const (
		perTick     = 10  // commands per tick: 300 commands/s
		ticksPerSec = 30  // ticks per second
		hungTicks   = 150 // a hung write fails after the storage's 5 s timeout
		outageTicks = 20 * ticksPerSec
		hangEvery   = 3 // one write in three reaches the silent replica
	)
	st := newStepStorage()
	s, cleanup := newTestSequencer(t, st, func(p *Params) {
		def := Params{}
		def.EnsureDefaults()
		p.MaxNumUnflushedValues = def.MaxNumUnflushedValues
	})
	defer cleanup()
	waitStart(t, s, kindApp, 1<<40) // actualized
	s.Cancel()

	var (
		pending  *stepCall // the write in flight, answered at due
		due      int
		fail     bool
		calls    int
		flushed  bool // a transaction was flushed since the batch in flight was taken
		busy, ok int
		maxWait  int // values accepted while the write in flight was pending, at most
		inFlight int
		ws       WSID
	)
	arrived := func(c stepCall, tick int, retry bool) {
		calls++
		pending = &c
		if !retry {
			// A retry writes the batch of the failed call (or what is
			// left of it), taken before that call arrived.
			flushed, inFlight = false, 0
		}
		fail = calls%hangEvery == 0
		due = tick + 1
		if fail {
			due = tick + hungTicks
		}
	}
	for tick := 0; tick < outageTicks; tick++ {
		for range perTick {
			ws++
			if _, started := s.Start(kindApp, ws); !started {
				busy++
				continue
			}
			for _, id := range []SeqID{seqWLog, seqRecord} {
				_, err := s.Next(id)
				require.NoError(t, err)
			}
			s.Flush()
			ok++
			flushed = true
			inFlight += 2
			maxWait = max(maxWait, inFlight)
		}
		switch {
		case pending != nil && tick >= due:
			var err error
			if fail {
				err = fmt.Errorf("%w: timed out after 5 s", errStorage)
			}
			pending.answer <- err
			// A failed write is retried, and a flush since its batch was
			// taken left more to write: either way the worker calls again.
			retry, wait := fail, fail || flushed
			pending = nil
			if wait {
				select {
				case c := <-st.calls:
					arrived(c, tick, retry)
				case <-time.After(10 * time.Second):
					t.Fatalf("tick %d: no write after the last one returned", tick)
				}
			}
		case pending == nil && flushed:
			// The worker had nothing left when its last write returned;
			// this tick's flushes woke it.
			select {
			case c := <-st.calls:
				arrived(c, tick, false)
			case <-time.After(10 * time.Second):
				t.Fatalf("tick %d: no write after a flush", tick)
			}
		case pending == nil:
			// It may have had more than the test knows of.
			select {
			case c := <-st.calls:
				arrived(c, tick, false)
			default:
			}
		}
	}
	t.Logf("%d commands ok, %d busy, %d writes, at most %d values waiting on one write", ok, busy, calls, maxWait)
	assert.Zero(t, busy, "Start reported busy while a quorum was up")
	assert.Equal(t, outageTicks*perTick, ok)
	assert.GreaterOrEqual(t, maxWait, 2*perTick*(hungTicks-1), "a hung write was waited out")
	cleanup()
}
