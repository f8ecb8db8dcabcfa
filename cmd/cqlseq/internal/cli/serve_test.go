package cli

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
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
	} {
		r := runCLI(t, args...)
		assert.Equal(t, ExitUsage, r.code, "%v: %s", args, r.stderr)
		requireOneLine(t, r)
	}
	r := runCLI(t, "serve", "--token-file", filepath.Join(t.TempDir(), "missing"), "--dir", t.TempDir(), "--listen", freeAddr(t))
	assert.Equal(t, ExitFailure, r.code)
	assert.Contains(t, r.stderr, "token file")
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
