package itest

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/cqlseq/cqlseq/schema"
	"github.com/cqlseq/cqlseq/storage/cql"
	"github.com/cqlseq/cqlseq/testenv/cassandra"
)

// StartNode starts a private Cassandra node with o (the launcher's
// cassandra.Start), bounded by timeout, and stops it at t's cleanup.
// Without Java (or without Maven and cached jars) it skips t, unless
// CI=true, where such a test must run and fails instead.
func StartNode(t *testing.T, o cassandra.Options, timeout time.Duration) *cassandra.Instance {
	t.Helper()
	if err := cassandra.CheckTools(o); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("private Cassandra: %v (CI=true: this test must run)", err)
		}
		t.Skipf("private Cassandra cannot start here: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	inst, err := cassandra.Start(ctx, o)
	if err != nil {
		t.Fatalf("starting the private Cassandra: %v", err)
	}
	t.Cleanup(func() {
		if _, err := cassandra.Stop(inst); err != nil {
			t.Errorf("stopping the private Cassandra: %v", err)
		}
	})
	t.Logf("private Cassandra %s on %s answered CQL %.1f s after JVM start", inst.ReleaseInfo, inst.Host, inst.StartupTime.Seconds())
	return inst
}

// PrivateKeyspace creates a keyspace named prefix and a unique suffix
// with cqlseq's schema on the private node inst, at replication factor 1
// (one node, whatever CQLSEQ_CQL_RF says), and returns its name.
func PrivateKeyspace(t testing.TB, inst *cassandra.Instance, prefix string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, err := cql.Connect(ctx, cql.Options{
		Hosts: []string{inst.Host}, DisableInitialHostLookup: true,
		Timeout: 30 * time.Second, ConnectTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatalf("connecting to the private Cassandra: %v", err)
	}
	defer s.Close()
	ks := UniqueName(prefix)
	if _, err := schema.Apply(ctx, s, schema.Options{
		Keyspace: ks, Replication: schema.DefaultReplication, Engine: schema.EngineCassandra, CreateKeyspace: true,
	}); err != nil {
		t.Fatalf("schema on the private Cassandra: %v", err)
	}
	return ks
}

// OpenPrivate opens a Store (its own session) on keyspace of the private
// node inst, each call bounded by timeout, with a quiet logger; the
// caller closes it.
func OpenPrivate(t testing.TB, inst *cassandra.Instance, keyspace string, timeout time.Duration) *cql.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := cql.Open(ctx, cql.Options{
		Hosts: []string{inst.Host}, Keyspace: keyspace, DisableInitialHostLookup: true,
		Timeout: timeout, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatalf("cql.Open on the private Cassandra: %v", err)
	}
	return st
}
