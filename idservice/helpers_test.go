package idservice_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cqlseq/cqlseq/idservice"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/mem"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// server is a Service served on a loopback port by Serve.
type server struct {
	svc    *idservice.Service
	url    string
	client *http.Client
	token  string // sent as the bearer token when not empty
	stop   context.CancelFunc
	served chan error // Serve's result
	closed bool
}

// testOptions are Options for tests: fast probes, logs discarded.
func testOptions(st storage.Storage) idservice.Options {
	return idservice.Options{Store: st, ProbeInterval: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}
}

// start serves o (over TLS with tlsConf) until the test ends.
func start(t *testing.T, o idservice.Options, tlsConf *tls.Config) *server {
	t.Helper()
	if o.Store == nil {
		o.Store = mem.New(mem.Options{})
	}
	svc, err := idservice.New(context.Background(), o)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	s := &server{svc: svc, url: "http://" + ln.Addr().String(), stop: cancel, served: make(chan error, 1),
		client: &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}}
	if tlsConf != nil {
		s.url = "https://" + ln.Addr().String()
	}
	go func() { s.served <- svc.Serve(ctx, ln, tlsConf) }()
	t.Cleanup(func() { s.shutdown(t) })
	return s
}

// shutdown stops serving and closes the Service (idempotent).
func (s *server) shutdown(t *testing.T) error {
	if s.closed {
		return nil
	}
	s.closed = true
	s.stop()
	err := <-s.served
	require.NoError(t, s.svc.Close())
	s.client.CloseIdleConnections()
	return err
}

// response is an answer read whole.
type response struct {
	status int
	header http.Header
	body   string
}

// errBody is the API's error body.
type errBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (r response) err(t *testing.T) errBody {
	t.Helper()
	var e errBody
	require.NoError(t, json.Unmarshal([]byte(r.body), &e), "body %q", r.body)
	return e
}

// do sends a request with s's token; body may be nil.
func (s *server) do(t *testing.T, method, path string, body []byte) response {
	t.Helper()
	r, err := s.try(method, path, body, s.token)
	require.NoError(t, err)
	return r
}

func (s *server) try(method, path string, body []byte, token string) (response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		return response{}, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := s.client.Do(req)
	if err != nil {
		return response{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: string(b)}, err
}

// create creates a sequence (the token must allow it) and checks the
// answer is 201 or 200.
func (s *server) create(t *testing.T, def string) {
	t.Helper()
	r := s.do(t, http.MethodPost, "/v1/sequences", []byte(def))
	require.Contains(t, []int{http.StatusCreated, http.StatusOK}, r.status, "create %s: %s", def, r.body)
}

// ids takes IDs from a next route and returns them.
func (s *server) ids(t *testing.T, path string) []int64 {
	t.Helper()
	r := s.do(t, http.MethodPost, path, nil)
	require.Equal(t, http.StatusOK, r.status, "%s: %s", path, r.body)
	var b struct {
		IDs []int64 `json:"ids"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.body), &b))
	return b.IDs
}

// tokenFile is a token file with one token of each scope.
const (
	issueToken = "issue-token-0123456789"
	adminToken = "admin-token-0123456789"
	tokenFile  = "# scope token\nissue " + issueToken + "\n\nadmin " + adminToken + "\n"
)

func tokens(t *testing.T) *idservice.Tokens {
	t.Helper()
	tk, err := idservice.ParseTokens(strings.NewReader(tokenFile))
	require.NoError(t, err)
	return tk
}

func jsonUnmarshal(body string, v any) error { return json.Unmarshal([]byte(body), v) }
