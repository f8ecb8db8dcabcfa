package grayfailure

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/gocql/gocql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/integration/itest"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/cql"
)

// TestFirstUseOfAStatementDoesNotWaitForASilentHost: gocql fetches a
// statement's routing information with a PREPARE on the statement's first
// use, sent to the first up host of its list whatever the host policy says,
// and the statement waits for it. cql.Open fetches it for every statement.
// With that host paused right after Open, each kind of call reaches its
// first attempt at once; without the fetch in Open, each waited out a
// request timeout there first (1 s for a read, 4 s for a conditional write).
func TestFirstUseOfAStatementDoesNotWaitForASilentHost(t *testing.T) {
	c := cluster(t)
	cfg, err := cql.ClusterConfig(cql.Options{Hosts: itest.Hosts()})
	require.NoError(t, err)
	rec := &attemptStarts{q: cfg.QueryObserver, b: cfg.BatchObserver}
	cfg.QueryObserver, cfg.BatchObserver = rec, rec
	s, err := cfg.CreateSession()
	require.NoError(t, err)
	t.Cleanup(s.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := cql.Open(ctx, cql.Options{Session: s, Keyspace: itest.Keyspace(), HedgeDelay: 50 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })

	node := firstListedNode(t, s, c.Hosts())
	pause(t, c, node)
	t.Logf("paused node %d, the first up host of the session's list", node)

	p := []byte("first-use-" + time.Now().Format("150405.000000"))
	k := func(b byte) []byte { return []byte{b} }
	calls := []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"Get", func(ctx context.Context) error { _, _, err := st.Get(ctx, p, k(1)); return err }},
		{"GetBatch", func(ctx context.Context) error {
			return st.GetBatch(ctx, p, []storage.GetItem{{CCols: k(1)}, {CCols: k(2)}})
		}},
		{"Read", func(ctx context.Context) error {
			return st.Read(ctx, p, k(1), k(9), func(_, _ []byte) error { return nil })
		}},
		{"QueryTTL", func(ctx context.Context) error { _, _, err := st.QueryTTL(ctx, p, k(1)); return err }},
		{"Put", func(ctx context.Context) error { return st.Put(ctx, p, k(1), k(1)) }},
		{"InsertIfNotExists", func(ctx context.Context) error {
			_, err := st.InsertIfNotExists(ctx, p, k(2), k(1), time.Minute)
			return err
		}},
		{"CompareAndSwap with TTL", func(ctx context.Context) error {
			_, err := st.CompareAndSwap(ctx, p, k(2), k(1), k(2), time.Minute)
			return err
		}},
		{"CompareAndSwap", func(ctx context.Context) error {
			_, err := st.CompareAndSwap(ctx, p, k(1), k(1), k(2), 0)
			return err
		}},
		{"ApplyBatchIf", func(ctx context.Context) error {
			_, err := st.ApplyBatchIf(ctx, p, []storage.Condition{{CCols: k(3)}, {CCols: k(1), Expected: k(2)}},
				[]storage.Row{{PKey: p, CCols: k(3), Value: k(3)}, {PKey: p, CCols: k(1), Value: k(3)}})
			return err
		}},
		{"CompareAndDelete", func(ctx context.Context) error {
			_, err := st.CompareAndDelete(ctx, p, k(3), k(3))
			return err
		}},
	}
	for _, call := range calls {
		begin := time.Now()
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := call.call(cctx)
		ccancel()
		first, ok := rec.firstSince(begin)
		require.True(t, ok, "%s: no attempt observed (err %v)", call.name, err)
		wait := first.Sub(begin)
		t.Logf("%s: first attempt %v after the call began, call took %v, err %v",
			call.name, wait.Round(time.Millisecond), time.Since(begin).Round(time.Millisecond), err)
		// Without the fetch in Open this is at least the request timeout
		// of the statement (1 s or 4 s); a busy machine adds milliseconds.
		assert.Less(t, wait, 500*time.Millisecond, "%s waited before its first attempt", call.name)
	}
}

// firstListedNode returns the 1-based index in hosts of the first up host of
// s's list, where gocql sends the PREPARE that fetches routing information.
func firstListedNode(t *testing.T, s *gocql.Session, hosts []string) int {
	t.Helper()
	for _, h := range s.GetHosts() {
		if !h.IsUp() {
			continue
		}
		for i, hp := range hosts {
			if host, _, err := net.SplitHostPort(hp); err == nil && host == h.ConnectAddress().String() {
				return i + 1
			}
		}
		t.Fatalf("the session's first up host %v is not one of %v", h.ConnectAddress(), hosts)
	}
	t.Fatal("the session lists no host up")
	return 0
}

// attemptStarts records the start of every attempt the session reports and
// passes each report on to the health-aware observers.
type attemptStarts struct {
	q gocql.QueryObserver
	b gocql.BatchObserver

	mu     sync.Mutex
	starts []time.Time
}

func (a *attemptStarts) add(start time.Time) {
	a.mu.Lock()
	a.starts = append(a.starts, start)
	a.mu.Unlock()
}

func (a *attemptStarts) ObserveQuery(ctx context.Context, q gocql.ObservedQuery) {
	a.add(q.Start)
	a.q.ObserveQuery(ctx, q)
}

func (a *attemptStarts) ObserveBatch(ctx context.Context, b gocql.ObservedBatch) {
	a.add(b.Start)
	a.b.ObserveBatch(ctx, b)
}

// firstSince returns the earliest attempt start at or after t.
func (a *attemptStarts) firstSince(t time.Time) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var first time.Time
	for _, s := range a.starts {
		if !s.Before(t) && (first.IsZero() || s.Before(first)) {
			first = s
		}
	}
	return first, !first.IsZero()
}
