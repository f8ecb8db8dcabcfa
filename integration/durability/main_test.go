// Package durability measures what a Cassandra node's SIGKILL takes from
// cqlseq's acknowledged commands, by commit log mode. Each case starts a
// private single node with testenv/cassandra (replication factor 1: the
// node's commit log is the only copy), runs fenced commands on one
// partition, SIGKILLs the node mid-stream, restarts it and checks the
// acknowledged commands against what the node holds (plogcheck). It uses no
// shared test cluster (itest.MainLocal); without Java or cached jars it
// skips, unless CI=true.
package durability

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cqlseq/cqlseq/apppart"
	"github.com/cqlseq/cqlseq/apppart/appparttest"
	"github.com/cqlseq/cqlseq/integration/itest"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/storage/cql"
	"github.com/cqlseq/cqlseq/testenv/cassandra"
)

func TestMain(m *testing.M) { os.Exit(itest.MainLocal(m)) }

// node is a private Cassandra and the keyspace with cqlseq's schema on it.
type node struct {
	inst     *cassandra.Instance
	opts     cassandra.Options
	keyspace string
}

// startNode starts a private Cassandra with o, stopped at cleanup, and
// applies cqlseq's schema. A node that is not CrashSafe runs with
// cassandra.unsafesystem, whose schema changes a SIGKILL loses whatever the
// commit log mode: startNode stops it with SIGTERM (Cassandra drains,
// flushing every table) and starts it again, so that the schema is on disk
// before anything is killed.
func startNode(t *testing.T, o cassandra.Options) *node {
	t.Helper()
	o.StartTimeout = 3 * time.Minute
	inst := itest.StartNode(t, o, 5*time.Minute)
	n := &node{inst: inst, opts: o, keyspace: itest.PrivateKeyspace(t, inst, "cqlseq_du_")}
	if !o.CrashSafe {
		n.stopAndStart(t)
	}
	return n
}

// stopAndStart stops the node with SIGTERM, waits until its process has
// ended, and starts it again.
func (n *node) stopAndStart(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := syscall.Kill(-n.inst.PID, syscall.SIGTERM); err != nil {
		t.Fatalf("stopping the private Cassandra: %v", err)
	}
	deadline := time.Now().Add(time.Minute)
	for n.inst.Running() {
		if time.Now().After(deadline) {
			t.Fatal("the private Cassandra did not end within a minute of SIGTERM")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := cassandra.Restart(ctx, n.inst, n.opts, 0); err != nil {
		t.Fatalf("starting the private Cassandra again: %v", err)
	}
	t.Logf("schema flushed: stopped with SIGTERM and started again (CQL %.1f s after JVM start)", n.inst.StartupTime.Seconds())
}

// crash SIGKILLs the node, calls onCrash once the process has ended (the
// node is down until onCrash returns and down has passed), and starts the
// node again. It returns when CQL answers, with the time Restart was
// called and the time the process had ended.
func (n *node) crash(t *testing.T, down time.Duration, onCrash func()) (killing, crashed time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	o := n.opts
	o.Log = func(format string, _ ...any) {
		if strings.HasPrefix(format, "crashed ") && crashed.IsZero() {
			crashed = time.Now()
			onCrash()
		}
	}
	killing = time.Now()
	if err := cassandra.Restart(ctx, n.inst, o, down); err != nil {
		t.Fatalf("restarting the private Cassandra: %v", err)
	}
	if crashed.IsZero() {
		t.Fatal("Restart found no running node to crash")
	}
	return killing, crashed
}

// open opens a Store (its own session) on the node's keyspace. It is
// closed at cleanup at the latest; Close may be called before.
func (n *node) open(t testing.TB) *cql.Store {
	t.Helper()
	st := itest.OpenPrivate(t, n.inst, n.keyspace, 5*time.Second)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// ack is an acknowledged command and when Do returned it.
type ack struct {
	appparttest.Acked
	at time.Time
}

// load runs commands on one partition from several clients until stopped
// and records every acknowledged command.
type load struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     struct {
		sync.Mutex
		acked  []ack
		failed int
	}
}

// pause is a client's pace after a failed call: it keeps the loop from
// spinning while the node is down.
const pause = 20 * time.Millisecond

// workspaces is how many workspaces of the partition the clients use.
const workspaces = 7

// startLoad starts clients goroutines running commands on p, in the
// workspaces of partition part; stop them with stop.
func startLoad(p *apppart.Partition, part isequencer.PartitionID, clients int) *load {
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{cancel: cancel}
	for c := range clients {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.client(ctx, p, part, fmt.Sprintf("client%d", c))
		}()
	}
	return l
}

func (l *load) client(ctx context.Context, p *apppart.Partition, part isequencer.PartitionID, name string) {
	for i := 1; ctx.Err() == nil; i++ {
		cmd := appparttest.Cmd(appparttest.WS(part, 1+i%workspaces))
		payload := fmt.Sprintf("%s-%d", name, i)
		cmd.Payload = []byte(payload)
		r, err := p.Do(ctx, cmd)
		at := time.Now()
		l.mu.Lock()
		if err == nil {
			l.mu.acked = append(l.mu.acked, ack{appparttest.Acked{Owner: name, Cmd: cmd, Result: r, Payload: payload}, at})
		} else {
			l.mu.failed++
		}
		l.mu.Unlock()
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(pause):
			}
		}
	}
}

// stop cancels the clients and waits for them.
func (l *load) stop() {
	l.cancel()
	l.wg.Wait()
}

// snapshot returns a copy of the acknowledged commands so far and the
// number of failed calls.
func (l *load) snapshot() ([]ack, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]ack(nil), l.mu.acked...), l.mu.failed
}

// waitAcks fails the test unless n commands have been acknowledged within
// limit. It checks every 100 ms.
func (l *load) waitAcks(t *testing.T, n int, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		acked, failed := l.snapshot()
		if len(acked) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d commands acknowledged within %v, want %d (%d calls failed)", len(acked), limit, n, failed)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
