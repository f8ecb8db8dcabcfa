// Package restore runs the backup-and-restore procedure of
// docs/operations.md on a private Cassandra node: a cold copy of the
// node's data (its data, commit log and hints directories, taken while the
// node is down) is the backup; the restore puts the copy back and starts
// the node on it.
package restore

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cqlseq/cqlseq/apppart/appparttest"
	"github.com/cqlseq/cqlseq/integration/itest"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/cql"
	"github.com/cqlseq/cqlseq/testenv/cassandra"
	"github.com/cqlseq/cqlseq/testenv/leakcheck"
)

func TestMain(m *testing.M) { os.Exit(itest.MainLocal(m)) }

// nodeDirs are the directories of a node's state that a cold copy takes.
var nodeDirs = []string{"data", "commitlog", "hints", "saved_caches"}

// node is a private crash-safe Cassandra, the keyspace with cqlseq's
// schema on it, and the Store open on it (replaced after each start).
type node struct {
	inst     *cassandra.Instance
	opts     cassandra.Options
	keyspace string
	st       *cql.Store
}

// TestRestoreAndAdvanceCQL: appparttest.RestoreAndAdvance on the node, in
// trust0 and fenced mode (a partition each): commands, a cold copy of the
// node, more commands, the copy restored, apppart.Advance, commands; none
// after the restore repeats an offset or a number from before it.
func TestRestoreAndAdvanceCQL(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, ignore) }) // runs last: after the node has stopped
	n := startNode(t)
	backup := t.TempDir()
	for i, mode := range []plog.Mode{plog.ModeTrust0, plog.ModeFenced} {
		t.Run(mode.String(), func(t *testing.T) {
			began := time.Now()
			r := appparttest.RestoreAndAdvance(t, appparttest.RestoreEnv{
				Store:   func(testing.TB) storage.Storage { return n.st },
				Backup:  func(t testing.TB) { n.coldCopy(t, n.inst.Dir, backup) },
				Restore: func(t testing.TB) { n.coldCopy(t, backup, n.inst.Dir) },
			}, isequencer.PartitionID(10+i), mode)
			t.Logf("%d commands before the backup, %d lost with the restore, %d after advancing (gap at %d, next offset %d), in %.1f s",
				r.Before, r.Lost, r.After, r.Gap, r.Next, time.Since(began).Seconds())
		})
	}
}

func startNode(t *testing.T) *node {
	t.Helper()
	o := cassandra.Options{CrashSafe: true, StartTimeout: 2 * time.Minute}
	inst := itest.StartNode(t, o, 5*time.Minute)
	n := &node{inst: inst, opts: o, keyspace: itest.PrivateKeyspace(t, inst, "cqlseq_restore_")}
	n.open(t)
	t.Cleanup(func() { _ = n.st.Close() })
	return n
}

// open replaces the node's Store with a new one.
func (n *node) open(t testing.TB) {
	t.Helper()
	if n.st != nil {
		_ = n.st.Close()
	}
	n.st = itest.OpenPrivate(t, n.inst, n.keyspace, 10*time.Second)
}

// coldCopy stops the node (SIGKILL to its process group: a crash-safe
// node loses nothing acknowledged), replaces the state directories of to
// with those of from, and starts the node again on its own directory.
func (n *node) coldCopy(t testing.TB, from, to string) {
	t.Helper()
	_ = n.st.Close()
	if err := syscall.Kill(-n.inst.PID, syscall.SIGKILL); err != nil {
		t.Fatalf("stopping the node: %v", err)
	}
	for deadline := time.Now().Add(30 * time.Second); n.inst.Running(); {
		if time.Now().After(deadline) {
			t.Fatal("the node did not stop within 30 s of SIGKILL")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, d := range nodeDirs {
		if err := os.RemoveAll(filepath.Join(to, d)); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(from, d)); os.IsNotExist(err) {
			continue
		}
		// cp -a keeps the files as they are (sizes, sparse segments).
		if out, err := exec.Command("cp", "-a", filepath.Join(from, d), filepath.Join(to, d)).CombinedOutput(); err != nil {
			t.Fatalf("copying %s: %v\n%s", d, err, out)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := cassandra.Restart(ctx, n.inst, n.opts, 0); err != nil {
		t.Fatalf("starting the node again: %v", err)
	}
	n.open(t)
}
