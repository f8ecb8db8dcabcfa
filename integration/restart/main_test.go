// Package restart crashes and restarts a Cassandra node under a fenced
// owner and checks what its lease and its partition do. It never touches the
// shared test cluster's node: each test starts a private single-node
// Cassandra with testenv/cassandra (crash-safe: a crash loses no
// acknowledged write and no schema change), crashes it with
// cassandra.Restart and stops it at cleanup. TestMain still goes through itest.Main, which keeps
// the harness's rules (CI=true needs a cluster).
package restart

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cqlseq/cqlseq/apppart"
	"github.com/cqlseq/cqlseq/apppart/appparttest"
	"github.com/cqlseq/cqlseq/integration/itest"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/schema"
	"github.com/cqlseq/cqlseq/storage/cql"
	"github.com/cqlseq/cqlseq/testenv/cassandra"
)

func TestMain(m *testing.M) { os.Exit(itest.Main(m)) }

// node is a private Cassandra and the keyspace with cqlseq's schema on it.
type node struct {
	inst     *cassandra.Instance
	opts     cassandra.Options
	keyspace string
}

// startNode starts a private Cassandra, stopped at cleanup. Without Java
// (or Maven and no cached jars) it skips, unless CI=true.
func startNode(t *testing.T) *node {
	t.Helper()
	o := cassandra.Options{CrashSafe: true, StartTimeout: 2 * time.Minute}
	inst := itest.StartNode(t, o, 5*time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	s, err := cql.Connect(ctx, cql.Options{
		Hosts: []string{inst.Host}, DisableInitialHostLookup: true,
		Timeout: 30 * time.Second, ConnectTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatalf("connecting to the private Cassandra: %v", err)
	}
	defer s.Close()
	ks := itest.UniqueName("cqlseq_rs_")
	if _, err := schema.Apply(ctx, s, schema.Options{
		// One node: replication factor 1 whatever CQLSEQ_CQL_RF says.
		Keyspace: ks, Replication: schema.DefaultReplication, Engine: schema.EngineCassandra, CreateKeyspace: true,
	}); err != nil {
		t.Fatalf("schema on the private Cassandra: %v", err)
	}
	return &node{inst: inst, opts: o, keyspace: ks}
}

// restart crashes the node, keeps it down for down and starts it again;
// it returns when CQL answers, with the time of the crash (the SIGKILL).
func (n *node) restart(t *testing.T, down time.Duration) (crashed time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	o := n.opts
	o.Log = func(format string, _ ...any) {
		if strings.HasPrefix(format, "crashed ") {
			crashed = time.Now()
		}
	}
	if err := cassandra.Restart(ctx, n.inst, o, down); err != nil {
		t.Fatalf("restarting the private Cassandra: %v", err)
	}
	if crashed.IsZero() {
		t.Fatal("Restart found no running node to crash")
	}
	return crashed
}

// open opens a Store (its own session) on the node's keyspace, closed at
// cleanup.
func (n *node) open(t testing.TB) *cql.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := cql.Open(ctx, cql.Options{
		Hosts:                    []string{n.inst.Host},
		Keyspace:                 n.keyspace,
		DisableInitialHostLookup: true,
		Timeout:                  5 * time.Second,
		Logger:                   appparttest.Quiet(),
	})
	if err != nil {
		t.Fatalf("cql.Open: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// call is one Do: when it began and ended, and its error.
type call struct {
	began, ended time.Time
	err          error
}

// worker runs commands on one partition in a loop until stopped, and
// records every call and every acknowledged command.
type worker struct {
	name   string
	p      *apppart.Partition
	part   isequencer.PartitionID
	cancel context.CancelFunc
	done   chan struct{}
	mu     struct {
		sync.Mutex
		seq     int
		calls   []call
		acked   []appparttest.Acked
		waiters []ackWaiter
	}
}

type ackWaiter struct {
	n  int
	ch chan struct{}
}

// pause is the worker's pace after a failed call (the partition is busy
// or the storage down): it keeps the loop from spinning.
const pause = 20 * time.Millisecond

// runWorker starts a worker on p; stop it with stop.
func runWorker(name string, p *apppart.Partition, part isequencer.PartitionID) *worker {
	ctx, cancel := context.WithCancel(context.Background())
	w := &worker{name: name, p: p, part: part, cancel: cancel, done: make(chan struct{})}
	go w.run(ctx)
	return w
}

func (w *worker) run(ctx context.Context) {
	defer close(w.done)
	for ctx.Err() == nil {
		w.mu.Lock()
		w.mu.seq++
		i := w.mu.seq
		w.mu.Unlock()
		cmd := appparttest.Cmd(appparttest.WS(w.part, 1+i%7))
		payload := fmt.Sprintf("%s-%d", w.name, i)
		cmd.Payload = []byte(payload)
		began := time.Now()
		r, err := w.p.Do(ctx, cmd)
		c := call{began: began, ended: time.Now(), err: err}
		w.mu.Lock()
		w.mu.calls = append(w.mu.calls, c)
		if err == nil {
			w.mu.acked = append(w.mu.acked, appparttest.Acked{Owner: w.name, Cmd: cmd, Result: r, Payload: payload})
			kept := w.mu.waiters[:0]
			for _, x := range w.mu.waiters {
				if len(w.mu.acked) >= x.n {
					close(x.ch)
				} else {
					kept = append(kept, x)
				}
			}
			w.mu.waiters = kept
		}
		w.mu.Unlock()
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(pause):
			}
		}
	}
}

// stop cancels the loop and waits for it.
func (w *worker) stop() {
	w.cancel()
	<-w.done
}

// acks returns a channel closed once n more commands than now have been
// acknowledged.
func (w *worker) acks(n int) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch := make(chan struct{})
	w.mu.waiters = append(w.mu.waiters, ackWaiter{n: len(w.mu.acked) + n, ch: ch})
	return ch
}

// snapshot returns copies of the calls and acknowledgements so far.
func (w *worker) snapshot() ([]call, []appparttest.Acked) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]call(nil), w.mu.calls...), append([]appparttest.Acked(nil), w.mu.acked...)
}

