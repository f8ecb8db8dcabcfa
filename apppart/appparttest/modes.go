package appparttest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage"
)

// ModeOrder opens partition part once per mode in the order given, in
// which every ordered pair of the four modes (a mode after itself too)
// occurs: trust0 → trust0 → trust1 → trust1 → trust2 → ... → fenced →
// trust0.
var ModeOrder = []plog.Mode{
	plog.ModeTrust0, plog.ModeTrust0, plog.ModeTrust1, plog.ModeTrust1,
	plog.ModeTrust2, plog.ModeTrust2, plog.ModeFenced, plog.ModeFenced,
	plog.ModeTrust0, plog.ModeTrust2, plog.ModeTrust0, plog.ModeFenced,
	plog.ModeTrust1, plog.ModeFenced, plog.ModeTrust2, plog.ModeTrust1,
	plog.ModeTrust0,
}

// ModeChangesReissueNoNumber opens partition part on st in every mode of
// ModeOrder in turn, runs commands in a few workspaces each time and
// closes it: every number handed out is above every number handed out
// before in its (WSID, SeqID), whichever mode issued it, and the offsets
// continue without a gap, but for the rest of a PLog block that an owner
// seals as it opens in trust2 or after a trust2 owner (apppart's
// sealZone): its first offset is the next block's. The even-numbered opens leave an unflushed tail
// for the next one to replay; the odd ones flush everything, so that the
// next open (each fenced → trust change among them) must take its numbers
// from the stored cells: a replay of the tail would hide a wrong read.
func ModeChangesReissueNoNumber(t *testing.T, st storage.Storage, part isequencer.PartitionID) {
	const workspaces, perWorkspace = 3, 2
	before := Maxes{}
	next := isequencer.PLogOffset(1)
	for i, mode := range ModeOrder {
		o := Options(st, part, mode)
		if i%2 == 0 {
			o.Sequencer.BatcherDelay = time.Hour // no flush before Close: a tail
		}
		p := Open(t, o)
		if i > 0 && (mode == plog.ModeTrust2 || ModeOrder[i-1] == plog.ModeTrust2) {
			next = plog.ZoneMarker(part, next).NextOffset()
		}
		for j := range workspaces * perWorkspace {
			cmd := Cmd(WS(part, 1+j%workspaces))
			r, err := Do(t, p, cmd)
			require.NoError(t, err, "open %d (%v), command %d", i, mode, j)
			require.Equal(t, next, r.Offset, "open %d (%v), command %d", i, mode, j)
			before.RequireAbove(t, cmd, r)
			before.Add(cmd, r)
			next++
		}
		require.NoError(t, p.Close(), "open %d (%v)", i, mode)
	}
}
