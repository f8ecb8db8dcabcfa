package cli

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/elections"
	"github.com/cqlseq/cqlseq/storage/boltdb"
	"github.com/cqlseq/cqlseq/timeshard"
)

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// startServe runs `cqlseq serve args...` until the returned stop is called
// (as SIGTERM does: the context ends) and waits until /healthz answers.
func startServe(t *testing.T, addr string, args ...string) (stop func() result) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan result, 1)
	go func() { done <- runEnv(ctx, false, append([]string{"serve", "--listen", addr}, args...)...) }()
	client := &http.Client{Transport: &http.Transport{}, Timeout: time.Second}
	defer client.CloseIdleConnections()
	up := false
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		select {
		case r := <-done:
			cancel()
			t.Fatalf("serve ended early: %d %s", r.code, r.stderr)
		default:
		}
		res, err := client.Get("http://" + addr + "/healthz")
		if err == nil {
			res.Body.Close()
			up = true
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !up {
		cancel()
		t.Fatalf("serve did not answer: %s", (<-done).stderr)
	}
	var r *result
	stop = func() result {
		if r == nil {
			cancel()
			got := <-done
			r = &got
		}
		return *r
	}
	t.Cleanup(func() { stop() })
	return stop
}

func call(t *testing.T, method, url, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	res, err := client.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, string(b)
}

// TestServeWithTokens: serve on a bbolt directory with a token file
// creates a sequence (admin), hands out its IDs (issue) and Leaf's paths,
// never logs a token, and exits 0 on interruption; a restart on the same
// directory continues the sequence.
func TestServeWithTokens(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	const issue, admin = "issue-token-0123456789", "admin-token-0123456789"
	require.NoError(t, os.WriteFile(tokens, []byte("issue "+issue+"\nadmin "+admin+"\n"), 0o600))
	addr := freeAddr(t)
	base := "http://" + addr
	stop := startServe(t, addr, "--dir", dir, "--token-file", tokens)

	code, body := call(t, "POST", base+"/v1/sequences", issue, `{"name":"orders"}`)
	assert.Equal(t, 403, code, body)
	code, body = call(t, "POST", base+"/v1/sequences", admin, `{"name":"orders","chunk_size":10}`)
	require.Equal(t, 201, code, body)
	code, body = call(t, "POST", base+"/v1/sequences/orders/next?count=3", issue, "")
	require.Equal(t, 200, code, body)
	assert.JSONEq(t, `{"ids":[1,2,3]}`, body)
	code, body = call(t, "GET", base+"/api/segment/get/orders", issue, "")
	require.Equal(t, 200, code)
	assert.Equal(t, "4", body)
	code, _ = call(t, "GET", base+"/api/snowflake/get/orders", "", "")
	assert.Equal(t, 401, code)
	code, _ = call(t, "GET", base+"/readyz", "", "")
	assert.Equal(t, 200, code)

	r := stop()
	assert.Equal(t, ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stderr, "bearer tokens read")
	assert.Contains(t, r.stderr, "shutting down")
	assert.NotContains(t, r.stderr, issue)
	assert.NotContains(t, r.stderr, admin)
	assert.FileExists(t, filepath.Join(dir, boltFileName))

	stop = startServe(t, addr, "--dir", dir, "--token-file", tokens)
	code, body = call(t, "POST", base+"/v1/sequences/orders/next", issue, "")
	require.Equal(t, 200, code, body)
	assert.JSONEq(t, `{"ids":[11]}`, body, "a restart continues after the chunk the first run held")
	assert.Equal(t, ExitOK, stop().code)
}

// TestServeDefaultsToTheDataDir: without store flags serve keeps its bbolt
// file in the user's data directory, and says there is no authentication.
func TestServeDefaultsToTheDataDir(t *testing.T) {
	data := t.TempDir()
	t.Setenv("XDG_DATA_HOME", data)
	t.Setenv("CQLSEQ_CQL_HOSTS", "")
	addr := freeAddr(t)
	stop := startServe(t, addr)
	code, body := call(t, "POST", "http://"+addr+"/v1/timeshard/53/next", "", "")
	assert.Equal(t, 200, code, body)
	r := stop()
	assert.Equal(t, ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stderr, "no authentication")
	assert.FileExists(t, filepath.Join(data, "cqlseq", boltFileName))
}

// TestServeBadFlags are usage errors, before anything is opened.
func TestServeBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--http-cert", "c.pem"},
		{"serve", "--listen", "nope"},
		{"serve", "--lease", "1500ms"},
		{"serve", "--shutdown-timeout", "0s"},
		{"serve", "--lease-retry-max", "-1s"},
		{"serve", "--max-body", "0"},
		{"serve", "--dir", "x", "--hosts", "h"},
		{"serve", "--layout", "63"},
		{"serve", "--layout", "63=nope"},
		{"serve", "--layout", "53=leaf"},
		{"serve", "--layout", "63=epoch=2999-01-01T00:00:00Z"},
		{"serve", "--layout", "63=bits=41/10/11"},
		{"serve", "--layout", "63=leaf", "--layout", "63=cqlseq"},
		{"serve", "--leaf-listen", "nope"},
		{"serve", "--leaf-listen", "127.0.0.1:8080"},
	} {
		r := runCLI(t, args...)
		assert.Equal(t, ExitUsage, r.code, "%v: %s", args, r.stderr)
		requireOneLine(t, r)
	}
	r := runCLI(t, "serve", "--token-file", filepath.Join(t.TempDir(), "missing"), "--dir", t.TempDir(), "--listen", freeAddr(t))
	assert.Equal(t, ExitFailure, r.code)
	assert.Contains(t, r.stderr, "token file")
}

