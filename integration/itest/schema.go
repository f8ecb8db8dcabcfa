package itest

import (
	"context"

	"github.com/gocql/gocql"
)

// prepareKeyspace creates keyspace name and applies cqlseq's schema to it.
func prepareKeyspace(ctx context.Context, s *gocql.Session, name string) error {
	return createKeyspace(ctx, s, name)
}
