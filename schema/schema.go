// Package schema holds cqlseq's CQL schema as scripts cqlsh can run (in
// cql/, embedded) and Apply, the migrator that applies them to a keyspace.
//
// Scripts are named NNNN_name.cql and run in version order. Script 0000
// creates the keyspace; cql/scylla/0000_keyspace.cql replaces it on ScyllaDB
// (tablets disabled, for LWT). Script 0001 creates the version table
// schema_version, in which Apply records every later script it applies with
// the SHA-256 of the file. Scripts name the keyspace cqlseq and the
// development replication map; Apply substitutes Options.Keyspace for the
// identifier cqlseq and Options.Replication for the map (validated first).
// With cqlsh, run the files in order (see the header of 0000_keyspace.cql
// for using another keyspace name); a keyspace prepared that way has no
// version rows, and a later Apply adopts it: its statements are all IF NOT
// EXISTS, so it re-runs them harmlessly and records them.
//
// A released script is never edited: Apply refuses a keyspace whose recorded
// checksum differs from the script's. Change the schema with a new script.
package schema

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gocql/gocql"
)

// VersionTable is the table (created by script 0001) in which Apply records
// applied scripts.
const VersionTable = "schema_version"

// Sentinel errors, compared with errors.Is.
var (
	// ErrInvalidOptions: Options.Validate failed.
	ErrInvalidOptions = errors.New("schema: invalid options")
	// ErrNoKeyspace: the keyspace does not exist and CreateKeyspace is false.
	ErrNoKeyspace = errors.New("schema: keyspace does not exist")
	// ErrChecksumMismatch: a recorded script differs from this build's.
	ErrChecksumMismatch = errors.New("schema: recorded checksum differs from the script")
	// ErrUnknownVersion: the keyspace records a version this build does not
	// have (a newer build migrated it).
	ErrUnknownVersion = errors.New("schema: keyspace has a version unknown to this build")
)

