package itest

import (
	"context"
	"fmt"

	"github.com/gocql/gocql"

	"github.com/cqlseq/cqlseq/schema"
)

// prepareKeyspace creates keyspace name (test replication, the engine's
// keyspace variant) and applies cqlseq's schema to it with schema.Apply.
func prepareKeyspace(ctx context.Context, s *gocql.Session, name string) error {
	_, err := schema.Apply(ctx, s, schema.Options{
		Keyspace:       name,
		Replication:    Replication(),
		Engine:         Engine(),
		CreateKeyspace: true,
	})
	if err != nil {
		return fmt.Errorf("preparing keyspace %s: %w", name, err)
	}
	return nil
}
