package cqlstore

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocql/gocql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cqlseq/cqlseq/integration/itest"
	"github.com/cqlseq/cqlseq/schema"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/cql"
	"github.com/cqlseq/cqlseq/testenv/leakcheck"
)

// silentServer accepts TCP connections and never answers, until the test
// ends; it returns its address.
func silentServer(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		_ = l.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return l.Addr().String()
}

func TestOpenUnreachable(t *testing.T) {
	// Registered first, so it runs after the server's cleanup: a failed Open
	// leaves no goroutine behind.
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, ignore) })
	refused := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := l.Addr().String()
		require.NoError(t, l.Close())
		return addr
	}()
	for name, host := range map[string]string{"refused": refused, "silent": silentServer(t)} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			_, err := cql.Open(context.Background(), cql.Options{Hosts: []string{host}, Keyspace: "ks", ConnectTimeout: time.Second})
			took := time.Since(start)
			require.Error(t, err)
			assert.ErrorIs(t, err, storage.ErrUnavailable)
			assert.Contains(t, err.Error(), "cql: connecting to "+host)
			assert.Less(t, took, 3*time.Second, "bounded by ConnectTimeout per attempt")
			t.Logf("after %v: %v", took.Round(time.Millisecond), err)

			start = time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			_, err = cql.Open(ctx, cql.Options{Hosts: []string{host}, Keyspace: "ks"})
			require.Error(t, err)
			assert.Less(t, time.Since(start), 2*time.Second, "the context's deadline bounds the default 5 s ConnectTimeout")
		})
	}
}

// TestInvalidNamesBeforeAnyQuery: names are checked before a statement is
// sent; a query observer on the caller's session counts what reaches it.
func TestInvalidNamesBeforeAnyQuery(t *testing.T) {
	var queries atomic.Int32
	cfg := itest.ClusterConfig(t)
	cfg.QueryObserver = observerFunc(func() { queries.Add(1) })
	s, err := cfg.CreateSession()
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	queries.Store(0)

	for _, ks := range []string{"", "bad-name", "ks; DROP KEYSPACE x", "1ks", "ks.values"} {
		_, err := cql.Open(ctx, cql.Options{Session: s, Keyspace: ks})
		assert.ErrorIs(t, err, storage.ErrInvalidArgument, "%q", ks)
		_, err = schema.Apply(ctx, s, schema.Options{Keyspace: ks, CreateKeyspace: true})
		assert.ErrorIs(t, err, schema.ErrInvalidOptions, "%q", ks)
	}
	_, err = cql.Open(ctx, cql.Options{Session: s, Keyspace: itest.Keyspace(), Table: "values; --"})
	assert.ErrorIs(t, err, storage.ErrInvalidArgument)
	assert.Zero(t, queries.Load(), "no query reached the cluster")

	_, err = cql.Open(ctx, cql.Options{Session: s, Keyspace: itest.UniqueName("nope_")})
	assert.ErrorContains(t, err, "does not exist", "a valid but missing keyspace is reported clearly")
	assert.NotZero(t, queries.Load(), "the observer sees queries")
}

type observerFunc func()

func (f observerFunc) ObserveQuery(context.Context, gocql.ObservedQuery) { f() }

// TestCancelledContext: a cancelled or expired context ends every call
// promptly with the context's error, before or while the query runs.
func TestCancelledContext(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	defer leakcheck.VerifyNone(t, ignore)
	st, err := cql.Open(context.Background(), options(itest.Keyspace()))
	require.NoError(t, err)
	defer st.Close()
	p := []byte(itest.UniqueName("cancel_"))
	rows := make([]storage.Row, 3000)
	for i := range rows {
		rows[i] = storage.Row{PKey: p, CCols: []byte{byte(i >> 8), byte(i)}, Value: make([]byte, 64)}
	}
	require.NoError(t, st.PutBatch(context.Background(), rows))

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	calls := map[string]func(ctx context.Context) error{
		"Get": func(ctx context.Context) error { _, _, err := st.Get(ctx, p, []byte{0, 1}); return err },
		"Put": func(ctx context.Context) error { return st.Put(ctx, p, []byte("x"), nil) },
		"Read": func(ctx context.Context) error {
			return st.Read(ctx, p, nil, nil, func(_, _ []byte) error { return nil })
		},
		"PutBatch": func(ctx context.Context) error {
			return st.PutBatch(ctx, rows)
		},
		"InsertIfNotExists": func(ctx context.Context) error {
			_, err := st.InsertIfNotExists(ctx, p, []byte("y"), nil, 0)
			return err
		},
		"ApplyBatchIf": func(ctx context.Context) error {
			_, err := st.ApplyBatchIf(ctx, p, []storage.Condition{{CCols: []byte("z")}}, rows[:1])
			return err
		},
	}
	for name, call := range calls {
		start := time.Now()
		err := call(cancelled)
		assert.ErrorIs(t, err, context.Canceled, name)
		assert.Less(t, time.Since(start), 100*time.Millisecond, name)
	}

	// Cancelled while reading: the callback cancels after the first row.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	start := time.Now()
	err = st.Read(ctx, p, nil, nil, func(_, _ []byte) error { n++; cancel(); return nil })
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, 1, n, "no callback after the cancellation")
	assert.Less(t, time.Since(start), 2*time.Second)

	// A deadline that expires while the query is in flight.
	for range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		start := time.Now()
		err := st.PutBatch(ctx, rows)
		cancel()
		if err == nil {
			continue // finished within the millisecond
		}
		assert.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
		assert.Less(t, time.Since(start), time.Second)
	}
}