// Apply brings keyspace o.Keyspace up to this build's schema. It creates the
// keyspace if missing and o.CreateKeyspace is set (version 0, not recorded),
// then applies, in order, every script not recorded in the version table,
// waiting for schema agreement after each DDL statement and recording each
// script after its last statement. It returns the versions it applied: none
// when the keyspace is up to date. It checks every recorded version before
// applying anything, and fails with ErrChecksumMismatch or ErrUnknownVersion.
// When it fails part-way, applied lists what was applied before the failure;
// a later Apply continues. Run one Apply per keyspace at a time: concurrent
// DDL on Cassandra can leave disagreeing table ids.
func Apply(ctx context.Context, s *gocql.Session, o Options) (applied []int, err error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if s == nil {
		return nil, fmt.Errorf("%w: nil session", ErrInvalidOptions)
	}
	scripts, err := Scripts(o.Engine)
	if err != nil {
		return nil, err
	}
	repl, _ := normalizeReplication(o.Replication) // validated above
	ks := strings.ToLower(o.Keyspace)              // unquoted names are lower-cased by the server

	exists, err := rowExists(ctx, s, "SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = ?", ks)
	if err != nil {
		return nil, fmt.Errorf("schema: looking up keyspace %s: %w", ks, err)
	}
	dcs, err := datacenters(ctx, s)
	if err != nil {
		return nil, err
	}
	if !exists {
		if !o.CreateKeyspace {
			return nil, fmt.Errorf("%w: %s (create it, or set CreateKeyspace)", ErrNoKeyspace, ks)
		}
		if err := fits(parseReplication(repl), dcs); err != nil {
			return nil, fmt.Errorf("%w; keyspace %s not created: give a replication the cluster has nodes for", err, ks)
		}
		if err := run(ctx, s, scripts[0].Statements(ks, repl)); err != nil {
			return nil, fmt.Errorf("schema: %s: %w", scripts[0].Path, err)
		}
		applied = append(applied, 0)
	} else if err := refit(ctx, s, ks, repl, dcs, o.CreateKeyspace); err != nil {
		return nil, err
	}

	recorded, err := readRecorded(ctx, s, ks)
	if err != nil {
		return applied, err
	}
	var errs []error
	for v, sum := range recorded {
		switch {
		case v <= 0 || v >= len(scripts):
			errs = append(errs, fmt.Errorf("%w: %s.%s has version %d, this build knows 1..%d", ErrUnknownVersion, ks, VersionTable, v, len(scripts)-1))
		case sum != scripts[v].Checksum:
			errs = append(errs, fmt.Errorf("%w: version %d (%s): recorded %s, script %s", ErrChecksumMismatch, v, scripts[v].Path, sum, scripts[v].Checksum))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return applied, err
	}

	for _, sc := range scripts[1:] {
		if _, ok := recorded[sc.Version]; ok {
			continue
		}
		if err := run(ctx, s, sc.Statements(ks, repl)); err != nil {
			return applied, fmt.Errorf("schema: %s: %w", sc.Path, err)
		}
		if err := record(ctx, s, ks, sc); err != nil {
			return applied, err
		}
		applied = append(applied, sc.Version)
	}
	return applied, nil
}

// refit checks the replication of existing keyspace ks against the
// cluster. A keyspace that does not fit (it can never reach a quorum: a
// datacenter it names does not exist, or has fewer nodes than its
// replicas) and records no version was left by a run that failed after
// creating it: with createKeyspace, it is altered to repl, when repl fits,
// and the run goes on. Otherwise the error says what to run.
func refit(ctx context.Context, s *gocql.Session, ks, repl string, dcs map[string]int, createKeyspace bool) error {
	cur, err := keyspaceReplication(ctx, s, ks)
	if err != nil {
		return err
	}
	misfit := fits(cur, dcs)
	if misfit == nil {
		return nil
	}
	recorded, err := anyRecorded(ctx, s, ks)
	if err != nil {
		return fmt.Errorf("schema: keyspace %s: %w (and reading its versions at ONE: %w)", ks, misfit, err)
	}
	fix := fmt.Sprintf("ALTER KEYSPACE %s WITH replication = %s", ks, mapLiteral(suggest(cur, dcs)))
	if !recorded && createKeyspace && fits(parseReplication(repl), dcs) == nil {
		if err := run(ctx, s, []string{fmt.Sprintf("ALTER KEYSPACE %s WITH replication = %s", ks, repl)}); err != nil {
			return fmt.Errorf("schema: keyspace %s: %w; altering it to %s: %w", ks, misfit, repl, err)
		}
		return nil
	}
	if recorded {
		return fmt.Errorf("schema: keyspace %s: %w: run %s, then migrate again", ks, misfit, fix)
	}
	return fmt.Errorf("schema: keyspace %s: %w: give a --replication that fits (it is then altered: nothing was recorded in it), or run %s", ks, misfit, fix)
}

// run executes statements in order, awaiting schema agreement after each
// DDL statement. An ALTER TABLE ... ADD of a column the table has already
// is skipped, so that re-running a script is harmless on every engine
// (ScyllaDB has no ADD IF NOT EXISTS).
func run(ctx context.Context, s *gocql.Session, stmts []string) error {
	for _, st := range stmts {
		if ks, tbl, col, ok := addedColumn(st); ok {
			exists, err := rowExists(ctx, s, "SELECT column_name FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ? AND column_name = ?", ks, tbl, col)
			if err != nil {
				return fmt.Errorf("%s: looking up column %s: %w", st, col, err)
			}
			if exists {
				continue
			}
		}
		if err := s.Query(st).Consistency(gocql.LocalQuorum).WithContext(ctx).Exec(); err != nil {
			return fmt.Errorf("%s: %w", st, err)
		}
		if w := strings.ToUpper(strings.SplitN(st, " ", 2)[0]); w == "CREATE" || w == "ALTER" || w == "DROP" {
			if err := s.AwaitSchemaAgreement(ctx); err != nil {
				return fmt.Errorf("schema agreement after %s: %w", st, err)
			}
		}
	}
	return nil
}

// addedColumn returns the keyspace, table and column of a statement
// "ALTER TABLE ks.t ADD col type" (names lower-cased, as unquoted names
// are), and false for any other statement.
func addedColumn(stmt string) (ks, table, col string, ok bool) {
	f := strings.Fields(stmt)
	if len(f) < 6 || !strings.EqualFold(f[0], "ALTER") || !strings.EqualFold(f[1], "TABLE") || !strings.EqualFold(f[3], "ADD") {
		return "", "", "", false
	}
	ks, table, ok = strings.Cut(strings.ToLower(f[2]), ".")
	return ks, table, strings.ToLower(f[4]), ok
}

func rowExists(ctx context.Context, s *gocql.Session, stmt string, args ...any) (bool, error) {
	iter := s.Query(stmt, args...).Consistency(gocql.One).WithContext(ctx).Iter()
	n := iter.NumRows()
	if err := iter.Close(); err != nil {
		return false, err
	}
	return n > 0, nil
}

// readRecorded returns version -> checksum from the version table; empty
// when the table does not exist yet.
func readRecorded(ctx context.Context, s *gocql.Session, ks string) (map[int]string, error) {
	out := map[int]string{}
	exists, err := rowExists(ctx, s, "SELECT table_name FROM system_schema.tables WHERE keyspace_name = ? AND table_name = ?", ks, VersionTable)
	if err != nil {
		return nil, fmt.Errorf("schema: looking up %s.%s: %w", ks, VersionTable, err)
	}
	if !exists {
		return out, nil
	}
	iter := s.Query("SELECT version, checksum FROM " + ks + "." + VersionTable).
		Consistency(gocql.LocalQuorum).WithContext(ctx).Iter()
	var v int
	var sum string
	for iter.Scan(&v, &sum) {
		out[v] = sum
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("schema: reading %s.%s: %w", ks, VersionTable, err)
	}
	return out, nil
}

// record inserts sc's row if absent; if another migrator recorded the same
// version first, its checksum must match.
func record(ctx context.Context, s *gocql.Session, ks string, sc Script) error {
	prev := map[string]any{}
	ok, err := s.Query("INSERT INTO "+ks+"."+VersionTable+" (version, script, checksum, applied_at) VALUES (?, ?, ?, ?) IF NOT EXISTS",
		sc.Version, sc.Name, sc.Checksum, time.Now()).
		Consistency(gocql.LocalQuorum).SerialConsistency(gocql.LocalSerial).WithContext(ctx).MapScanCAS(prev)
	if err != nil {
		return fmt.Errorf("schema: recording version %d: %w", sc.Version, err)
	}
	if !ok && prev["checksum"] != sc.Checksum {
		return fmt.Errorf("%w: version %d (%s) was recorded concurrently with checksum %v, script %s", ErrChecksumMismatch, sc.Version, sc.Path, prev["checksum"], sc.Checksum)
	}
	return nil
}
