package idservice_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/idservice"
	v1 "github.com/cqlseq/cqlseq/idservice/gen/idservicev1"
)

// TestTokenScopes: with a token file, the ID routes want an issue or an
// admin token, creating a sequence an admin token; a missing or unknown
// token is 401, a token without the scope 403; /healthz, /readyz and
// /metrics are open; Leaf's paths and monitor pages want an issue token as
// the ID routes do. A refused request takes no ID.
func TestTokenScopes(t *testing.T) {
	o := testOptions(nil)
	o.Tokens = tokens(t)
	s := start(t, o, nil)
	s.token = adminToken
	s.create(t, `{"name":"a"}`)

	create := func(name string) string { return `{"name":"` + name + `"}` }
	for _, c := range []struct {
		name          string
		method, path  string
		body          string
		token         string
		wstatus       int
		wcode         string
		wauthenticate bool
	}{
		{"next, no token", "POST", "/v1/sequences/a/next", "", "", 401, "unauthenticated", true},
		{"next, unknown token", "POST", "/v1/sequences/a/next", "", "wrong-token-0123456789", 401, "unauthenticated", true},
		{"next, a token's prefix", "POST", "/v1/sequences/a/next", "", issueToken[:10], 401, "unauthenticated", true},
		{"next, issue", "POST", "/v1/sequences/a/next", "", issueToken, 200, "", false},
		{"next, admin", "POST", "/v1/sequences/a/next", "", adminToken, 200, "", false},
		{"create, issue", "POST", "/v1/sequences", create("b"), issueToken, 403, "forbidden", false},
		{"create, no token", "POST", "/v1/sequences", create("b"), "", 401, "unauthenticated", true},
		{"create, admin", "POST", "/v1/sequences", create("c"), adminToken, 201, "", false},
		{"describe, issue", "GET", "/v1/sequences/a", "", issueToken, 200, "", false},
		{"timeshard, no token", "POST", "/v1/timeshard/53/next", "", "", 401, "unauthenticated", true},
		{"timeshard, issue", "POST", "/v1/timeshard/53/next", "", issueToken, 200, "", false},
		{"uuid, issue", "POST", "/v1/uuids", "", issueToken, 200, "", false},
		{"leaf, no token", "GET", "/api/segment/get/a", "", "", 401, "unauthenticated", true},
		{"leaf, issue", "GET", "/api/segment/get/a", "", issueToken, 200, "", false},
		{"leaf cache, no token", "GET", "/cache", "", "", 401, "unauthenticated", true},
		{"leaf db, unknown token", "POST", "/db/", "", "wrong-token-0123456789", 401, "unauthenticated", true},
		{"leaf decode, no token", "GET", "/decodeSnowflakeId?snowflakeId=1", "", "", 401, "unauthenticated", true},
		{"leaf cache, issue", "GET", "/cache", "", issueToken, 200, "", false},
		{"leaf db, issue", "GET", "/db", "", issueToken, 200, "", false},
		{"leaf decode, admin", "GET", "/decodeSnowflakeId?snowflakeId=1", "", adminToken, 200, "", false},
		{"bad count before the token", "POST", "/v1/sequences/a/next?count=0", "", "", 401, "unauthenticated", true},
		{"healthz", "GET", "/healthz", "", "", 200, "", false},
		{"readyz", "GET", "/readyz", "", "", 200, "", false},
		{"metrics", "GET", "/metrics", "", "", 200, "", false},
	} {
		var body []byte
		if c.body != "" {
			body = []byte(c.body)
		}
		r, err := s.try(c.method, c.path, body, c.token)
		require.NoError(t, err)
		if !assert.Equal(t, c.wstatus, r.status, "%s: %s", c.name, r.body) {
			continue
		}
		if c.wcode != "" {
			assert.Equal(t, c.wcode, r.err(t).Code, c.name)
		}
		assert.Equal(t, c.wauthenticate, r.header.Get("WWW-Authenticate") != "", c.name)
	}
	// Values 1 and 2 went to "next, issue" and "next, admin", 3 to "leaf,
	// issue": the refused requests took none.
	assert.Equal(t, []int64{4}, s.ids(t, "/v1/sequences/a/next"))
}

