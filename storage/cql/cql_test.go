package cql

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gocql/gocql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cqlseq/cqlseq/storage"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestOptionsDefaultsAndValidate(t *testing.T) {
	o := Options{Hosts: []string{"h:9042"}, Keyspace: "ks"}
	o.EnsureDefaults()
	require.NoError(t, o.Validate())
	assert.Equal(t, "values", o.Table)
	assert.Equal(t, gocql.LocalQuorum, o.Consistency)
	assert.Equal(t, gocql.LocalSerial, o.SerialConsistency)
	assert.Equal(t, 5*time.Second, o.Timeout)
	assert.Equal(t, 5*time.Second, o.ConnectTimeout)
	assert.Equal(t, 1000, o.PageSize)
	assert.Equal(t, 2, o.NumConns)
	assert.NotNil(t, o.Logger)

	bad := Options{
		Keyspace: "ks; DROP", Table: "1t", Consistency: gocql.Serial, SerialConsistency: gocql.Quorum,
		Timeout: -1, PageSize: -1, Password: "p", Hosts: []string{""},
	}
	bad.EnsureDefaults()
	err := bad.Validate()
	require.ErrorIs(t, err, storage.ErrInvalidArgument)
	for _, w := range []string{"keyspace name", "table name", "empty host", "Password without Username", "Consistency SERIAL", "SerialConsistency QUORUM", "negative Timeout", "negative PageSize"} {
		assert.Contains(t, err.Error(), w, "every problem at once")
	}

	huge := Options{Hosts: []string{"h"}, Keyspace: "ks", PageSize: 1 << 40}
	huge.EnsureDefaults()
	err = huge.Validate()
	require.ErrorIs(t, err, storage.ErrInvalidArgument, "a page size that would not fit in memory is refused (issue 20 item 4)")
	assert.ErrorContains(t, err, "PageSize 1099511627776 above 65536")
	huge.PageSize = MaxPageSize
	require.NoError(t, huge.Validate())

	noHosts := Options{Keyspace: "ks"}
	noHosts.EnsureDefaults()
	assert.ErrorContains(t, noHosts.Validate(), "no Hosts and no Session")

	withSession := Options{Keyspace: "ks", Session: &gocql.Session{}, Hosts: []string{"h"}, NumConns: 3}
	withSession.EnsureDefaults()
	assert.ErrorContains(t, withSession.Validate(), "belong to the caller's session")
}

func TestOpenRejectsBadOptionsBeforeConnecting(t *testing.T) {
	// An address nothing listens on would fail only after a dial: a name
	// error must come first.
	start := time.Now()
	_, err := Open(context.Background(), Options{Hosts: []string{"192.0.2.1:9042"}, Keyspace: "no-such keyspace"})
	require.ErrorIs(t, err, storage.ErrInvalidArgument)
	assert.Less(t, time.Since(start), time.Second)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = Open(ctx, Options{Hosts: []string{"192.0.2.1:9042"}, Keyspace: "ks"})
	assert.ErrorIs(t, err, context.Canceled)
}

func TestStatements(t *testing.T) {
	st := newStatements("ks", "values", true)
	assert.Equal(t, "SELECT c_col, value FROM ks.values WHERE p_key = ? AND c_col >= ? AND c_col < ?", st.read[3])
	assert.Equal(t, "SELECT p_key, c_col, value FROM ks.values WHERE p_key IN ? AND c_col >= ?", st.readIn[1])
	assert.Equal(t, "INSERT INTO ks.values (p_key, c_col, value, w) VALUES (?, ?, ?, ?) IF NOT EXISTS USING TTL ?", st.putTTLIfNotExists)
	assert.Equal(t, "UPDATE ks.values USING TTL ? SET value = ?, w = ? WHERE p_key = ? AND c_col = ? IF value = ?", st.casUpdate)
	assert.Equal(t, "INSERT INTO ks.values (p_key, c_col, value) VALUES (?, ?, ?) USING TIMESTAMP ?", st.putAt)
	assert.Equal(t, "SELECT c_col, value, w FROM ks.values WHERE p_key = ? AND c_col IN ?", st.getInW)
	for _, s := range st.all() {
		assert.Contains(t, s, " ks.values ")
		assert.NotContains(t, s, "'", "values are bound, never spelled: %s", s)
	}
	// all (whose routing information Open fetches) names every statement.
	var n int
	v := reflect.ValueOf(st)
	for i := range v.NumField() {
		switch f := v.Field(i); f.Kind() {
		case reflect.String:
			n++
		case reflect.Bool: // writeIDs
		case reflect.Array:
			n += f.Len()
		}
	}
	assert.Len(t, slices.Compact(slices.Sorted(slices.Values(st.all()))), n)
}

