package seqstorage

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage/faulty"
	"github.com/cqlseq/cqlseq/storage/mem"
)

// outageTimeout is the per-call timeout in the outage tests: a hung call
// that is not cancelled holds cleanup this long.
const outageTimeout = 30 * time.Second

// hang is a rule that makes a store never answer the operations in ops
// (every one if none).
func hang(ops ...string) faulty.Rule { return faulty.Rule{Ops: ops, Action: faulty.Timeout} }

// hungSequencer starts a sequencer over a Storage (Timeout outageTimeout)
// over a faulty store with rules, and returns it with its cleanup, store
// and Storage.
func hungSequencer(tb testing.TB, rules ...faulty.Rule) (seq isequencer.ISequencer, cleanup func(), st *faulty.Store, s *Storage) {
	tb.Helper()
	inner := mem.New(mem.Options{})
	tb.Cleanup(func() { _ = inner.Close() })
	st, err := faulty.New(inner, faulty.Options{})
	require.NoError(tb, err)
	own, err := TakeOver(context.Background(), TakeOverOptions{Storage: st, App: app, Partition: part})
	require.NoError(tb, err)
	require.NoError(tb, st.SetRules(rules...))
	s, err = New(Options{Storage: st, App: app, Partition: part, Timeout: outageTimeout, Owner: own.Owner})
	require.NoError(tb, err)
	seq, cleanup, err = isequencer.New(&isequencer.Params{
		SeqTypes:   map[isequencer.WSKind]map[isequencer.SeqID]isequencer.Number{1: {1: 1}},
		SeqStorage: s,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	require.NoError(tb, err)
	tb.Cleanup(cleanup)
	return seq, cleanup, st, s
}

// waitInjected waits until st has hung a call.
func waitInjected(tb testing.TB, st *faulty.Store) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for st.Injected() == 0 {
		if time.Now().After(deadline) {
			tb.Fatal("no storage call hung within 10 s")
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// TestCleanupDuringOutage: cleanup while a storage call hangs (an outage:
// the store never answers, the call's timeout is 30 s) returns after the
// sequencer's 50 ms grace, because it then cancels the Storage's calls. The
// test asserts well under the timeout (1 s: room for a busy machine, and 30x
// below what an uncancelled call costs); BenchmarkCleanupDuringOutage
// measures the latency itself against the 100 ms target.
func TestCleanupDuringOutage(t *testing.T) {
	t.Run("flush write", func(t *testing.T) {
		seq, cleanup, st, _ := hungSequencer(t)
		var ok bool
		for deadline := time.Now().Add(10 * time.Second); !ok; {
			if _, ok = seq.Start(1, 1); !ok {
				require.True(t, time.Now().Before(deadline), "still actualizing after 10 s")
				time.Sleep(time.Millisecond)
			}
		}
		require.NoError(t, st.SetRules(hang(faulty.OpPutBatch, faulty.OpPut)))
		_, err := seq.Next(1)
		require.NoError(t, err)
		seq.Flush()
		waitInjected(t, st)
		assertPromptCleanup(t, cleanup, "a hung flush write")
	})
	t.Run("actualization", func(t *testing.T) {
		_, cleanup, st, _ := hungSequencer(t, hang())
		waitInjected(t, st)
		assertPromptCleanup(t, cleanup, "a hung actualization read")
	})
}

// assertPromptCleanup runs cleanup and asserts that it returns well before
// the hung call's timeout.
func assertPromptCleanup(t *testing.T, cleanup func(), hung string) {
	t.Helper()
	began := time.Now()
	cleanup()
	took := time.Since(began)
	t.Logf("cleanup with %s took %v", hung, took)
	assert.Less(t, took, time.Second)
}

func TestCancelCallsEndsEveryCall(t *testing.T) {
	_, cleanup, st, s := hungSequencer(t, hang())
	waitInjected(t, st)
	cleanup() // cancels
	began := time.Now()
	_, err := s.ReadNumbers(1, []isequencer.SeqID{1})
	assert.ErrorIs(t, err, ErrCanceled)
	_, err = s.ReadNextPLogOffset()
	assert.ErrorIs(t, err, ErrCanceled)
	err = s.WriteValuesAndNextPLogOffset(nil, 1)
	assert.ErrorIs(t, err, ErrCanceled)
	err = s.ActualizeSequencesFromPLog(context.Background(), 1, func([]isequencer.SeqValue, isequencer.PLogOffset) error { return nil })
	assert.ErrorIs(t, err, ErrCanceled)
	assert.Less(t, time.Since(began), time.Second, "calls after CancelCalls fail at once")
	s.CancelCalls() // idempotent
}

// BenchmarkCleanupDuringOutage measures cleanup of a sequencer whose
// actualization hangs on a store that never answers (30 s call timeout);
// ns/cleanup is the latency the 100 ms target is about.
func BenchmarkCleanupDuringOutage(b *testing.B) {
	var total time.Duration
	for range b.N {
		b.StopTimer()
		_, cleanup, st, _ := hungSequencer(b, hang())
		waitInjected(b, st)
		b.StartTimer()
		began := time.Now()
		cleanup()
		total += time.Since(began)
	}
	b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "ns/cleanup")
}

// TestCancelDuringReplay: CancelCalls (the sequencer's cleanup) or the
// caller's ctx, during a long replay whose PLog reads are slow (30 ms
// each, read ahead), ends ActualizeSequencesFromPLog within 100 ms, and
// the reads it started have ended (goleak, TestMain).
func TestCancelDuringReplay(t *testing.T) {
	inner := mem.New(mem.Options{})
	t.Cleanup(func() { _ = inner.Close() })
	writeEvents(t, inner, 6*plog.EventsPerPartition)
	for _, how := range []string{"CancelCalls", "ctx"} {
		t.Run(how, func(t *testing.T) {
			st, err := faulty.New(inner, faulty.Options{Rules: []faulty.Rule{
				{Ops: []string{faulty.OpRead}, Action: faulty.Delay, Delay: 30 * time.Millisecond},
			}})
			require.NoError(t, err)
			s := newStorage(t, Options{Storage: st, Timeout: outageTimeout})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			began := make(chan struct{})
			done := make(chan error, 1)
			var events int
			go func() {
				done <- s.ActualizeSequencesFromPLog(ctx, 1, func([]isequencer.SeqValue, isequencer.PLogOffset) error {
					if events++; events == plog.EventsPerPartition {
						close(began) // the first block is delivered: the rest is read ahead
					}
					return nil
				})
			}()
			select {
			case <-began:
			case err := <-done:
				t.Fatalf("ended before the second block: %v", err)
			}
			stopped := time.Now()
			if how == "ctx" {
				cancel()
			} else {
				s.CancelCalls()
			}
			select {
			case err := <-done:
				assert.Less(t, time.Since(stopped), 100*time.Millisecond)
				require.Error(t, err)
				if how == "ctx" {
					assert.ErrorIs(t, err, context.Canceled)
				} else {
					assert.ErrorIs(t, err, ErrCanceled)
				}
			case <-time.After(time.Second):
				t.Fatal("ActualizeSequencesFromPLog did not return within 1 s")
			}
		})
	}
}