// TestParseTokens: the token file's format; every problem is reported by
// line and never shows the token.
func TestParseTokens(t *testing.T) {
	tk := tokens(t)
	assert.Equal(t, 1, tk.Count(idservice.ScopeIssue))
	assert.Equal(t, 1, tk.Count(idservice.ScopeAdmin))

	secret := "short-secret"
	_, err := idservice.ParseTokens(strings.NewReader("issue " + secret + "\nroot aaaaaaaaaaaaaaaaaaaa\nadmin\nissue " + issueToken + "\nadmin " + issueToken + "\n"))
	require.ErrorIs(t, err, idservice.ErrInvalidTokens)
	for _, w := range []string{"line 1: the token must be at least 16", `line 2: scope "root"`, "line 3: want", "line 5: the token is given twice"} {
		assert.ErrorContains(t, err, w)
	}
	assert.NotContains(t, err.Error(), secret)
	assert.NotContains(t, err.Error(), issueToken)

	_, err = idservice.ParseTokens(strings.NewReader("# nothing\n\n"))
	assert.ErrorContains(t, err, "no token")
}

// selfSigned returns a TLS certificate for 127.0.0.1 made for the test, and
// a pool that trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "cqlseq test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// TestTLS: over TLS a client that trusts the certificate gets IDs; a plain
// HTTP client gets no answer of the API.
func TestTLS(t *testing.T) {
	cert, pool := selfSigned(t)
	s := start(t, testOptions(nil), &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	s.client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	require.True(t, strings.HasPrefix(s.url, "https://"))
	assert.Len(t, s.ids(t, "/v1/timeshard/63/next?count=2"), 2)
	r := s.do(t, "GET", "/healthz", nil)
	assert.Equal(t, 200, r.status)

	plain := &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second}
	defer plain.CloseIdleConnections()
	res, err := plain.Get(strings.Replace(s.url, "https://", "http://", 1) + "/healthz")
	if err == nil {
		res.Body.Close()
		assert.Equal(t, http.StatusBadRequest, res.StatusCode, "Go's TLS server answers plain HTTP with 400")
	}

	untrusting := &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second}
	defer untrusting.CloseIdleConnections()
	_, err = untrusting.Get(s.url + "/healthz")
	assert.ErrorContains(t, err, "certificate", "an unknown authority is refused")
	t.Cleanup(func() { s.client.CloseIdleConnections() })
}

// TestBearerSchemeAnyCase: the auth scheme is case-insensitive (RFC 7235
// section 2.1) and may be followed by more than one space, over HTTP and
// over gRPC alike; a header without a token after the scheme, another
// scheme or a scheme glued to the token is still no token.
func TestBearerSchemeAnyCase(t *testing.T) {
	o := testOptions(nil)
	o.Tokens = tokens(t)
	s := start(t, o, nil)
	gc := grpcClient(t, s, nil)
	for _, c := range []struct {
		header string
		ok     bool
	}{
		{"Bearer " + issueToken, true},
		{"bearer " + issueToken, true},
		{"BEARER " + issueToken, true},
		{"bEaReR " + issueToken, true},
		{"Bearer   " + issueToken, true},
		{"bearer \t " + issueToken, true},
		{"Bearer", false},
		{"Bearer ", false},
		{"bearer    ", false},
		{"Bearer" + issueToken, false},
		{"Basic " + issueToken, false},
		{"Bearers " + issueToken, false},
		{"Bearer " + issueToken + " extra", false},
	} {
		req, err := http.NewRequest("POST", s.url+"/v1/uuids", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", c.header)
		res, err := s.client.Do(req)
		require.NoError(t, err)
		require.NoError(t, res.Body.Close())
		if c.ok {
			assert.Equal(t, http.StatusOK, res.StatusCode, "HTTP, Authorization: %q", c.header)
		} else {
			assert.Equal(t, http.StatusUnauthorized, res.StatusCode, "HTTP, Authorization: %q", c.header)
		}
		r := connect.NewRequest(&v1.NextUUIDsRequest{})
		r.Header().Set("Authorization", c.header)
		_, err = gc.NextUUIDs(t.Context(), r)
		if c.ok {
			assert.NoError(t, err, "gRPC, authorization: %q", c.header)
		} else {
			requireCode(t, err, connect.CodeUnauthenticated, "unauthenticated")
		}
	}
}
