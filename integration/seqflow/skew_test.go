package seqflow

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/apppart"
	"github.com/cqlseq/cqlseq/apppart/appparttest"
	"github.com/cqlseq/cqlseq/integration/itest"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage/cql"
)

const partSkew = 600

// skewedClock is a store clock (cql.Options.Now) offset from the real one
// by an amount the test moves.
type skewedClock struct{ offset atomic.Int64 }

func (c *skewedClock) now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

func (c *skewedClock) set(d time.Duration) { c.offset.Store(int64(d)) }

// flushes is an isequencer.Metrics that counts the sequencer's completed
// flushes and keeps the last count of values waiting to be flushed.
type flushes struct {
	appparttest.Replays
	n         atomic.Int64
	unflushed atomic.Int64
}

func (f *flushes) Flushed(int, time.Duration) { f.n.Add(1) }

func (f *flushes) Unflushed(n int) { f.unflushed.Store(int64(n)) }

// TestSuccessiveOwnersWithSkewedClocksReissueNoNumber is issue 25's first
// scenario through the public API, in every mode: owner A (correct
// clock) issues numbers of WSID 1 and closes; owner B, its clock an hour
// behind, issues more numbers of WSID 1 and flushes them; then B's clock
// jumps two hours ahead (past every timestamp A wrote) and B issues a
// number of WSID 2 and closes, which flushes only WSID 2 and an offset past
// WSID 1's events. Owner C (correct clock) must continue WSID 1 above
// every number B acknowledged. With client-clock timestamps B's first
// flush was shadowed by A's later-stamped cells while its last offset
// landed, and C handed B's numbers out again.
func TestSuccessiveOwnersWithSkewedClocksReissueNoNumber(t *testing.T) {
	itest.NoLeaks(t)
	for i, mode := range []plog.Mode{plog.ModeTrust0, plog.ModeTrust2, plog.ModeFenced} {
		t.Run(mode.String(), func(t *testing.T) {
			part := isequencer.PartitionID(partSkew + i)
			ws1, ws2 := appparttest.WS(part, 1), appparttest.WS(part, 2)
			seen := appparttest.Maxes{}
			run := func(p *apppart.Partition, ws isequencer.WSID, n int) {
				t.Helper()
				for range n {
					cmd := appparttest.Cmd(ws)
					r, err := appparttest.Do(t, p, cmd)
					require.NoError(t, err)
					seen.RequireAbove(t, cmd, r)
					seen.Add(cmd, r)
				}
			}

			stA := open(t)
			// A and B store their numbers after every group: the test is
			// about those writes, stamped by skewed clocks.
			oA := appparttest.Options(stA, part, mode)
			oA.Sequencer.FlushAfterEvents = 1
			a := appparttest.Open(t, oA)
			run(a, ws1, 5)
			require.NoError(t, a.Close())

			var clockB skewedClock
			clockB.set(-time.Hour)
			stB := itest.OpenStore(t, func(o *cql.Options) { o.Now = clockB.now })
			fl := &flushes{}
			oB := appparttest.Options(stB, part, mode)
			oB.Sequencer.Metrics = fl
			oB.Sequencer.FlushAfterEvents = 1
			b := appparttest.Open(t, oB)
			before := fl.n.Load()
			run(b, ws1, 5)
			require.Eventually(t, func() bool { return fl.n.Load() > before && fl.unflushed.Load() == 0 }, time.Minute, time.Millisecond, "B flushes WSID 1")
			clockB.set(time.Hour)
			run(b, ws2, 1)
			require.NoError(t, b.Close())

			c := appparttest.Open(t, appparttest.Options(open(t), part, mode))
			run(c, ws1, 3) // RequireAbove: above every number A and B handed out
			require.NoError(t, c.Close())
		})
	}
}