func rows(p string, kv ...string) []storage.Row {
	var out []storage.Row
	for i := 0; i < len(kv); i += 2 {
		out = append(out, storage.Row{PKey: []byte(p), CCols: []byte(kv[i]), Value: []byte(kv[i+1])})
	}
	return out
}

func TestChunkRows(t *testing.T) {
	in := append(rows("a", "1", "x", "2", "y"), rows("b", "1", "z")...)
	in = append(in, rows("a", "1", "X", "3", "w")...)
	got := chunkRows(in, 100, 1<<20)
	require.Len(t, got, 2)
	assert.Equal(t, rows("a", "1", "X", "2", "y", "3", "w"), got[0], "the last write of a key wins, in place")
	assert.Equal(t, rows("b", "1", "z"), got[1])

	var many []storage.Row
	for i := range 250 {
		many = append(many, storage.Row{PKey: []byte("p"), CCols: fmt.Append(nil, i), Value: []byte("v")})
	}
	sizes := func(cs [][]storage.Row) (out []int) {
		for _, c := range cs {
			out = append(out, len(c))
		}
		return out
	}
	assert.Equal(t, []int{100, 100, 50}, sizes(chunkRows(many, 100, 1<<20)), "by rows")
	big := rows("p", "k1", strings.Repeat("x", 40), "k2", strings.Repeat("x", 40), "k3", strings.Repeat("x", 200))
	assert.Equal(t, []int{2, 1}, sizes(chunkRows(big, 100, 100)), "by bytes; an oversized row goes alone")
	assert.Empty(t, chunkRows(nil, 100, 100))
}

