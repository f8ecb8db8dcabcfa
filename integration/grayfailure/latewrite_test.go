package grayfailure

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/gocql/gocql"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/integration/itest"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/cql"
	"github.com/cqlseq/cqlseq/vvmadapter"
)

// TestLateWriteFromAPausedCoordinatorLosesToANewerOne sends a plain write
// (a flush's number and next offset, an event) to a paused coordinator,
// so that it is executed only after the node resumes, long after a newer
// write of the same cells was acknowledged by the other two nodes. The late
// write is really applied (a marker row it carries appears), and it changes
// nothing: it carries the client timestamp taken when it was first sent,
// so no stale write lowers a number cell or the next offset or replaces an
// acknowledged event.
func TestLateWriteFromAPausedCoordinatorLosesToANewerOne(t *testing.T) {
	c := cluster(t)
	hosts := c.Hosts()
	stale := itest.OpenStore(t, func(o *cql.Options) {
		o.Hosts, o.DisableInitialHostLookup = hosts[1:2], true // node 2 only
		o.Timeout = 3 * time.Second
	})
	fresh := itest.OpenStore(t, func(o *cql.Options) {
		o.Hosts, o.DisableInitialHostLookup = []string{hosts[0], hosts[2]}, true // nodes 1 and 3
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	const app, ws, part = isequencer.ClusterAppID(7), isequencer.WSID(77), isequencer.PartitionID(5)
	off := isequencer.PLogOffset(1000 + time.Now().UnixNano()%100000) // fresh cells per run
	numKey, numCol := vvmadapter.WSKey(app, ws), vvmadapter.SeqCCols(isequencer.SeqID(1))
	offKey, offCol := vvmadapter.PartKey(app, part), vvmadapter.PartCCols(vvmadapter.PLogOffsetCC)
	evKey, evCol := plog.EventPKey(part, off), plog.EventCCols(off)
	markers := []storage.Row{
		{PKey: numKey, CCols: vvmadapter.SeqCCols(isequencer.SeqID(999)), Value: []byte("late")},
		{PKey: offKey, CCols: vvmadapter.PartCCols(999), Value: []byte("late")},
		{PKey: evKey, CCols: plog.EventCCols(off + 1), Value: []byte("late")},
	}

	// A running process has its statements prepared on node 2: without
	// this, only the PREPARE would wait in node 2's socket.
	warm := []storage.Row{
		{PKey: []byte("warm"), CCols: []byte{1}, Value: []byte{1}},
		{PKey: []byte("warm"), CCols: []byte{2}, Value: []byte{1}},
	}
	require.NoError(t, stale.PutBatch(ctx, warm))
	require.NoError(t, stale.PutBatch(ctx, warm[:1]))

	resume := pause(t, c, 2)
	late := append([]storage.Row{
		{PKey: numKey, CCols: numCol, Value: vvmadapter.EncodeU64(100)},
		{PKey: offKey, CCols: offCol, Value: vvmadapter.EncodeU64(uint64(off))},
		{PKey: evKey, CCols: evCol, Value: []byte("event never acknowledged")},
	}, markers...)
	err := stale.PutBatch(ctx, late)
	require.ErrorIs(t, err, storage.ErrUnavailable, "the paused coordinator does not answer")
	t.Logf("late write sent to the paused node: %v", err)

	newer := []storage.Row{
		{PKey: numKey, CCols: numCol, Value: vvmadapter.EncodeU64(200)},
		{PKey: offKey, CCols: offCol, Value: vvmadapter.EncodeU64(uint64(off) + 1)},
		{PKey: evKey, CCols: evCol, Value: []byte("acknowledged event")},
	}
	require.NoError(t, fresh.PutBatch(ctx, newer), "a quorum (nodes 1, 3) acknowledges the newer write")
	resume()

	// Wait until node 2 has executed the late write: its markers appear.
	// Read at ALL: the late write may have reached a single replica.
	s := itest.Session(t)
	get := func(r storage.Row) ([]byte, error) {
		var v []byte
		err := s.Query("SELECT value FROM "+itest.Keyspace()+"."+cql.DefaultTable+" WHERE p_key = ? AND c_col = ?", r.PKey, r.CCols).
			Consistency(gocql.All).WithContext(ctx).Scan(&v)
		return v, err
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		n := 0
		for _, m := range markers {
			if v, err := get(m); err == nil && bytes.Equal(v, m.Value) {
				n++
			}
		}
		if n == len(markers) {
			break
		}
		require.True(t, time.Now().Before(deadline), "the late write was not executed within 90 s of the resume (%d of %d markers)", n, len(markers))
		time.Sleep(200 * time.Millisecond)
	}

	for _, r := range newer {
		v, err := get(r)
		require.NoError(t, err)
		require.Equal(t, r.Value, v, "a late write replaced a newer, acknowledged value")
	}
}
