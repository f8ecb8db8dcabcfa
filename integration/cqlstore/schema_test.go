package cqlstore

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gocql/gocql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/integration/itest"
	"github.com/cqlseq/cqlseq/schema"
)

// scriptDir is the repository's schema scripts, as an operator runs them.
const scriptDir = "../../schema/cql"

// cqlshScripts returns the script files for engine in the order the
// header of 0000_keyspace.cql gives.
func cqlshScripts(t *testing.T, engine string) []string {
	files, err := filepath.Glob(filepath.Join(scriptDir, "*.cql"))
	require.NoError(t, err)
	sort.Strings(files)
	require.NotEmpty(t, files)
	if engine == schema.EngineScylla {
		for i, f := range files {
			if alt := filepath.Join(scriptDir, "scylla", filepath.Base(f)); fileExists(alt) {
				files[i] = alt
			}
		}
	}
	return files
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// runCqlsh runs the scripts with cqlsh into keyspace ks, renaming the
// keyspace the documented way (sed -E 's/\bcqlseq\b/ks/g').
func runCqlsh(t *testing.T, cqlsh, ks string, files []string) {
	var all bytes.Buffer
	word := regexp.MustCompile(`\bcqlseq\b`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		all.Write(word.ReplaceAll(b, []byte(ks)))
		all.WriteByte('\n')
	}
	script := filepath.Join(t.TempDir(), "schema.cql")
	require.NoError(t, os.WriteFile(script, all.Bytes(), 0o600))
	host, port, err := net.SplitHostPort(itest.Hosts()[0])
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, cqlsh, host, port, "--request-timeout=60", "-f", script).CombinedOutput()
	require.NoError(t, err, "cqlsh: %s", out)
	require.NotContains(t, string(out), "Error", "cqlsh: %s", out)
}

// describe returns a keyspace's schema from system_schema: replication,
// every table's options, every column's kind, type, position and
// clustering order (ids and the keyspace name left out).
func describe(t *testing.T, s *gocql.Session, ks string) map[string]string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := map[string]string{}
	var repl map[string]string
	var durable bool
	require.NoError(t, s.Query("SELECT replication, durable_writes FROM system_schema.keyspaces WHERE keyspace_name = ?", ks).
		WithContext(ctx).Scan(&repl, &durable))
	out["keyspace"] = fmt.Sprint(repl, durable)

	tables, err := s.Query("SELECT * FROM system_schema.tables WHERE keyspace_name = ?", ks).WithContext(ctx).Iter().SliceMap()
	require.NoError(t, err)
	for _, row := range tables {
		name := row["table_name"].(string)
		delete(row, "keyspace_name")
		delete(row, "id")
		out["table "+name] = fmt.Sprint(row)
	}
	cols, err := s.Query("SELECT table_name, column_name, kind, type, position, clustering_order FROM system_schema.columns WHERE keyspace_name = ?", ks).
		WithContext(ctx).Iter().SliceMap()
	require.NoError(t, err)
	for _, row := range cols {
		out[fmt.Sprintf("column %s.%s", row["table_name"], row["column_name"])] = fmt.Sprint(row)
	}
	return out
}

func dropKeyspace(t *testing.T, s *gocql.Session, ks string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.Query("DROP KEYSPACE IF EXISTS " + ks).WithContext(ctx).Exec(); err != nil {
			t.Logf("dropping %s: %v", ks, err)
		}
		_ = s.AwaitSchemaAgreement(ctx)
	})
}

