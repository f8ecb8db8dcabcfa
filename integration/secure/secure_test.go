// Package secure runs the cqlseq binary and storage/cql against a private
// single-node Cassandra started with password authentication, roles and
// client TLS only (testenv/cassandra Options.Secure: a keytool CA), as
// issue 20's security review did: a bench role without MODIFY permission, a
// wrong password, missing credentials, another CA, plain CQL, and the
// contradictory TLS flags. Each must end at once with one line that names
// its own class, and no password may reach any output.
//
// CQLSEQ_SECURE_STATE, if set, names the state file of a running secure
// node (cassandra-launcher up -secure) to use instead of starting one. The
// package does not use the shared test cluster (itest.MainLocal, not
// itest.Main).
package secure

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/integration/itest"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/cql"
	"github.com/cqlseq/cqlseq/testenv/cassandra"
)

func TestMain(m *testing.M) { os.Exit(itest.MainLocal(m)) }

// Secrets: none may appear in any output.
const (
	roPassword    = "ro-Secret-20-x7"
	wrongPassword = "wrong-Secret-20-q3"
)

// secureNode returns a running secure node: CQLSEQ_SECURE_STATE's, or a
// private one stopped at cleanup (skipped without Java, unless CI=true).
func secureNode(t *testing.T) *cassandra.Instance {
	t.Helper()
	if p := os.Getenv("CQLSEQ_SECURE_STATE"); p != "" {
		inst, err := cassandra.ReadState(p)
		require.NoError(t, err)
		require.True(t, inst.Secure, "%s: not a secure node", p)
		return inst
	}
	return itest.StartNode(t, cassandra.Options{Secure: true, Heap: "512m", StartTimeout: 6 * time.Minute}, 8*time.Minute)
}