func TestRunBounded(t *testing.T) {
	var running, peak atomic.Int32
	var done atomic.Int32
	err := runBounded(context.Background(), 3, 20, func(ctx context.Context, i int) error {
		n := running.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(time.Millisecond) // let workers overlap; not synchronisation
		running.Add(-1)
		done.Add(1)
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, int32(20), done.Load())
	assert.LessOrEqual(t, peak.Load(), int32(3))

	boom := errors.New("boom")
	var calls atomic.Int32
	err = runBounded(context.Background(), 2, 1000, func(ctx context.Context, i int) error {
		calls.Add(1)
		if i == 1 {
			return boom
		}
		<-ctx.Done() // the others wait until the failure cancels them
		return ctx.Err()
	})
	assert.ErrorIs(t, err, boom)
	assert.Less(t, calls.Load(), int32(10), "no new calls after the first error")

	ctx, cancel := context.WithCancel(context.Background())
	err = runBounded(ctx, 2, 1000, func(context.Context, int) error { cancel(); return nil })
	assert.ErrorIs(t, err, context.Canceled, "a cancelled caller is reported even when the calls succeeded")
}

func TestPlanBatchIf(t *testing.T) {
	p := []byte("p")
	plan, err := planBatchIf(p,
		[]storage.Condition{{CCols: []byte("new")}, {CCols: []byte("fence"), Expected: []byte{7}}, {CCols: []byte("gone")}, {CCols: []byte("upd"), Expected: []byte("o")}, {CCols: []byte("new")}},
		append(rows("p", "new", "1", "plain", "2", "upd", "n"), rows("p", "plain", "3")...))
	require.NoError(t, err)
	require.False(t, plan.never)
	var kinds []stmtKind
	for _, e := range plan.entries {
		kinds = append(kinds, e.kind)
	}
	assert.Equal(t, []stmtKind{kindInsertIfNotExists, kindPut, kindUpdateIf, kindUpdateIf, kindCondAbsent}, kinds)
	assert.Equal(t, []any{p, []byte("plain"), []byte("3")}, plan.entries[1].args, "last row wins")
	assert.Equal(t, []any{[]byte("n"), p, []byte("upd"), []byte("o")}, plan.entries[2].args)
	assert.Equal(t, []any{[]byte{7}, p, []byte("fence"), []byte{7}}, plan.entries[3].args, "a value condition on an unwritten row writes the value back")
	assert.Equal(t, []any{p, []byte("gone")}, plan.entries[4].args)

	plan, err = planBatchIf(p, []storage.Condition{{CCols: []byte("c")}, {CCols: []byte("c"), Expected: []byte{1}}}, nil)
	require.NoError(t, err)
	assert.True(t, plan.never, "contradicting conditions never hold")
	plan, err = planBatchIf(p, []storage.Condition{{CCols: []byte("c"), Expected: []byte{1}}, {CCols: []byte("c"), Expected: []byte{2}}}, nil)
	require.NoError(t, err)
	assert.True(t, plan.never)

	_, err = planBatchIf(p, nil, rows("q", "c", "v"))
	assert.ErrorIs(t, err, storage.ErrInvalidArgument)

	plan, err = planBatchIf(p, []storage.Condition{{CCols: []byte("c"), Expected: []byte{}}}, []storage.Row{{PKey: p, CCols: []byte("d")}})
	require.NoError(t, err)
	assert.Equal(t, []any{p, []byte("d"), []byte{}}, plan.entries[0].args, "a nil value is bound as an empty blob, never null")
	assert.Equal(t, kindUpdateIf, plan.entries[1].kind, "an empty Expected is a value condition")
}

func TestProven(t *testing.T) {
	absent := &state{}
	val := func(s string) *state { return &state{true, []byte(s)} }
	me, other := newWriteID(), newWriteID()
	mine := func(v string) written { return written{[]byte(v), me} }
	tests := []struct {
		name    string
		effects []effect
		rows    map[string]written
		want    bool
	}{
		{"insert seen", []effect{{[]byte("k"), *val("me"), absent}}, map[string]written{"k": mine("me")}, true},
		{"insert: another value", []effect{{[]byte("k"), *val("me"), absent}}, map[string]written{"k": {[]byte("you"), other}}, false},
		{"insert: the same value by a competitor", []effect{{[]byte("k"), *val("me"), absent}}, map[string]written{"k": {[]byte("me"), other}}, false},
		{"insert: still absent", []effect{{[]byte("k"), *val("me"), absent}}, map[string]written{}, false},
		{"cas seen", []effect{{[]byte("k"), *val("b"), val("a")}}, map[string]written{"k": mine("b")}, true},
		{"cas: a competitor's identical swap", []effect{{[]byte("k"), *val("b"), val("a")}}, map[string]written{"k": {[]byte("b"), other}}, false},
		{"cas: old value", []effect{{[]byte("k"), *val("b"), val("a")}}, map[string]written{"k": {[]byte("a"), nil}}, false},
		{"cas onto the same value (a renewal) seen", []effect{{[]byte("k"), *val("a"), val("a")}}, map[string]written{"k": mine("a")}, true},
		{"renewal: an earlier writer's row", []effect{{[]byte("k"), *val("a"), val("a")}}, map[string]written{"k": {[]byte("a"), other}}, false},
		{"delete: absence proves nothing (another deleter, a TTL)", []effect{{[]byte("k"), state{}, val("a")}}, map[string]written{}, false},
		{"delete: still there", []effect{{[]byte("k"), state{}, val("a")}}, map[string]written{"k": mine("a")}, false},
		{"batch all seen", []effect{{[]byte("e"), *val("1"), absent}, {[]byte("f"), *val("7"), val("7")}, {[]byte("x"), *val("2"), nil}, {[]byte("g"), state{}, absent}},
			map[string]written{"e": mine("1"), "f": mine("7"), "x": mine("2")}, true},
		{"batch: a row required absent exists", []effect{{[]byte("e"), *val("1"), absent}, {[]byte("g"), state{}, absent}},
			map[string]written{"e": mine("1"), "g": mine("?")}, false},
		{"batch one missing", []effect{{[]byte("e"), *val("1"), absent}, {[]byte("x"), *val("2"), nil}},
			map[string]written{"e": mine("1")}, false},
		{"empty value is a value", []effect{{[]byte("k"), state{true, []byte{}}, absent}}, map[string]written{"k": {[]byte{}, me}}, true},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, proven(tt.effects, tt.rows, me), tt.name)
		if tt.want {
			assert.True(t, provable(tt.effects), "%s: proven, so provable", tt.name)
		}
	}
	assert.False(t, provable([]effect{{[]byte("k"), state{}, val("a")}}), "a delete is never provable")
	assert.NotEqual(t, me, other, "write IDs are unique")
	assert.Len(t, me, 16)
}

