package dcloss

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gocql/gocql"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cqlseq/cqlseq/apppart/appparttest"
	"github.com/cqlseq/cqlseq/integration/itest"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/plog/plogcheck"
	"github.com/cqlseq/cqlseq/schema"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/cql"
	"github.com/cqlseq/cqlseq/testenv/cassandra"
	"github.com/cqlseq/cqlseq/testenv/leakcheck"
)

// The data centres, their nodes (1-based, as cassandra.Cluster numbers
// them) and the partition every scenario runs.
const (
	dc1, dc2     = "dc1", "dc2"
	node1, node2 = 1, 2
	part         = isequencer.PartitionID(1)
)

// replication puts one replica of every row in each data centre.
const replication = "{'class': 'NetworkTopologyStrategy', 'dc1': 1, 'dc2': 1}"

// twoDCs is a private cluster of one node in dc1 and one in dc2, and a
// keyspace with cqlseq's schema replicated in both.
type twoDCs struct {
	c        *cassandra.Cluster
	keyspace string
}

// startTwoDCs starts the cluster, stopped at cleanup (its paused nodes
// resumed first).
func startTwoDCs(t *testing.T) *twoDCs {
	t.Helper()
	o := cassandra.Options{Datacenters: []int{1, 1}, Heap: "768m", StartTimeout: 3 * time.Minute}
	c := itest.StartCluster(t, o, 2, 8*time.Minute)
	t.Cleanup(func() {
		for i := range c.Nodes {
			_ = cassandra.ResumeNode(c, i+1) // a node a failed test left paused
		}
	})
	require.Equal(t, []string{dc1, dc2}, []string{c.Datacenter(node1), c.Datacenter(node2)})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := cql.Connect(ctx, cql.Options{Hosts: c.Hosts(), LocalDC: dc1, Timeout: 30 * time.Second, ConnectTimeout: 10 * time.Second})
	require.NoError(t, err)
	defer s.Close()
	seen := map[string]string{}
	for _, h := range s.GetHosts() {
		seen[h.ConnectAddress().String()] = h.DataCenter()
	}
	require.Equal(t, map[string]string{"127.0.0.1": dc1, "127.0.0.2": dc2}, seen, "the driver's view of the data centres")
	ks := itest.UniqueName("cqlseq_dc_")
	_, err = schema.Apply(ctx, s, schema.Options{Keyspace: ks, Replication: replication, Engine: schema.EngineCassandra, CreateKeyspace: true})
	require.NoError(t, err)
	return &twoDCs{c: c, keyspace: ks}
}

// open opens a Store on the keyspace, closed at cleanup: a session whose
// only contact point is dc's node, dc its LocalDC, with consistencies
// cons and serial (0: storage/cql's defaults, LOCAL_QUORUM and
// LOCAL_SERIAL).
func (d *twoDCs) open(t testing.TB, dc string, cons, serial gocql.Consistency) *cql.Store {
	t.Helper()
	host := d.c.Nodes[node1-1].Host
	if dc == dc2 {
		host = d.c.Nodes[node2-1].Host
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := cql.Open(ctx, cql.Options{
		Hosts: []string{host}, Keyspace: d.keyspace, LocalDC: dc,
		Consistency: cons, SerialConsistency: serial,
		Timeout: 5 * time.Second, ConnectTimeout: 10 * time.Second,
		Logger: appparttest.Quiet(),
	})
	require.NoError(t, err, "cql.Open in %s", dc)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func (d *twoDCs) pause(t *testing.T, node int) time.Time {
	t.Helper()
	require.NoError(t, cassandra.PauseNode(d.c, node))
	return time.Now()
}

func (d *twoDCs) resume(t *testing.T, node int) time.Time {
	t.Helper()
	require.NoError(t, cassandra.ResumeNode(d.c, node))
	return time.Now()
}

// lose kills node (SIGKILL): its data centre is lost, never restarted.
func (d *twoDCs) lose(t *testing.T, node int) time.Time {
	t.Helper()
	require.NoError(t, cassandra.KillNode(d.c, node))
	return time.Now()
}

// TestLocalQuorumLosesAcknowledgedWrites runs storage/cql's defaults
// (LOCAL_QUORUM, LOCAL_SERIAL) on two data centres: LocalDC keeps a
// session's calls in its data centre, and an owner whose peer data centre
// is unreachable keeps acknowledging commands that only its own data
// centre holds, lost with it.
func TestLocalQuorumLosesAcknowledgedWrites(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, ignore) }) // runs last: after the cluster has stopped
	d := startTwoDCs(t)
	if !t.Run("LocalDC dc2 is served by dc2 alone", func(t *testing.T) { localDCServesAlone(t, d) }) {
		return
	}
	t.Run("dc1 lost after acknowledging alone", func(t *testing.T) { localQuorumLoses(t, d) })
}

