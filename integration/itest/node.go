package itest

import (
	"context"
	"os"
	"testing"
	"time"

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
