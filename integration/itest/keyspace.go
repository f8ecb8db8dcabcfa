package itest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/cqlseq/cqlseq/storage/cql"
)

func dropKeyspace(ctx context.Context, s *gocql.Session, name string) error {
	if !cql.ValidName(name) {
		return fmt.Errorf("invalid keyspace name %q", name)
	}
	if err := s.Query("DROP KEYSPACE IF EXISTS " + name).WithContext(ctx).Exec(); err != nil {
		return err
	}
	return s.AwaitSchemaAgreement(ctx)
}

// createRunKeyspace creates the run's shared keyspace with cqlseq's schema.
func createRunKeyspace(ctx context.Context) (string, func() error, error) {
	s, err := connect(ctx)
	if err != nil {
		return "", nil, err
	}
	name := UniqueName("cqlseq_it_")
	if err := prepareKeyspace(ctx, s, name); err != nil {
		s.Close()
		return "", nil, err
	}
	drop := func() error {
		defer s.Close()
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return dropKeyspace(dctx, s, name)
	}
	return name, drop, nil
}

// NewKeyspace creates a fresh keyspace with cqlseq's schema for one test and
// drops it at cleanup.
func NewKeyspace(t testing.TB) string {
	t.Helper()
	s := Session(t)
	name := UniqueName("cqlseq_t_")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := prepareKeyspace(ctx, s, name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := dropKeyspace(ctx, s, name); err != nil {
			t.Logf("dropping keyspace %s: %v", name, err)
		}
	})
	return name
}