// localDCServesAlone: with dc1's node paused, a session with LocalDC dc2
// writes, reads and runs a lightweight transaction at LOCAL_QUORUM and
// LOCAL_SERIAL, while a session with LocalDC dc1 fails: each sends its
// calls to its own data centre only.
func localDCServesAlone(t *testing.T, d *twoDCs) {
	st1 := d.open(t, dc1, 0, 0)
	pKey, cCol := []byte("dcloss-localdc"), []byte("c")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, st1.Put(ctx, pKey, cCol, []byte("both up")))

	d.pause(t, node1)
	st2 := d.open(t, dc2, 0, 0)
	require.NoError(t, st2.Put(ctx, pKey, cCol, []byte("dc1 paused")), "a write in dc2 with dc1 paused")
	v, ok, err := st2.Get(ctx, pKey, cCol)
	require.NoError(t, err, "a read in dc2 with dc1 paused")
	require.True(t, ok)
	require.Equal(t, "dc1 paused", string(v))
	applied, err := st2.InsertIfNotExists(ctx, pKey, []byte("lwt"), []byte("v"), 0)
	require.NoError(t, err, "a LOCAL_SERIAL transaction in dc2 with dc1 paused")
	require.True(t, applied)
	err = st1.Put(ctx, pKey, cCol, []byte("dc1's session"))
	require.Error(t, err, "dc1's session wrote with its only node paused")
	t.Logf("dc1 paused: dc2's session writes, reads and settles an LWT; dc1's: %v", err)

	d.resume(t, node1)
	require.NoError(t, cassandra.WaitRing(ctx, d.c, 3*time.Minute))
}

// localQuorumLoses: an owner in dc1 at LOCAL_QUORUM and LOCAL_SERIAL
// acknowledges commands while dc2's node is paused; dc1 is then lost and
// dc2 resumed. An owner in dc2 finds the PLog without the commands
// acknowledged during the pause and hands their offsets and numbers out
// again: the hazard docs/operations.md describes.
func localQuorumLoses(t *testing.T, d *twoDCs) {
	st1 := d.open(t, dc1, 0, 0)
	p1 := appparttest.Open(t, appparttest.Options(st1, part, plog.ModeFenced))
	w1 := itest.RunWorker("dc1", p1, part)
	defer w1.Stop()
	w1.WaitAcks(t, 20, time.Minute, "20 commands acknowledged with both data centres up")

	// Until dc1 holds dc2 down, it sends dc2 its writes, which a paused
	// node's kernel still takes into its socket buffers, to be applied on
	// the resume; afterwards it keeps them as hints, lost with dc1.
	paused := d.pause(t, node2)
	heldDown := d.waitHeldDown(t, node1, 2*time.Minute)
	before := w1.Acked()
	w1.WaitAcks(t, 50, 2*time.Minute, "50 commands acknowledged in dc1 alone")
	w1.Stop()
	require.NoError(t, p1.Close())
	calls1, acked1 := w1.Snapshot()
	afterHeldDown := len(acked1) - before

	lost := d.lose(t, node1)
	d.resume(t, node2)
	st2 := d.open(t, dc2, 0, 0)
	p2 := appparttest.Open(t, appparttest.Options(st2, part, plog.ModeFenced))
	w2 := itest.RunWorker("dc2", p2, part)
	defer w2.Stop()
	w2.WaitAcks(t, 50, 2*time.Minute, "50 commands acknowledged in dc2 after dc1's loss")
	w2.Stop()
	require.NoError(t, p2.Close())
	_, acked2 := w2.Snapshot()
	takeover := w2.FirstAckAfter(time.Time{}).Sub(lost)

	r := checkAcks(t, st2, append(acked1, acked2...))
	lost1, lost2 := checkAcks(t, st2, acked1).Count(plogcheck.Lost), checkAcks(t, st2, acked2).Count(plogcheck.Lost)
	t.Logf("LOCAL_QUORUM/LOCAL_SERIAL: dc1 acknowledged %d commands, %d of them with dc2 paused, %d after dc1 held dc2 down (%.1f s after the pause; %.1f s of acknowledgements); calls %v; dc2 acknowledged %d, the first %.1f s after dc1's loss",
		len(acked1), len(acked1)-w1.AckedBefore(paused), afterHeldDown, heldDown.Sub(paused).Seconds(), lost.Sub(heldDown).Seconds(),
		itest.ErrorClasses(calls1), len(acked2), takeover.Seconds())
	t.Logf("after the loss of dc1: %d acknowledged commands lost (%d of dc1's, %d of dc2's), %d acknowledged twice (an offset or a number handed out again), findings %v",
		r.Count(plogcheck.Lost), lost1, lost2, r.Count(plogcheck.Duplicate), r.ByKind)
	require.Positive(t, lost1, "dc1 acknowledged commands at LOCAL_QUORUM that dc2 does not hold: the documented hazard")
	require.LessOrEqual(t, lost1, uint64(len(acked1)-w1.AckedBefore(paused)), "only commands dc1 acknowledged while dc2 was paused may be lost")
}

