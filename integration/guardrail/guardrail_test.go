// Package guardrail starts a private Cassandra with password
// authentication whose guardrails refuse client timestamps far in the
// future, as a DBA may configure them, and checks that cqlseq says so at
// once for a role the guardrails apply to (not a superuser): cql.Open and
// cqlseq migrate fail with cql.ErrTimestampsRefused, naming the setting,
// while a superuser, whom Cassandra's guardrails exempt, is not refused.
package guardrail

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/gocql/gocql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/integration/itest"
	"github.com/cqlseq/cqlseq/schema"
	"github.com/cqlseq/cqlseq/storage/cql"
	"github.com/cqlseq/cqlseq/testenv/cassandra"
)

func TestMain(m *testing.M) { os.Exit(itest.MainLocal(m)) }

// guardrails refuse every write timestamp more than a day ahead and warn
// from an hour ahead.
const guardrails = "maximum_timestamp_fail_threshold: 1d\nmaximum_timestamp_warn_threshold: 1h\n"

const (
	appRole     = "cqlseq_app"
	appPassword = "app-password-7f3c9a"
)

func TestTimestampGuardrailIsDetected(t *testing.T) {
	inst := itest.StartNode(t, cassandra.Options{Secure: true, Heap: "512m", StartTimeout: 6 * time.Minute, ExtraYAML: guardrails}, 8*time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	conn := func(user, password string) cql.Options {
		return cql.Options{Hosts: []string{inst.Host}, DisableInitialHostLookup: true, Username: user, Password: password,
			TLS: caConfig(t, inst.CAFile), Timeout: 30 * time.Second, ConnectTimeout: 10 * time.Second}
	}
	super, err := cql.Connect(ctx, conn(cassandra.Superuser, cassandra.SuperuserPassword))
	require.NoError(t, err)
	defer super.Close()
	ks := itest.UniqueName("cqlseq_gr_")
	_, err = schema.Apply(ctx, super, schema.Options{Keyspace: ks, Replication: schema.DefaultReplication, Engine: schema.EngineCassandra, CreateKeyspace: true})
	require.NoError(t, err)
	for _, stmt := range []string{
		"CREATE ROLE " + appRole + " WITH PASSWORD = '" + appPassword + "' AND LOGIN = true",
		"GRANT ALL PERMISSIONS ON KEYSPACE " + ks + " TO " + appRole,
		"GRANT CREATE ON ALL KEYSPACES TO " + appRole,
	} {
		require.NoError(t, super.Query(stmt).WithContext(ctx).Exec(), stmt)
	}
	app, err := cql.Connect(ctx, conn(appRole, appPassword))
	require.NoError(t, err)
	defer app.Close()

	// The premise: the guardrail refuses the role's write at cqlseq's
	// timestamps, not one at a wall-clock timestamp, and not the
	// superuser's.
	write := func(s *gocql.Session, ts int64) error {
		q := s.Query("INSERT INTO "+ks+".values (p_key, c_col, value) VALUES (?, ?, ?)", []byte("p"), []byte("c"), []byte("v"))
		if ts != 0 {
			q = s.Query("INSERT INTO "+ks+".values (p_key, c_col, value) VALUES (?, ?, ?) USING TIMESTAMP ?", []byte("p"), []byte("c"), []byte("v"), ts)
		}
		return q.WithContext(ctx).Exec()
	}
	err = write(app, 1<<62+1)
	require.Error(t, err, "the role's write at 2^62 + 1")
	assert.Contains(t, err.Error(), "maximum_timestamp")
	require.NoError(t, write(app, 0), "the role's write at a wall-clock timestamp")
	require.NoError(t, write(super, 1<<62+1), "guardrails exempt a superuser")

	_, err = cql.CheckTimestamps(ctx, app, ks, cql.DefaultTable)
	require.True(t, errors.Is(err, cql.ErrTimestampsRefused), "CheckTimestamps as the role: %v", err)
	assert.Contains(t, err.Error(), "maximum_timestamp_fail_threshold")
	_, err = cql.CheckTimestamps(ctx, super, ks, cql.DefaultTable)
	require.NoError(t, err, "CheckTimestamps as the superuser")

	open := conn(appRole, appPassword)
	open.Keyspace = ks
	st, err := cql.Open(ctx, open)
	if err == nil {
		_ = st.Close()
	}
	require.True(t, errors.Is(err, cql.ErrTimestampsRefused), "cql.Open as the role: %v", err)
	open.SkipTimestampProbe = true
	st, err = cql.Open(ctx, open)
	require.NoError(t, err, "cql.Open as the role, only to read")
	require.NoError(t, st.Close())
	open = conn(cassandra.Superuser, cassandra.SuperuserPassword)
	open.Keyspace = ks
	st, err = cql.Open(ctx, open)
	require.NoError(t, err, "cql.Open as the superuser")
	require.NoError(t, st.Close())

	r := itest.ExecCLI(t, "migrate", "--hosts", inst.Host, "--host-lookup=false", "--keyspace", itest.UniqueName("cqlseq_gr_"),
		"--engine", "cassandra", "--username", appRole, "--password", appPassword, "--tls-ca", inst.CAFile)
	t.Logf("cqlseq migrate as the role -> %d\n%s", r.Code, r.Stderr)
	assert.NotZero(t, r.Code, "cqlseq migrate as the role")
	assert.Contains(t, r.Stderr, "refuses the write timestamps cqlseq uses")
	assert.Contains(t, r.Stderr, "maximum_timestamp_fail_threshold")
	assert.NotContains(t, r.Output(), appPassword)
}

func caConfig(t *testing.T, path string) *tls.Config {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(b))
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}
