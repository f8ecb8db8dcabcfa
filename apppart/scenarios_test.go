package apppart_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/apppart"
	"github.com/cqlseq/cqlseq/apppart/appparttest"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/boltdb"
	"github.com/cqlseq/cqlseq/storage/drivertest"
)

// drivers runs f on each embedded driver (drivertest.Each); bolt tells
// which.
func drivers(t *testing.T, f func(t *testing.T, st storage.Storage, bolt bool)) {
	drivertest.Each(t, func(t *testing.T, st storage.Storage) {
		_, bolt := st.(*boltdb.Store)
		f(t, st, bolt)
	})
}

// TestRestartReplaysOnlyTail: 100,000 events across 1,000 workspaces
// (-short, or bbolt under -race: 20,000).
func TestRestartReplaysOnlyTail(t *testing.T) {
	drivers(t, func(t *testing.T, st storage.Storage, bolt bool) {
		n := 100_000
		if testing.Short() || (bolt && raceEnabled) {
			n = 20_000
		}
		appparttest.RestartReplaysOnlyTail(t, st, 2, plog.ModeTrust0, n, 1000)
		// trust2 seals the block each reopen's replay ends in (the
		// integration suite runs it on the cluster with 100,000).
		appparttest.RestartReplaysOnlyTail(t, st, 3, plog.ModeTrust2, n/10, 100)
	})
}

func TestFailedWritesReuseNoNumber(t *testing.T) {
	drivers(t, func(t *testing.T, st storage.Storage, _ bool) {
		for _, mode := range []plog.Mode{plog.ModeTrust0, plog.ModeTrust1, plog.ModeTrust2, plog.ModeFenced} {
			t.Run(mode.String(), func(t *testing.T) {
				appparttest.FailedWritesReuseNoNumber(t, st, 10+isequencer.PartitionID(mode), mode, 3000)
			})
		}
	})
}

// TestOutcomes: each way a command's event can end is answered as a value
// with its offset, and Settle makes unknown outcomes final, in every mode
// (appparttest.Outcomes).
func TestOutcomes(t *testing.T) {
	drivers(t, func(t *testing.T, st storage.Storage, _ bool) {
		for _, mode := range []plog.Mode{plog.ModeTrust0, plog.ModeTrust1, plog.ModeTrust2, plog.ModeFenced} {
			t.Run(mode.String(), func(t *testing.T) {
				appparttest.Outcomes(t, st, 200+10*isequencer.PartitionID(mode), mode)
			})
		}
	})
}

func TestTrustLevelConflicts(t *testing.T) {
	drivers(t, func(t *testing.T, st storage.Storage, _ bool) {
		appparttest.TrustLevelConflicts(t, st, 20)
	})
}

func TestCorruptTailKeepsRetrying(t *testing.T) {
	drivers(t, func(t *testing.T, st storage.Storage, _ bool) {
		appparttest.CorruptTailKeepsRetrying(t, st, 30)
	})
}

// TestModeChangesReissueNoNumber: a partition opened in every order of
// modes never hands out a number twice (issue 14: a trust-mode open after
// fenced use read only the seed cells and issued numbers again).
func TestModeChangesReissueNoNumber(t *testing.T) {
	drivers(t, func(t *testing.T, st storage.Storage, _ bool) {
		appparttest.ModeChangesReissueNoNumber(t, st, 40)
	})
}

// TestTrust0ConflictInGroupFailsOneCommand: trust 0 writing in groups, a
// record planted under the ID one command of a group takes fails that
// command alone (ErrConflict; the partition stops after the group); its
// neighbours in the same group, before and after it, are acknowledged
// with their events and records stored.
func TestTrust0ConflictInGroupFailsOneCommand(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st storage.Storage) {
		ctx := context.Background()
		const part = 70
		hold, release := make(chan struct{}), make(chan struct{})
		var armed atomic.Bool
		var groups atomic.Int32
		entered := make(chan struct{}, 16) // a Do has passed its checks and is about to queue
		o := appparttest.Options(st, part, plog.ModeTrust0)
		o.Hooks.AfterLeaseCheck = func() {
			if armed.Load() {
				entered <- struct{}{}
			}
		}
		o.Hooks.BeforeGroupWrite = func(first, last isequencer.PLogOffset) {
			if armed.Load() && groups.Add(1) == 1 { // hold the first group while the next fills
				close(hold)
				<-release
			}
		}
		p := appparttest.Open(t, o)
		// Past the initial actualization (ErrBusy until then).
		_, err := appparttest.Do(t, p, appparttest.Cmd(appparttest.WS(part, 10)))
		require.NoError(t, err)
		armed.Store(true)
		// Each workspace's first record ID is FirstRecordID: plant it in
		// workspace 3.
		planted := plog.RecordID(appparttest.FirstRecordID)
		require.NoError(t, st.Put(ctx, plog.RecordPKey(appparttest.WS(part, 3), planted), plog.RecordCCols(planted), []byte{1}))

		type outcome struct {
			r   apppart.Result
			err error
		}
		run := func(ws int) <-chan outcome {
			c := make(chan outcome, 1)
			go func() {
				r, err := p.Do(ctx, appparttest.Cmd(appparttest.WS(part, ws)))
				c <- outcome{r, err}
			}()
			return c
		}
		first := run(1)
		<-entered
		<-hold
		// Queued in offset order behind the held group: one group. A
		// command queues under the partition's lock after it entered, so
		// once a later one entered, the one before it has queued: the
		// probe (workspace 6) entering shows that workspaces 2 to 5 are
		// queued.
		var rest []<-chan outcome
		for ws := 2; ws <= 5; ws++ {
			rest = append(rest, run(ws))
			<-entered
		}
		probe := run(6)
		<-entered
		close(release)
		require.NoError(t, (<-first).err)
		for i, c := range rest {
			ws := i + 2
			got := <-c
			if ws == 3 {
				require.ErrorIs(t, got.err, plog.ErrConflict, "workspace 3")
				require.ErrorIs(t, got.err, apppart.ErrStopped)
				continue
			}
			require.NoError(t, got.err, "workspace %d: a neighbour's conflict is not its own", ws)
			_, ok, err := st.Get(ctx, plog.EventPKey(part, got.r.Offset), plog.EventCCols(got.r.Offset))
			require.NoError(t, err)
			assert.True(t, ok, "workspace %d: event stored", ws)
			rec := plog.RecordID(got.r.Numbers[1])
			_, ok, err = st.Get(ctx, plog.RecordPKey(appparttest.WS(part, ws), rec), plog.RecordCCols(rec))
			require.NoError(t, err)
			assert.True(t, ok, "workspace %d: record stored", ws)
		}
		// The probe made the group or came after it, when the partition had
		// stopped.
		if err := (<-probe).err; err != nil {
			require.ErrorIs(t, err, apppart.ErrStopped, "the probe")
		}
		_, err = p.Do(ctx, appparttest.Cmd(appparttest.WS(part, 7)))
		require.ErrorIs(t, err, apppart.ErrStopped)
	})
}