// waitHeldDown waits, up to limit, until node holds its peer down: a read
// at consistency ALL of a table replicated on both nodes, with node as its
// only coordinator, is refused as unavailable (not timed out). It returns
// when.
func (d *twoDCs) waitHeldDown(t *testing.T, node int, limit time.Duration) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	s, err := cql.Connect(ctx, cql.Options{Hosts: []string{d.c.Nodes[node-1].Host}, DisableInitialHostLookup: true,
		Timeout: 10 * time.Second, ConnectTimeout: 10 * time.Second, DisableHealth: true})
	require.NoError(t, err)
	defer s.Close()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		err := s.Query("SELECT * FROM system_traces.sessions LIMIT 1").WithContext(ctx).Consistency(gocql.All).Exec()
		var ue *gocql.RequestErrUnavailable
		if errors.As(err, &ue) {
			return time.Now()
		}
		select {
		case <-ctx.Done():
			t.Fatalf("node %d does not hold its peer down within %v: %v", node, limit, err)
		case <-tick.C:
		}
	}
}

// TestEachQuorumKeepsAcknowledgedWrites runs an owner in dc1 at
// EACH_QUORUM and SERIAL: it acknowledges nothing while dc2's node is
// paused, and after dc1's loss an owner in dc2, switched to LOCAL_QUORUM
// and LOCAL_SERIAL (SERIAL needs both data centres' replicas, one of which
// is gone), finds every acknowledged command and hands no number out
// twice: the recovery procedure of docs/operations.md.
func TestEachQuorumKeepsAcknowledgedWrites(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, ignore) }) // runs last: after the cluster has stopped
	d := startTwoDCs(t)

	st1 := d.open(t, dc1, gocql.EachQuorum, gocql.Serial)
	p1 := appparttest.Open(t, appparttest.Options(st1, part, plog.ModeFenced))
	w1 := itest.RunWorker("dc1", p1, part)
	defer w1.Stop()
	w1.WaitAcks(t, 20, time.Minute, "20 commands acknowledged with both data centres up")

	// A paused process answers nothing: no command begun after the pause
	// can be acknowledged before the resume.
	const pauseFor = 15 * time.Second
	paused := d.pause(t, node2)
	time.Sleep(pauseFor)
	resumed := d.resume(t, node2)
	w1.WaitAcks(t, 20, 3*time.Minute, "20 commands acknowledged after dc2's resume")
	w1.Stop()
	require.NoError(t, p1.Close())
	calls1, acked1 := w1.Snapshot()
	var inPause []itest.Call
	ackedInPause := 0
	for _, c := range calls1 {
		if c.Began.After(paused) && c.Ended.Before(resumed) {
			inPause = append(inPause, c)
			if c.Err == nil {
				ackedInPause++
			}
		}
	}
	t.Logf("EACH_QUORUM/SERIAL with dc2 paused %v: calls %v; first acknowledgement after the resume %.1f s after it",
		pauseFor, itest.ErrorClasses(inPause), w1.FirstAckAfter(resumed).Sub(resumed).Seconds())
	if ackedInPause > 0 { // not fatal: the losses below are checked all the same
		t.Errorf("%d commands begun after dc2's only node was paused were acknowledged before its resume", ackedInPause)
	}
	require.NotEmpty(t, inPause, "the owner kept trying during the pause")

	lost := d.lose(t, node1)
	st2 := d.open(t, dc2, gocql.LocalQuorum, gocql.LocalSerial)
	p2 := appparttest.Open(t, appparttest.Options(st2, part, plog.ModeFenced))
	require.Greater(t, p2.Epoch(), p1.Epoch())
	w2 := itest.RunWorker("dc2", p2, part)
	defer w2.Stop()
	w2.WaitAcks(t, 50, 2*time.Minute, "50 commands acknowledged in dc2 after dc1's loss")
	w2.Stop()
	require.NoError(t, p2.Close())
	_, acked2 := w2.Snapshot()

	r := checkAcks(t, st2, append(acked1, acked2...))
	t.Logf("EACH_QUORUM/SERIAL: dc1 acknowledged %d commands (calls %v); dc2 (LOCAL_QUORUM/LOCAL_SERIAL after the loss) acknowledged %d, the first %.1f s after dc1's loss",
		len(acked1), itest.ErrorClasses(calls1), len(acked2), w2.FirstAckAfter(time.Time{}).Sub(lost).Seconds())
	t.Logf("after the loss of dc1: %d acknowledged commands lost, %d acknowledged twice, findings %v",
		r.Count(plogcheck.Lost), r.Count(plogcheck.Duplicate), r.ByKind)
	for _, f := range r.Listed {
		t.Logf("  %s", f)
	}
	require.Zero(t, r.Count(plogcheck.Lost), "acknowledged commands lost with dc1")
	require.Zero(t, r.Count(plogcheck.Duplicate), "numbers handed out twice")
	require.Zero(t, r.Problems, "findings")
	pr := checkPLog(t, st2)
	require.Zero(t, pr.Problems, "dc2's PLog: %v", pr.Listed)
}

