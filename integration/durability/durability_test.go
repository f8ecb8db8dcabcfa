package durability

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cqlseq/cqlseq/apppart/appparttest"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/plog/plogcheck"
	"github.com/cqlseq/cqlseq/testenv/cassandra"
	"github.com/cqlseq/cqlseq/testenv/leakcheck"
	"github.com/cqlseq/cqlseq/vvmadapter"
)

const (
	// syncPeriod is the launcher's commitlog_sync_period without
	// CrashSafe.
	syncPeriod = 10 * time.Second
	// markerInterval is how often a periodic node updates the sync markers
	// of its memory-mapped commit log segments (Cassandra's
	// AbstractCommitLogService.DEFAULT_MARKER_INTERVAL_MILLIS): a replay
	// stops at the last marker, so a killed process loses what it
	// acknowledged after it. A compressed segment's markers are written at
	// each sync only.
	markerInterval = 100 * time.Millisecond
	// lz4 buffers the commit log's segments in the process until each
	// sync (CompressedSegment) instead of memory-mapping them.
	lz4 = "commitlog_compression:\n  - class_name: LZ4Compressor\n"
	// clients run commands on the partition at the same time.
	clients = 4
	// beforeKill is how long the clients run (after their first 50
	// acknowledgements) before the kill: more than a sync period and its
	// margin, so that the partition's takeover has been synced and a lost
	// command's age can be told from the run's length.
	beforeKill = 16 * time.Second
	// down is how long the node stays down after the kill.
	down = 2 * time.Second
)

// TestAcknowledgedAcrossSIGKILL SIGKILLs a node mid-stream in three commit
// log modes and counts the acknowledged commands the restarted node no
// longer holds. Each mode has a window: a lost command must have been
// acknowledged within it before the kill (its interval plus a margin for a
// busy machine delaying the commit log's thread).
//
//   - periodic (10 s), memory-mapped segments: the kernel keeps a killed
//     process's pages, but a replay stops at the last sync marker, updated
//     every 100 ms: what was acknowledged since is lost (0 or a few).
//   - periodic with LZ4 compression: segments are buffered in the process;
//     what was acknowledged since the last sync is lost (seconds of
//     commands), the loss a power cut gives an uncompressed periodic node.
//   - batch with LZ4 compression: a write is acknowledged after its sync;
//     nothing is lost.
func TestAcknowledgedAcrossSIGKILL(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, ignore) }) // runs last: after the nodes have stopped
	for _, c := range []struct {
		name     string
		opts     cassandra.Options
		window   time.Duration // 0: nothing may be lost
		wantLoss bool
	}{
		{"periodic", cassandra.Options{}, markerInterval + 2*time.Second, false},
		{"periodic LZ4", cassandra.Options{ExtraYAML: lz4}, syncPeriod + 5*time.Second, true},
		{"batch LZ4", cassandra.Options{CrashSafe: true, ExtraYAML: lz4}, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := measure(t, startNode(t, c.opts), c.window)
			o.log(t, c.window)
			if c.window == 0 {
				require.Zero(t, o.lost, "acknowledged commands lost")
				require.Zero(t, o.lostRecords, "record rows of acknowledged commands lost")
				require.Zero(t, o.reissued, "numbers handed out again")
				return
			}
			if c.wantLoss {
				require.Positive(t, o.lost, "acknowledged commands lost by a kill %v after the last acknowledgement", o.lastAck)
			}
			require.LessOrEqual(t, o.lost, o.recent, "lost: at most those acknowledged in the last %v before the kill", c.window)
		})
	}
}

// outcome is what one kill took.
type outcome struct {
	acked       int           // commands acknowledged before the kill
	ran         time.Duration // from the first acknowledgement to the kill
	lost        int           // of them, with no event in the PLog after the restart
	lostRecords int           // record rows missing of the acknowledged commands whose event is there
	recent      int           // commands acknowledged within the window before the kill
	lastAck     time.Duration // from the last acknowledgement to the kill
	oldestLost  time.Duration // from the first lost acknowledgement to the kill
	reissued    int           // numbers handed out after reopening that a lost command had been given
	failed      int           // calls that failed (from the kill on)
	kill        time.Duration // from Restart's call to the process's end
	back        time.Duration // from the kill to CQL answering again
	events      uint64        // events in the PLog after the restart
}

func (o outcome) log(t *testing.T, window time.Duration) {
	t.Helper()
	t.Logf("%d commands acknowledged in %.1f s (%.0f/s, %d clients, fenced); killed %v after the last acknowledgement (SIGKILL to the end of the process %v), CQL back %.1f s later",
		o.acked, o.ran.Seconds(), float64(o.acked)/o.ran.Seconds(), clients, o.lastAck.Round(time.Millisecond), o.kill.Round(time.Millisecond), o.back.Seconds())
	lost := "none"
	if o.lost > 0 {
		lost = fmt.Sprintf("%d, the first acknowledged %v before the kill", o.lost, o.oldestLost.Round(time.Millisecond))
	}
	if window > 0 {
		lost += fmt.Sprintf(" (%d acknowledged in the last %v)", o.recent, window)
	}
	t.Logf("lost after the restart: %s; %d record rows missing; the PLog holds %d events; reopened, %d numbers handed out again; %d calls failed",
		lost, o.lostRecords, o.events, o.reissued, o.failed)
}

