package itest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/cqlseq/cqlseq/testenv/cassandra"
)

// StartCluster starts a private Cassandra cluster of n nodes with o (the
// launcher's cassandra.StartCluster), bounded by timeout, and stops it at
// t's cleanup. Without Java (or without Maven and cached jars) it skips t,
// unless CI=true, where such a test must run and fails instead.
func StartCluster(t *testing.T, o cassandra.Options, n int, timeout time.Duration) *cassandra.Cluster {
	t.Helper()
	if err := cassandra.CheckTools(o); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("private Cassandra cluster: %v (CI=true: this test must run)", err)
		}
		t.Skipf("private Cassandra cluster cannot start here: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	began := time.Now()
	c, err := cassandra.StartCluster(ctx, o, n, nil)
	if err != nil {
		t.Fatalf("starting the private Cassandra cluster: %v", err)
	}
	t.Cleanup(func() {
		if _, err := cassandra.StopCluster(c); err != nil {
			t.Errorf("stopping the private Cassandra cluster: %v", err)
		}
	})
	t.Logf("private Cassandra cluster of %d nodes on %v all up and normal %.1f s after the first JVM start",
		n, c.Hosts(), time.Since(began).Seconds())
	return c
}