// checkAcks checks the acknowledged commands against the PLog st reads,
// record rows included (plogcheck.Acks), and returns the report.
func checkAcks(t *testing.T, st storage.Storage, acked []appparttest.Acked) *plogcheck.AckReport {
	t.Helper()
	rd, err := plog.NewReader(st, plog.ReaderOptions{})
	require.NoError(t, err)
	log := &plogcheck.AckLog{Acks: make([]plogcheck.Ack, len(acked))}
	for i, a := range acked {
		ack := plogcheck.Ack{Line: i + 1, Partition: part, Offset: a.Result.Offset, WSID: a.Cmd.WSID, Payload: []byte(a.Payload)}
		for j, id := range a.Cmd.Seqs {
			ack.Numbers = append(ack.Numbers, plog.SeqNumber{SeqID: id, Number: a.Result.Numbers[j]})
		}
		log.Acks[i] = ack
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := plogcheck.Acks(ctx, rd, log, plogcheck.AckOptions{RecordSeqs: []isequencer.SeqID{appparttest.SeqRecordID}, Records: st})
	require.NoError(t, err)
	return r
}

// checkPLog checks the partition's PLog alone (numbers issued twice or
// going back).
func checkPLog(t *testing.T, st storage.Storage) *plogcheck.PartitionReport {
	t.Helper()
	rd, err := plog.NewReader(st, plog.ReaderOptions{})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := plogcheck.Partition(ctx, rd, part, plogcheck.PartitionOptions{})
	require.NoError(t, err)
	return r
}
