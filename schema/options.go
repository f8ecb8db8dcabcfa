package schema

import (
	"errors"
	"fmt"
	"slices"

	"github.com/cqlseq/cqlseq/storage/cql"
)

// Engine names (storage/cql's, as cql.DetectEngine returns them).
const (
	EngineCassandra = cql.EngineCassandra
	EngineScylla    = cql.EngineScylla
)

var engines = []string{EngineCassandra, EngineScylla}

// DefaultReplication is the replication map used when Options.Replication is
// empty: one replica, for development and tests.
const DefaultReplication = "{'class': 'SimpleStrategy', 'replication_factor': 1}"

// Options configure Apply.
type Options struct {
	// Keyspace receives the schema. Required; see cql.ValidName.
	Keyspace string
	// Replication is the keyspace's replication map in CQL map syntax, used
	// only when the keyspace is created. Default DefaultReplication.
	Replication string
	// Engine selects the per-engine script variants: "cassandra" (default)
	// or "scylla" (keyspace with tablets disabled, for LWT).
	Engine string
	// CreateKeyspace creates the keyspace (script 0) when it does not
	// exist. When false, a missing keyspace is an error.
	CreateKeyspace bool
}

// EnsureDefaults fills empty fields with their defaults.
func (o *Options) EnsureDefaults() {
	if o.Replication == "" {
		o.Replication = DefaultReplication
	}
	if o.Engine == "" {
		o.Engine = EngineCassandra
	}
}

// Validate reports every problem of o at once. Call EnsureDefaults first.
func (o *Options) Validate() error {
	var errs []error
	if !cql.ValidName(o.Keyspace) {
		errs = append(errs, fmt.Errorf("schema: keyspace name %q does not match %s", o.Keyspace, cql.NamePattern))
	}
	if _, err := normalizeReplication(o.Replication); err != nil {
		errs = append(errs, fmt.Errorf("schema: %w", err))
	}
	if !slices.Contains(engines, o.Engine) {
		errs = append(errs, fmt.Errorf("schema: engine %q is not one of %v", o.Engine, engines))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	return nil
}
