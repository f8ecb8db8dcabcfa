package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/cqlseq/cqlseq/storage/cql"
)

// dropKeyspaces drops the keyspaces the run created.
func (t *tort) dropKeyspaces(ctx context.Context) error {
	hosts := strings.Split(t.c.hosts, ",")
	c, err := cql.ClusterConfig(cql.Options{Hosts: hosts, Timeout: time.Minute, DisableInitialHostLookup: len(hosts) == 1})
	if err != nil {
		return fmt.Errorf("dropping the keyspaces: %w", err)
	}
	// Dropping is best effort: after the node faults a node can lag on the
	// schema for minutes, and gocql would wait a minute per DROP.
	c.MaxWaitSchemaAgreement = 10 * time.Second
	s, err := c.CreateSession()
	if err != nil {
		return fmt.Errorf("dropping the keyspaces: %w", err)
	}
	defer s.Close()
	for _, ks := range t.kss {
		// ks is ksBase (hex) + a phase name: a valid identifier.
		if err := s.Query("DROP KEYSPACE IF EXISTS " + ks).WithContext(ctx).Exec(); err != nil {
			return fmt.Errorf("dropping keyspace %s: %w", ks, err)
		}
	}
	return nil
}

// keyspace returns (creating it on first use) the keyspace of name.
func (t *tort) keyspace(ctx context.Context, name string) (string, error) {
	ks := t.ksBase + "_" + name
	if err := t.migrate(ctx, ks); err != nil {
		return "", err
	}
	t.kss = append(t.kss, ks)
	return ks, nil
}

// migrate runs cqlseq migrate on ks: it creates the keyspace and tables,
// and changes nothing of a keyspace that has them (it is idempotent).
func (t *tort) migrate(ctx context.Context, ks string) error {
	repl := fmt.Sprintf("{'class': 'SimpleStrategy', 'replication_factor': %d}", t.rf())
	out, err := t.cqlseqOut(ctx, "migrate", "--hosts", t.c.hosts, "--keyspace", ks, "--replication", repl, "--timeout", "30s")
	if err != nil {
		return fmt.Errorf("migrate %s: %w\n%s", ks, err, out)
	}
	return nil
}

func (t *tort) cqlseqOut(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, t.c.cqlseq, args...)
	b, err := cmd.CombinedOutput()
	return string(b), err
}