// TestServeLeafPresetAndListener (issue 52 items 1-3): --layout 63=leaf
// makes Leaf's snowflake IDs (Leaf's decoder dates them now), and
// --leaf-listen serves Leaf's paths without a token while the API keeps
// wanting one; a restart back to cqlseq's epoch is refused, since its IDs
// would sort before those already made.
func TestServeLeafPresetAndListener(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	const issue = "issue-token-0123456789"
	require.NoError(t, os.WriteFile(tokens, []byte("issue "+issue+"\n"), 0o600))
	addr, leafAddr := freeAddr(t), freeAddr(t)
	stop := startServe(t, addr, "--dir", dir, "--token-file", tokens, "--layout", "63=leaf", "--leaf-listen", leafAddr)

	before := time.Now().UnixMilli()
	code, body := call(t, "GET", "http://"+leafAddr+"/api/snowflake/get/order:id", "", "")
	require.Equal(t, 200, code, body)
	id, err := strconv.ParseInt(body, 10, 64)
	require.NoError(t, err)
	ms := id>>22 + 1288834974657 // Leaf's decoder
	assert.InDelta(t, before, ms, 2000, "Leaf's decoder dates the ID now")
	code, _ = call(t, "GET", "http://"+addr+"/api/snowflake/get/order:id", "", "")
	assert.Equal(t, 401, code, "the API keeps its tokens")
	code, _ = call(t, "POST", "http://"+leafAddr+"/v1/sequences", "", `{"name":"x"}`)
	assert.Equal(t, 404, code, "no sequence is created on the Leaf listener")
	code, body = call(t, "GET", "http://"+addr+"/v1/timeshard", issue, "")
	require.Equal(t, 200, code, body)
	assert.Contains(t, body, `"epoch":"2010-11-04T01:42:54.657Z"`)
	r := stop()
	assert.Equal(t, ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stderr, "without a token")

	r = runCLI(t, "serve", "--dir", dir, "--listen", freeAddr(t))
	assert.Equal(t, ExitFailure, r.code, r.stderr)
	assert.Contains(t, r.stderr, "layout change refused")
}

// TestServeStartsWithoutAFreeNodeID (issue 52, defect 8): 33 instances
// SIGKILLed on one --dir within the lease TTL leave every node ID of the
// 53-bit layout leased. The next serve starts anyway: sequences and the
// 63-bit layout are served, the 53-bit layout is answered 503
// no_node_lease, and /readyz is 200 "degraded" naming it.
func TestServeStartsWithoutAFreeNodeID(t *testing.T) {
	dir := t.TempDir()
	st, err := boltdb.Open(filepath.Join(dir, boltFileName), boltdb.Options{NoSync: true})
	require.NoError(t, err)
	// Leases as crashed holders leave them: taken, never released.
	ls, err := elections.NewTTLStorageKeyed(st, func(n uint32) []byte { return timeshard.NodePKey("cqlseq/53", n) })
	require.NoError(t, err)
	el, err := elections.New(ls, elections.Options{})
	require.NoError(t, err)
	for n := range timeshard.JS53Layout().Nodes() {
		_, err := el.Acquire(context.Background(), n, []byte("killed"), time.Minute)
		require.NoError(t, err)
		el.Abandon(n)
	}
	el.Cleanup()
	require.NoError(t, st.Close())

	addr := freeAddr(t)
	base := "http://" + addr
	stop := startServe(t, addr, "--dir", dir)
	code, body := call(t, "POST", base+"/v1/sequences", "", `{"name":"orders"}`)
	require.Equal(t, 201, code, body)
	code, body = call(t, "POST", base+"/v1/sequences/orders/next", "", "")
	assert.Equal(t, 200, code, body)
	code, body = call(t, "POST", base+"/v1/timeshard/63/next", "", "")
	assert.Equal(t, 200, code, body)
	code, body = call(t, "POST", base+"/v1/timeshard/53/next", "", "")
	assert.Equal(t, 503, code, body)
	assert.Contains(t, body, `"code":"no_node_lease"`)
	code, body = call(t, "GET", base+"/readyz", "", "")
	assert.Equal(t, 200, code, body)
	assert.Contains(t, body, `"status":"degraded"`)
	assert.Contains(t, body, `"waiting_layouts":["53"]`)
	r := stop()
	assert.Equal(t, ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stderr, "no free node ID")
}
