package appparttest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/apppart"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage"
)

// RestoreEnv is a store whose state can be saved and brought back, for
// RestoreAndAdvance. No partition of it is open while Backup or Restore
// runs.
type RestoreEnv struct {
	// Store returns the store as it is now (Backup and Restore may
	// replace it, as a bbolt file reopened or a node restarted).
	Store func(t testing.TB) storage.Storage
	// Backup saves the store's state; Restore brings the saved state back.
	Backup, Restore func(t testing.TB)
}

// Restored is what RestoreAndAdvance saw.
type Restored struct {
	// Before, Lost and After are the commands acknowledged before the
	// backup, after it (lost with the restore) and after Advance.
	Before, Lost, After int
	// Advanced is Advance's outcome.
	Advanced apppart.Margins
	// Gap is the offset of the gap marker; Next the first offset after it.
	Gap, Next isequencer.PLogOffset
}

// RestoreAndAdvance runs the procedure of docs/operations.md "Backup and
// restore" on partition part in mode: commands acknowledged, a backup,
// more commands acknowledged (one workspace new since the backup), the
// backup restored, apppart.Advance with margins above what was handed out
// since the backup, and commands again. It requires that no number and no
// offset acknowledged before the restore is acknowledged again after it
// (every new number above every earlier one of its sequence, every new
// offset above every earlier one), that Settle answers ErrRestored for a
// command the restore lost and Stored for one it kept.
func RestoreAndAdvance(t *testing.T, env RestoreEnv, part isequencer.PartitionID, mode plog.Mode) Restored {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	old := []isequencer.WSID{WS(part, 1), WS(part, 2), WS(part, 3)}
	fresh := WS(part, 4) // first used after the backup
	type acked struct {
		cmd apppart.Command
		res apppart.Result
	}
	run := func(wss []isequencer.WSID, n int) []acked {
		t.Helper()
		p := Open(t, Options(env.Store(t), part, mode))
		var out []acked
		for i := range n {
			cmd := Cmd(wss[i%len(wss)])
			r, err := Do(t, p, cmd)
			require.NoError(t, err)
			out = append(out, acked{cmd, r})
		}
		require.NoError(t, p.Close())
		return out
	}
	before := run(old, 12)
	env.Backup(t)
	lost := run(append(old, fresh), 40)
	env.Restore(t)

	maxes, maxOff := Maxes{}, isequencer.PLogOffset(0)
	for _, a := range append(append([]acked{}, before...), lost...) {
		maxes.Add(a.cmd, a.res)
		maxOff = max(maxOff, a.res.Offset)
	}
	// 40 commands since the backup: each sequence took at most 40, and the
	// offsets at most 40 past the rest of a PLog block and the next one
	// (an owner that opens in trust2, or after one, starts at the next
	// block: apppart's sealZone).
	m := apppart.Margins{Numbers: 100, Offsets: 100 + 2*plog.EventsPerPartition}
	adv, err := apppart.Advance(ctx, Options(env.Store(t), part, mode), m)
	require.NoError(t, err)
	after := run(append(old, fresh), 12)
	for _, a := range after {
		maxes.RequireAbove(t, a.cmd, a.res)
		require.Greater(t, a.res.Offset, maxOff, "an offset acknowledged before the restore acknowledged again")
	}

	p := Open(t, Options(env.Store(t), part, mode))
	require.NoError(t, p.WaitReady(ctx))
	got, err := p.Settle(ctx, before[0].cmd, before[0].res)
	require.NoError(t, err)
	require.Equal(t, apppart.Stored, got, "a command from before the backup")
	for _, a := range []acked{lost[0], lost[len(lost)-1]} {
		_, err = p.Settle(ctx, a.cmd, a.res)
		require.ErrorIs(t, err, apppart.ErrRestored, "a command the restore lost (offset %d)", a.res.Offset)
	}
	require.NoError(t, p.Close())
	return Restored{Before: len(before), Lost: len(lost), After: len(after), Advanced: m, Gap: adv.Gap, Next: adv.Next}
}
