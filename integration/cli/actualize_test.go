package cli

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/apppart"
	"github.com/cqlseq/cqlseq/apppart/appparttest"
	"github.com/cqlseq/cqlseq/integration/itest"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
)

// Partitions of appparttest.App in the package keyspace that only these
// tests use.
const (
	crashPart isequencer.PartitionID = 40
	livePart  isequencer.PartitionID = 41
)

func actualizeWrite(t *testing.T, part isequencer.PartitionID) itest.CLIResult {
	return itest.RunCLI(t, args([]string{"actualize", "--app", fmt.Sprint(appparttest.App), "--partition", fmt.Sprint(part), "--write"},
		storeFlags(itest.Keyspace()))...)
}

// TestActualizeWriteAfterACrashBetweenNumbersAndOffset: issue 36's first
// finding on the cluster (trust2): an owner crashed between its numbers
// write and its first next-offset write; cqlseq actualize --write takes the
// partition over and stores the numbers and offset 7; the next owner hands
// out numbers above the 6 acknowledged commands', from the next PLog block
// (a trust2 owner seals the one it replays to).
func TestActualizeWriteAfterACrashBetweenNumbersAndOffset(t *testing.T) {
	itest.NoLeaks(t)
	st := itest.OpenStore(t)
	last := appparttest.CrashBetweenNumbersAndOffset(t, st, crashPart, plog.ModeTrust2, 6)

	r := actualizeWrite(t, crashPart)
	require.Equal(t, 0, r.Code, r.Stderr)
	assert.Contains(t, r.Stdout, fmt.Sprintf("took over partition %d: epoch 2, stored next offset none stored", crashPart))
	assert.Contains(t, r.Stdout, "6 events read, next PLog offset 7")

	next := appparttest.Open(t, appparttest.Options(st, crashPart, plog.ModeTrust2))
	res, err := appparttest.Do(t, next, appparttest.Cmd(appparttest.WS(crashPart, 0)))
	require.NoError(t, err)
	// A trust2 owner seals the block it replays to: it starts at the next.
	assert.Equal(t, plog.ZoneMarker(crashPart, 7).NextOffset(), res.Offset)
	assert.Equal(t, []isequencer.Number{7, last.Numbers[1] + 1}, res.Numbers, "the next owner handed out numbers already acknowledged")
	require.NoError(t, next.Close())
}

// TestActualizeWriteDeposesALiveFencedOwner: cqlseq actualize --write run
// while a fenced owner is alive takes the partition over and fences the
// PLog: the owner's next command is refused (ErrStopped, nothing
// written), and the next owner starts after every command the deposed one
// acknowledged.
func TestActualizeWriteDeposesALiveFencedOwner(t *testing.T) {
	itest.NoLeaks(t)
	st := itest.OpenStore(t)
	ws := appparttest.WS(livePart, 0)
	a := appparttest.Open(t, appparttest.Options(st, livePart, plog.ModeFenced))
	var acked apppart.Result
	for range 5 {
		var err error
		acked, err = appparttest.Do(t, a, appparttest.Cmd(ws))
		require.NoError(t, err)
	}

	r := actualizeWrite(t, livePart)
	require.Equal(t, 0, r.Code, r.Stderr)
	assert.Contains(t, r.Stdout, fmt.Sprintf("took over partition %d: epoch 2", livePart))
	assert.Contains(t, r.Stdout, "PLog blocks fenced")
	assert.Contains(t, r.Stdout, "next PLog offset 6") // the owner may have flushed it already

	_, err := appparttest.Do(t, a, appparttest.Cmd(ws))
	require.ErrorIs(t, err, apppart.ErrStopped, "the deposed owner's command")
	require.ErrorIs(t, err, plog.ErrFenced)
	require.NoError(t, a.Close())

	b := appparttest.Open(t, appparttest.Options(st, livePart, plog.ModeFenced))
	res, err := appparttest.Do(t, b, appparttest.Cmd(ws))
	require.NoError(t, err)
	assert.Equal(t, isequencer.PLogOffset(6), res.Offset)
	assert.Equal(t, []isequencer.Number{6, acked.Numbers[1] + 1}, res.Numbers)
	require.NoError(t, b.Close())
}