// waitAcks fails the test unless w acknowledges n more commands within
// limit; the failure names the classes of w's calls since the wait began
// and the last error, so that a stuck partition says why.
func (w *worker) waitAcks(t *testing.T, n int, limit time.Duration, what string) {
	t.Helper()
	since := time.Now()
	select {
	case <-w.acks(n):
	case <-time.After(limit):
		calls, _ := w.snapshot()
		var recent []call
		var last error
		for _, c := range calls {
			if c.began.After(since) {
				recent = append(recent, c)
				if c.err != nil {
					last = c.err
				}
			}
		}
		t.Fatalf("no %s within %v: calls %v, last error: %v", what, limit, errorClasses(recent), last)
	}
}

// wait fails the test unless ch is closed within limit.
func wait(t *testing.T, ch <-chan struct{}, limit time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(limit):
		t.Fatalf("no %s within %v", what, limit)
	}
}

// errorClasses counts calls by the apppart error they wrap.
func errorClasses(calls []call) map[string]int {
	m := map[string]int{}
	for _, c := range calls {
		switch {
		case c.err == nil:
			m["ok"]++
		case errors.Is(c.err, context.Canceled):
			m["cancelled"]++
		case errors.Is(c.err, apppart.ErrNotLeader):
			m["not-leader"]++
		case errors.Is(c.err, apppart.ErrBusy):
			m["busy"]++
		case errors.Is(c.err, apppart.ErrStopped):
			m["stopped"]++
		case errors.Is(c.err, apppart.ErrWrite):
			m["write"]++
		default:
			m["other"]++
		}
	}
	return m
}