func TestWithID(t *testing.T) {
	s := &Store{stmt: newStatements("ks", "values", true)}
	id := []byte("id")
	assert.Equal(t, []any{"p", "c", "v", id, 5}, s.withID(id, 3, "p", "c", "v", 5), "an insert binds w after the value")
	assert.Equal(t, []any{"v", id, "p", "c", "o"}, s.withID(id, 1, "v", "p", "c", "o"), "an update binds w after the value")
	legacy := &Store{stmt: newStatements("ks", "values", false)}
	assert.Equal(t, []any{"p", "c", "v"}, legacy.withID(id, 3, "p", "c", "v"), "a table without w binds none")
	assert.NotContains(t, legacy.stmt.insertIfNotExists, " w")
}

func TestErrorClasses(t *testing.T) {
	unavail := []error{
		&gocql.RequestErrUnavailable{}, &gocql.RequestErrWriteTimeout{}, &gocql.RequestErrReadTimeout{},
		&gocql.RequestErrCASWriteUnknown{}, gocql.ErrNoConnections, gocql.ErrTimeoutNoResponse,
		fmt.Errorf("x: %w", gocql.ErrConnectionClosed), gocql.ErrNoConnectionsStarted,
	}
	for _, err := range unavail {
		assert.True(t, unavailable(err), "%T %v", err, err)
	}
	for _, err := range []error{errors.New("syntax"), &gocql.RequestErrAlreadyExists{}, gocql.ErrNotFound} {
		assert.False(t, unavailable(err), "%T %v", err, err)
	}
	assert.True(t, outcomeUnknown(&gocql.RequestErrCASWriteUnknown{}))
	assert.True(t, outcomeUnknown(fmt.Errorf("w: %w", &gocql.RequestErrWriteTimeout{WriteType: "CAS"})))
	assert.False(t, outcomeUnknown(&gocql.RequestErrUnavailable{}), "unavailable is raised before anything is written")
	assert.False(t, outcomeUnknown(context.Canceled), "a request cancelled before it was sent")
	assert.False(t, outcomeUnknown(&gocql.QueryError{}), "not potentially executed")
}

func TestFail(t *testing.T) {
	s := &Store{o: Options{Timeout: time.Second}}
	bg := context.Background()
	expired, cancel := context.WithTimeout(bg, -time.Second)
	defer cancel()
	cancelled, cancel2 := context.WithCancel(bg)
	cancel2()

	assert.ErrorIs(t, s.fail(bg, bg, "get", gocql.ErrSessionClosed), storage.ErrClosed)
	err := s.fail(cancelled, cancelled, "get", errors.New("x"))
	assert.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, storage.ErrUnavailable)
	err = s.fail(bg, expired, "get", context.DeadlineExceeded)
	assert.ErrorIs(t, err, storage.ErrUnavailable, "the per-query timeout")
	assert.Contains(t, err.Error(), "no answer within 1s")
	assert.ErrorIs(t, s.fail(bg, bg, "put", &gocql.RequestErrUnavailable{}), storage.ErrUnavailable)
	err = s.fail(bg, bg, "put", errors.New("bad"))
	assert.NotErrorIs(t, err, storage.ErrUnavailable)
	assert.Equal(t, "cql: put: bad", err.Error())
	s.closed.Store(true)
	assert.ErrorIs(t, s.fail(bg, bg, "get", errors.New("x")), storage.ErrClosed)
}

