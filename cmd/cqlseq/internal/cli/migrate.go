package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cqlseq/cqlseq/schema"
	"github.com/cqlseq/cqlseq/storage/cql"
)

const engineAuto = "auto"

type migrateFlags struct {
	cluster        clusterFlags
	replication    string
	engine         string
	createKeyspace bool
}

func newMigrateCmd(e *env) *cobra.Command {
	f := &migrateFlags{}
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply cqlseq's CQL schema to a keyspace",
		Long: `migrate brings --keyspace up to this build's schema with schema.Apply: it
creates the keyspace (with --replication, unless --create-keyspace=false),
then applies every script not yet recorded in the keyspace's
schema_version table, waiting for schema agreement after each DDL
statement. Re-running it is harmless. --engine auto asks the cluster
whether it is ScyllaDB (whose keyspace variant disables tablets, for LWT).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return usage(err)
			}
			return runMigrate(cmd.Context(), e, f)
		},
	}
	fs := cmd.Flags()
	f.cluster.add(fs)
	fs.StringVar(&f.replication, "replication", schema.DefaultReplication, "replication map of a keyspace migrate creates")
	fs.StringVar(&f.engine, "engine", engineAuto, "auto, cassandra or scylla")
	fs.BoolVar(&f.createKeyspace, "create-keyspace", true, "create the keyspace if it does not exist")
	return cmd
}

func (f *migrateFlags) validate() error {
	errs := f.cluster.validate()
	switch f.engine {
	case engineAuto, schema.EngineCassandra, schema.EngineScylla:
	default:
		errs = append(errs, fmt.Errorf("--engine %q: want %s, %s or %s", f.engine, engineAuto, schema.EngineCassandra, schema.EngineScylla))
	}
	if len(errs) == 0 {
		o := f.options(schema.EngineCassandra)
		o.EnsureDefaults()
		if err := o.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (f *migrateFlags) options(engine string) schema.Options {
	return schema.Options{Keyspace: f.cluster.keyspace, Replication: f.replication, Engine: engine, CreateKeyspace: f.createKeyspace}
}

func runMigrate(ctx context.Context, e *env, f *migrateFlags) error {
	o, err := f.cluster.cqlOptions(e.log)
	if err != nil {
		return err
	}
	hosts := strings.Join(o.Hosts, ",")
	s, err := cql.Connect(ctx, o)
	if err != nil {
		return err
	}
	defer s.Close()
	engine := f.engine
	if engine == engineAuto {
		if engine, err = cql.DetectEngine(ctx, s); err != nil {
			return err
		}
	}
	applied, err := schema.Apply(ctx, s, f.options(engine))
	if err != nil {
		return err
	}
	// A cluster that refuses every versioned write fails the migration,
	// which leaves a table no write will reach.
	warnings, err := cql.CheckTimestamps(ctx, s, f.cluster.keyspace, cql.DefaultTable)
	if err != nil {
		return fmt.Errorf("migrate: the schema is applied (versions %v), but: %w", applied, err)
	}
	for _, w := range warnings {
		e.log.Warn("migrate: the cluster warns about cqlseq's write timestamps", "warning", w)
	}
	ks := strings.ToLower(f.cluster.keyspace)
	if len(applied) == 0 {
		fmt.Fprintf(e.stdout, "migrate: keyspace %s at %s (%s) is up to date\n", ks, hosts, engine)
		return nil
	}
	fmt.Fprintf(e.stdout, "migrate: keyspace %s at %s (%s): applied versions %v\n", ks, hosts, engine, applied)
	return nil
}