func caConfig(t *testing.T, path string) *tls.Config {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(b))
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// otherCA writes a self-signed CA certificate that did not sign the node's.
func otherCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(20), Subject: pkix.Name{CommonName: "not the node's CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	p := filepath.Join(t.TempDir(), "other-ca.pem")
	require.NoError(t, os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	return p
}

// run runs the binary (itest.ExecCLI: a run itest.CLITimeout ends is a
// failure; bench is given an hour, only a stop ends it in time). No
// password may reach its output; the log shows those given as flags as ***.
func run(t *testing.T, args ...string) itest.CLIResult {
	t.Helper()
	r := itest.ExecCLI(t, args...)
	for _, secret := range []string{roPassword, wrongPassword} {
		require.NotContains(t, r.Output(), secret, "a password reached the output")
	}
	shown := strings.Join(args, " ")
	for _, secret := range []string{roPassword, wrongPassword, cassandra.SuperuserPassword} {
		shown = strings.ReplaceAll(shown, "--password "+secret, "--password ***")
	}
	t.Logf("cqlseq %s -> %d\n%s%s", shown, r.Code, r.Stdout, r.Stderr)
	return r
}

// oneLine returns stderr's one line ("cqlseq: ...").
func oneLine(t *testing.T, r itest.CLIResult) string {
	t.Helper()
	require.True(t, strings.HasPrefix(r.Stderr, "cqlseq: "), "stderr %q", r.Stderr)
	require.Equal(t, 1, strings.Count(r.Stderr, "\n"), "one line: %q", r.Stderr)
	return r.Stderr
}

func TestSecureNode(t *testing.T) {
	inst := secureNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ks := itest.UniqueName("cqlseq_sec_")
	host := []string{"--hosts", inst.Host, "--host-lookup=false"}
	super := append([]string{"--username", cassandra.Superuser, "--password", cassandra.SuperuserPassword, "--tls-ca", inst.CAFile}, host...)

	r := run(t, append([]string{"migrate", "--keyspace", ks}, super...)...)
	require.Equal(t, 0, r.Code, "migrate as the superuser over TLS")

	s, err := cql.Connect(ctx, cql.Options{Hosts: []string{inst.Host}, DisableInitialHostLookup: true, Username: cassandra.Superuser,
		Password: cassandra.SuperuserPassword, TLS: caConfig(t, inst.CAFile), Timeout: 30 * time.Second})
	require.NoError(t, err)
	defer s.Close()
	role := itest.UniqueName("ro_")
	require.NoError(t, s.Query("CREATE ROLE "+role+" WITH PASSWORD = '"+roPassword+"' AND LOGIN = true").WithContext(ctx).Exec())
	require.NoError(t, s.Query("GRANT SELECT ON KEYSPACE "+ks+" TO "+role).WithContext(ctx).Exec())
	t.Cleanup(func() {
		_ = s.Query("DROP KEYSPACE IF EXISTS " + ks).Exec()
		_ = s.Query("DROP ROLE IF EXISTS " + role).Exec()
	})

	t.Run("bench without MODIFY stops at once", func(t *testing.T) {
		r := run(t, append([]string{"bench", "--store", "cql", "--keyspace", ks, "--mode", "trust0", "--duration", "1h", "--partitions", "2",
			"--workspaces", "8", "--username", role, "--password", roPassword, "--tls-ca", inst.CAFile}, host...)...)
		assert.Equal(t, 1, r.Code)
		line := oneLine(t, r)
		assert.Contains(t, line, "storage: not authorized")
		assert.Contains(t, line, "MODIFY")
		assert.NotContains(t, line, "storage: unavailable")
	})
	t.Run("the library: Put as the read-only role", func(t *testing.T) {
		st, err := cql.Open(ctx, cql.Options{Hosts: []string{inst.Host}, DisableInitialHostLookup: true, Keyspace: ks,
			Username: role, Password: roPassword, TLS: caConfig(t, inst.CAFile), Timeout: 30 * time.Second})
		require.NoError(t, err)
		defer st.Close()
		_, _, err = st.Get(ctx, []byte("k"), []byte("c"))
		require.NoError(t, err, "SELECT is granted")
		err = st.Put(ctx, []byte("k"), []byte("c"), []byte("v"))
		require.ErrorIs(t, err, storage.ErrAuthorization)
		assert.NotErrorIs(t, err, storage.ErrUnavailable)
	})
	for _, tc := range []struct {
		name   string
		args   []string
		want   string
		sentry error
	}{
		{"wrong password", []string{"--username", role, "--password", wrongPassword, "--tls-ca", inst.CAFile}, "storage: authentication failed", storage.ErrAuthentication},
		{"missing credentials", []string{"--tls-ca", inst.CAFile}, "storage: authentication failed", storage.ErrAuthentication},
		{"another CA", []string{"--username", role, "--password", roPassword, "--tls-ca", otherCA(t)}, "storage: TLS handshake failed", storage.ErrTLS},
		{"plain CQL", []string{"--username", role, "--password", roPassword}, "the node may require TLS", storage.ErrUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, append(append([]string{"verify", "--store", "cql", "--keyspace", ks, "--partition", "0", "--timeout", "10s"}, tc.args...), host...)...)
			assert.Equal(t, 1, r.Code)
			line := oneLine(t, r)
			assert.Contains(t, line, tc.want)
			if tc.sentry != storage.ErrUnavailable {
				assert.NotContains(t, line, "storage: unavailable", "a retry cannot cure it")
			}
		})
	}
	t.Run("the library: wrong password is not unavailable", func(t *testing.T) {
		_, err := cql.Open(ctx, cql.Options{Hosts: []string{inst.Host}, DisableInitialHostLookup: true, Keyspace: ks,
			Username: role, Password: wrongPassword, TLS: caConfig(t, inst.CAFile), Timeout: 10 * time.Second})
		require.ErrorIs(t, err, storage.ErrAuthentication)
		assert.NotErrorIs(t, err, storage.ErrUnavailable)
		assert.NotContains(t, err.Error(), wrongPassword)
	})
	t.Run("--tls-ca with --tls-insecure", func(t *testing.T) {
		r := run(t, append([]string{"verify", "--store", "cql", "--keyspace", ks, "--partition", "0", "--tls-ca", inst.CAFile, "--tls-insecure"}, host...)...)
		assert.Equal(t, 2, r.Code)
		assert.Contains(t, oneLine(t, r), "--tls-ca and --tls-insecure are exclusive")
	})
}
