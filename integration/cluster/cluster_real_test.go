// Package cluster proves the test cluster is real.
package cluster

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/gocql/gocql"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/integration/itest"
)

func TestMain(m *testing.M) { os.Exit(itest.Main(m)) }

// TestClusterIsReal proves the cluster is a real CQL server with working
// lightweight transactions: an INSERT ... IF NOT EXISTS applies once and only
// once, its result is read by column name, and a SERIAL read sees the row.
func TestClusterIsReal(t *testing.T) {
	s := itest.Session(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var release, cluster string
	require.NoError(t, s.Query("SELECT release_version, cluster_name FROM system.local").WithContext(ctx).Scan(&release, &cluster))
	t.Logf("server release_version %s, cluster %q, engine %s, source %s", release, cluster, itest.Engine(), itest.Source())
	require.NotEmpty(t, release)

	ks := itest.Keyspace()
	table := itest.UniqueName("lwt_")
	require.NoError(t, s.Query("CREATE TABLE "+ks+"."+table+" (k text PRIMARY KEY, v int)").WithContext(ctx).Exec())
	require.NoError(t, s.AwaitSchemaAgreement(ctx))

	insert := "INSERT INTO " + ks + "." + table + " (k, v) VALUES (?, ?) IF NOT EXISTS"
	first := map[string]any{}
	applied, err := s.Query(insert, "key", 1).WithContext(ctx).MapScanCAS(first)
	require.NoError(t, err)
	require.True(t, applied, "first INSERT IF NOT EXISTS must apply")

	second := map[string]any{}
	applied, err = s.Query(insert, "key", 2).WithContext(ctx).MapScanCAS(second)
	require.NoError(t, err)
	require.False(t, applied, "second INSERT IF NOT EXISTS must not apply")
	// Both engines return the current row when not applied; read by name.
	require.Equal(t, 1, second["v"], "the row that blocked the insert, by column name: %v", second)

	var v int
	require.NoError(t, s.Query("SELECT v FROM "+ks+"."+table+" WHERE k = ?", "key").
		Consistency(gocql.Serial).WithContext(ctx).Scan(&v))
	require.Equal(t, 1, v)
}