// TestSchemaCqlshMatchesApply applies the scripts with cqlsh into one
// keyspace and with schema.Apply into another, and compares what
// system_schema says of both. Apply is then idempotent on both: the cqlsh
// keyspace is adopted (its scripts recorded) and nothing else changes.
func TestSchemaCqlshMatchesApply(t *testing.T) {
	cqlsh := os.Getenv("CQLSH")
	if cqlsh == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("CQLSH is not set (make cqlsh-venv installs cqlsh; the Makefile sets CQLSH): under CI=true this is a failure")
		}
		t.Skip("CQLSH is not set: run make cqlsh-venv in the repository root and set CQLSH to its .venv/bin/cqlsh to compare the cqlsh-applied schema")
	}
	s := itest.Session(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ksA, ksB := itest.UniqueName("cqlseq_sa_"), itest.UniqueName("cqlseq_sb_")
	dropKeyspace(t, s, ksA)
	dropKeyspace(t, s, ksB)

	runCqlsh(t, cqlsh, ksA, cqlshScripts(t, itest.Engine()))
	require.NoError(t, s.AwaitSchemaAgreement(ctx))

	o := schema.Options{Keyspace: ksB, Engine: itest.Engine(), CreateKeyspace: true}
	applied, err := schema.Apply(ctx, s, o)
	require.NoError(t, err)
	scripts, err := schema.Scripts(itest.Engine())
	require.NoError(t, err)
	var all []int
	for _, sc := range scripts {
		all = append(all, sc.Version)
	}
	assert.Equal(t, all, applied, "a new keyspace gets every script")

	a, b := describe(t, s, ksA), describe(t, s, ksB)
	assert.Equal(t, a, b, "cqlsh and schema.Apply give the same schema")
	assert.Contains(t, b, "table values")
	assert.Contains(t, b, "table "+schema.VersionTable)
	assert.Contains(t, b["column values.c_col"], "clustering_order:asc")
	assert.Contains(t, b["column values.p_key"], "kind:partition_key")

	applied, err = schema.Apply(ctx, s, o)
	require.NoError(t, err)
	assert.Empty(t, applied, "a second Apply applies nothing")

	o.Keyspace = ksA
	applied, err = schema.Apply(ctx, s, o)
	require.NoError(t, err)
	assert.Equal(t, all[1:], applied, "a keyspace made by cqlsh is adopted: its scripts are recorded")
	applied, err = schema.Apply(ctx, s, o)
	require.NoError(t, err)
	assert.Empty(t, applied)
	assert.Equal(t, a, describe(t, s, ksA), "adopting changed no table")
}

// TestApplyRefuses: Apply checks the recorded versions before it applies
// anything.
func TestApplyRefuses(t *testing.T) {
	s := itest.Session(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	missing := itest.UniqueName("cqlseq_missing_")
	_, err := schema.Apply(ctx, s, schema.Options{Keyspace: missing, Engine: itest.Engine()})
	require.ErrorIs(t, err, schema.ErrNoKeyspace)

	ks := itest.NewKeyspace(t) // prepared by schema.Apply
	o := schema.Options{Keyspace: ks, Engine: itest.Engine()}
	applied, err := schema.Apply(ctx, s, o)
	require.NoError(t, err)
	require.Empty(t, applied)

	vt := ks + "." + schema.VersionTable
	var sum string
	require.NoError(t, s.Query("SELECT checksum FROM "+vt+" WHERE version = ?", 2).WithContext(ctx).Scan(&sum))
	require.NoError(t, s.Query("UPDATE "+vt+" SET checksum = ? WHERE version = ?", "edited", 2).WithContext(ctx).Exec())
	_, err = schema.Apply(ctx, s, o)
	require.ErrorIs(t, err, schema.ErrChecksumMismatch)
	assert.Contains(t, err.Error(), "version 2")
	require.NoError(t, s.Query("UPDATE "+vt+" SET checksum = ? WHERE version = ?", sum, 2).WithContext(ctx).Exec())

	require.NoError(t, s.Query("INSERT INTO "+vt+" (version, script, checksum) VALUES (?, ?, ?)", 999, "9999_future.cql", "x").WithContext(ctx).Exec())
	_, err = schema.Apply(ctx, s, o)
	require.ErrorIs(t, err, schema.ErrUnknownVersion)
	assert.True(t, strings.Contains(err.Error(), "999"), err.Error())
}
