package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/integration/itest"
)

// TestMigrateFitsTheReplicationToTheCluster is issue 28's first two
// items: a replication naming a datacenter the cluster lacks is refused
// before anything is created; a keyspace that a failed run left with more
// replicas than the cluster has nodes (so that nothing can be recorded in
// it at a quorum) is altered to the replication given by the next run,
// which then completes it; a keyspace that records versions is never
// altered, and the error says what to run.
func TestMigrateFitsTheReplicationToTheCluster(t *testing.T) {
	itest.NoLeaks(t)
	s := itest.Session(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var dc string
	require.NoError(t, s.Query("SELECT data_center FROM system.local").WithContext(ctx).Scan(&dc))
	drop := func(ks string) {
		t.Cleanup(func() {
			if err := s.Query("DROP KEYSPACE IF EXISTS " + ks).WithContext(context.Background()).Exec(); err != nil {
				t.Errorf("dropping %s: %v", ks, err)
			}
		})
	}
	exists := func(ks string) bool {
		iter := s.Query("SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = ?", ks).WithContext(ctx).Iter()
		n := iter.NumRows()
		require.NoError(t, iter.Close())
		return n > 0
	}

	ks := itest.UniqueName("cqlseq_fit_")
	drop(ks)
	r := itest.RunCLI(t, args([]string{"migrate", "--keyspace", ks, "--replication", "{'class': 'NetworkTopologyStrategy', 'dc1': 3}"}, hostsFlag())...)
	assert.Equal(t, 1, r.Code, r.Stdout)
	assert.Equal(t, 1, strings.Count(r.Stderr, "\n"), r.Stderr)
	assert.Contains(t, r.Stderr, `datacenter "dc1" does not exist`)
	assert.Contains(t, r.Stderr, dc)
	assert.False(t, exists(ks), "nothing created")

	// What a run that failed after creating the keyspace left: too many
	// replicas for the cluster, nothing recorded.
	nodes := len(itest.Hosts())
	require.NoError(t, s.Query(fmt.Sprintf("CREATE KEYSPACE %s WITH replication = {'class': 'NetworkTopologyStrategy', '%s': %d}", ks, dc, nodes+2)).
		WithContext(ctx).Exec())
	require.NoError(t, s.AwaitSchemaAgreement(ctx))
	r = itest.RunCLI(t, args([]string{"migrate", "--keyspace", ks, "--replication", itest.Replication()}, hostsFlag())...)
	require.Equal(t, 0, r.Code, r.Stderr)
	assert.Contains(t, r.Stdout, "applied versions [1 2 3]")
	r = itest.RunCLI(t, args([]string{"bench", "--duration", "500ms", "--partitions", "1", "--workspaces", "10"}, storeFlags(ks))...)
	require.Equal(t, 0, r.Code, "the completed keyspace takes a bench: %s", r.Stderr)

	// A keyspace that records versions is never altered by migrate.
	require.NoError(t, s.Query(fmt.Sprintf("ALTER KEYSPACE %s WITH replication = {'class': 'NetworkTopologyStrategy', '%s': %d}", ks, dc, nodes+2)).
		WithContext(ctx).Exec())
	require.NoError(t, s.AwaitSchemaAgreement(ctx))
	r = itest.RunCLI(t, args([]string{"migrate", "--keyspace", ks}, hostsFlag())...)
	assert.Equal(t, 1, r.Code, r.Stdout)
	assert.Equal(t, 1, strings.Count(r.Stderr, "\n"), r.Stderr)
	assert.Contains(t, r.Stderr, fmt.Sprintf("ALTER KEYSPACE %s WITH replication = {'class': 'org.apache.cassandra.locator.NetworkTopologyStrategy', '%s': %d}", ks, dc, nodes))
}
