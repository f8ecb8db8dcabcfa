// Package cqlstore runs storage/cql against the real test cluster: the
// storage conformance suite, LWT races across sessions, the schema scripts
// (cqlsh against schema.Apply), error paths and driver benchmarks.
package cqlstore

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/cqlseq/cqlseq/integration/itest"
	"github.com/cqlseq/cqlseq/storage/cql"
)

func TestMain(m *testing.M) { os.Exit(itest.Main(m)) }

// options returns Options for the test cluster and keyspace ks.
func options(ks string) cql.Options {
	hosts := itest.Hosts()
	return cql.Options{
		Hosts:                    hosts,
		Keyspace:                 ks,
		DisableInitialHostLookup: len(hosts) == 1,
		Timeout:                  10 * time.Second,
	}
}

// open opens a Store on ks, closed at the test's cleanup.
func open(t testing.TB, ks string) *cql.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := cql.Open(ctx, options(ks))
	if err != nil {
		t.Fatalf("cql.Open: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}