// serverErr is a server error frame as scylladb/gocql returns it for the
// codes it has no type for (bad credentials, unauthorized): its internal
// ErrorFrame, which has GetCode.
type serverErr struct {
	code int
	msg  string
}

func (e serverErr) GetCode() int  { return e.code }
func (e serverErr) Error() string { return e.msg }

// upstreamErr is the same error as upstream gocql's RequestError.
type upstreamErr struct{ serverErr }

func (e upstreamErr) Code() int       { return e.code }
func (e upstreamErr) Message() string { return e.msg }

// TestRefusedIsNotUnavailable: issue 20 item 9. A wrong password, missing
// credentials, a missing permission and a failed TLS handshake were all
// storage.ErrUnavailable ("unable to discover protocol version"), which a
// caller retries forever; each now has its own sentinel, and none is
// ErrUnavailable. The error shapes are gocql's, wrapped as its session
// initialisation wraps them.
func TestRefusedIsNotUnavailable(t *testing.T) {
	initErr := func(err error) error {
		return fmt.Errorf("gocql: unable to create session: unable to connect to the cluster, last error: %w",
			fmt.Errorf("unable to discover protocol version: %w\n", err))
	}
	for _, tt := range []struct {
		name string
		err  error
		werr error
	}{
		{"wrong password", serverErr{gocql.ErrCodeCredentials, "Provided username and/or password are incorrect"}, storage.ErrAuthentication},
		{"missing credentials", errors.New(`authentication required (using "org.apache.cassandra.auth.PasswordAuthenticator")`), storage.ErrAuthentication},
		{"unknown CA", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, storage.ErrTLS},
		{"wrong host name", x509.HostnameError{Host: "h"}, storage.ErrTLS},
		{"server alert (client certificate refused)", tls.AlertError(42), storage.ErrTLS},
		{"plain server", tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, storage.ErrTLS},
		{"wrong password, upstream gocql", upstreamErr{serverErr{gocql.ErrCodeCredentials, "bad"}}, storage.ErrAuthentication},
		// Session initialisation flattens the handshake's error into text
		// (seen against a TLS-only Cassandra 5.0.8 with another CA).
		{"unknown CA, as text", errors.New("tls: failed to verify certificate: x509: certificate signed by unknown authority"), storage.ErrTLS},
		{"wrong password, as text", errors.New("Provided username cassandra and/or password are incorrect"), storage.ErrAuthentication},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := connectErr("h:9042", true, initErr(tt.err))
			require.ErrorIs(t, err, tt.werr)
			assert.NotErrorIs(t, err, storage.ErrUnavailable)
			assert.True(t, strings.HasPrefix(err.Error(), "cql: connecting to h:9042: "+tt.werr.Error()+": "), err.Error())
		})
	}

	bg := context.Background()
	s := &Store{o: Options{Timeout: time.Second}}
	err := s.fail(bg, bg, "put", serverErr{gocql.ErrCodeUnauthorized, "User bench has no MODIFY permission on <table cqlseq.values> or any of its parents"})
	require.ErrorIs(t, err, storage.ErrAuthorization)
	assert.NotErrorIs(t, err, storage.ErrUnavailable)
	assert.Contains(t, err.Error(), "no MODIFY permission")
	assert.ErrorIs(t, s.fail(bg, bg, "get", serverErr{gocql.ErrCodeCredentials, "bad credentials"}), storage.ErrAuthentication)

	// A TLS-only node resets a plain connection: unavailable, with a hint.
	reset := initErr(&net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)})
	err = connectErr("h:9042", false, reset)
	require.ErrorIs(t, err, storage.ErrUnavailable)
	assert.Contains(t, err.Error(), "the node may require TLS")
	assert.NotContains(t, connectErr("h:9042", true, reset).Error(), "may require TLS", "no hint when TLS is on")
	assert.NotContains(t, connectErr("h:9042", false, initErr(gocql.ErrNoConnections)).Error(), "may require TLS")
	flat := initErr(errors.New("read tcp 127.0.0.1:37492->127.0.0.1:44855: read: connection reset by peer"))
	assert.Contains(t, connectErr("h:9042", false, flat).Error(), "the node may require TLS", "also when the reset is text only")
}