// measure runs the clients on a fenced partition of n, kills n beforeKill
// after their 50th acknowledgement (counting those acknowledged within
// window before the kill), restarts it and checks every
// acknowledged command against what the node holds: plogcheck reads the
// PLog as a restart does (from offset 1 to the first missing offset); an
// acknowledged event not there is lost. The owner is closed while the node
// is down, so nothing it keeps in memory reaches the restarted node; the
// partition is then reopened (a takeover, which replays the PLog) and gives
// one command in each workspace: its numbers must be above those of every
// acknowledged command still held; those not above a lost command's are
// counted (the loss's consequence, not a cqlseq bug).
func measure(t *testing.T, n *node, window time.Duration) outcome {
	const part = isequencer.PartitionID(1)
	st1 := n.open(t)
	p1 := appparttest.Open(t, appparttest.Options(st1, part, plog.ModeFenced))
	l := startLoad(p1, part, clients)
	defer l.stop()
	l.waitAcks(t, 50, 2*time.Minute)
	time.Sleep(beforeKill)
	killing, crashed := n.crash(t, down, func() {
		l.stop()
		_ = p1.Close()
		_ = st1.Close()
	})
	back := time.Now()
	acked, failed := l.snapshot()
	require.NotEmpty(t, acked)
	o := outcome{acked: len(acked), failed: failed, kill: crashed.Sub(killing), back: back.Sub(crashed),
		ran: crashed.Sub(acked[0].at), lastAck: crashed.Sub(acked[len(acked)-1].at)}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	st2 := n.open(t)
	rd, err := plog.NewReader(st2, plog.ReaderOptions{})
	require.NoError(t, err)
	pr, err := plogcheck.Partition(ctx, rd, part, plogcheck.PartitionOptions{Stored: vvmadapter.New(st2, appparttest.App)})
	require.NoError(t, err)
	require.True(t, pr.OK(), "the PLog and stored numbers after the restart: %s", listed(&pr.Findings))
	o.events = pr.Events
	ar, err := plogcheck.Acks(ctx, rd, ackLog(part, acked), plogcheck.AckOptions{
		RecordSeqs: []isequencer.SeqID{appparttest.SeqRecordID}, Records: st2})
	require.NoError(t, err)
	require.Zero(t, ar.Count(plogcheck.Duplicate, plogcheck.Regression), "acknowledged numbers: %s", listed(&ar.Findings))
	o.lost = int(ar.Count(plogcheck.Lost))
	o.lostRecords = int(ar.Count(plogcheck.LostRecord))

	// The loss is the PLog's tail: every lost command is above the last
	// event read, every command at or below it is held as acknowledged.
	all, held := appparttest.Maxes{}, appparttest.Maxes{}
	tail := 0
	for _, a := range acked {
		all.Add(a.Cmd, a.Result)
		if crashed.Sub(a.at) <= window {
			o.recent++
		}
		if a.Result.Offset > pr.Last {
			if tail == 0 {
				o.oldestLost = crashed.Sub(a.at)
			}
			tail++
			continue
		}
		held.Add(a.Cmd, a.Result)
	}
	require.Equal(t, tail, o.lost, "lost commands (%s) are those above the PLog's last event %d", listed(&ar.Findings), pr.Last)

	p2 := appparttest.Open(t, appparttest.Options(st2, part, plog.ModeFenced))
	require.NoError(t, p2.WaitReady(ctx))
	for i := 1; i <= workspaces; i++ {
		cmd := appparttest.Cmd(appparttest.WS(part, i))
		r, err := appparttest.Do(t, p2, cmd)
		require.NoError(t, err, "reopened partition, workspace %d", i)
		for j, id := range cmd.Seqs {
			k := isequencer.NumberKey{WSID: cmd.WSID, SeqID: id}
			require.Greater(t, r.Numbers[j], held[k], "WSID %d SeqID %d: a number an acknowledged command still held was given", k.WSID, k.SeqID)
			if r.Numbers[j] <= all[k] {
				o.reissued++
			}
		}
	}
	require.NoError(t, p2.Close())
	return o
}

// ackLog is acked as plogcheck's acknowledgement log.
func ackLog(part isequencer.PartitionID, acked []ack) *plogcheck.AckLog {
	log := &plogcheck.AckLog{Acks: make([]plogcheck.Ack, len(acked))}
	for i, a := range acked {
		x := plogcheck.Ack{Line: i + 1, Partition: part, Offset: a.Result.Offset, WSID: a.Cmd.WSID, Payload: []byte(a.Payload)}
		for j, id := range a.Cmd.Seqs {
			x.Numbers = append(x.Numbers, plog.SeqNumber{SeqID: id, Number: a.Result.Numbers[j]})
		}
		log.Acks[i] = x
	}
	return log
}

// listed is f's listed findings, one a line.
func listed(f *plogcheck.Findings) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d problems", f.Problems)
	for _, fd := range f.Listed {
		fmt.Fprintf(&b, "\n  %s", fd)
	}
	return b.String()
}
