package schema

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/gocql/gocql"
)

// ErrReplicationDoesNotFit: a replication map names a datacenter the
// cluster does not have, or more replicas in one than it has nodes: the
// keyspace could never reach a quorum.
var ErrReplicationDoesNotFit = errors.New("schema: the replication does not fit the cluster")

// replicationEntry is one 'key': value of a canonical replication map.
var replicationEntry = regexp.MustCompile(`'([^']+)': '?([^',}]+)'?`)

// parseReplication returns the entries of a replication map that passed
// normalizeReplication (keys as written, values unquoted).
func parseReplication(canonical string) map[string]string {
	m := map[string]string{}
	for _, e := range replicationEntry.FindAllStringSubmatch(canonical, -1) {
		m[e[1]] = e[2]
	}
	return m
}

// fits reports why replication map m (its 'class' and factors, as written
// or as system_schema.keyspaces stores it) does not fit a cluster whose
// datacenters have dcs nodes, wrapping ErrReplicationDoesNotFit; nil when it
// fits or when the class is neither SimpleStrategy nor
// NetworkTopologyStrategy (not checked).
func fits(m map[string]string, dcs map[string]int) error {
	total := 0
	var names []string
	for dc, n := range dcs {
		total += n
		names = append(names, fmt.Sprintf("%s (%d %s)", dc, n, map[bool]string{true: "node", false: "nodes"}[n == 1]))
	}
	slices.Sort(names)
	cluster := "the cluster's datacenters: " + strings.Join(names, ", ")
	factor := func(key string) (int, error) {
		n, err := strconv.Atoi(m[key])
		if err != nil {
			return 0, fmt.Errorf("%w: '%s': %q is not a number", ErrReplicationDoesNotFit, key, m[key])
		}
		return n, nil
	}
	class := m["class"]
	switch {
	case strings.HasSuffix(class, "SimpleStrategy"):
		rf, err := factor("replication_factor")
		if err != nil {
			return err
		}
		if rf > total {
			return fmt.Errorf("%w: replication_factor %d, but the cluster has %d nodes (%s)", ErrReplicationDoesNotFit, rf, total, cluster)
		}
	case strings.HasSuffix(class, "NetworkTopologyStrategy"):
		var errs []error
		for key := range m {
			if key == "class" {
				continue
			}
			rf, err := factor(key)
			if err != nil {
				return err
			}
			targets := []string{key}
			if key == "replication_factor" { // every datacenter
				targets = slices.Sorted(maps.Keys(dcs))
			}
			for _, dc := range targets {
				n, ok := dcs[dc]
				switch {
				case !ok && rf > 0:
					errs = append(errs, fmt.Errorf("datacenter %q does not exist", dc))
				case rf > n:
					errs = append(errs, fmt.Errorf("%d replicas in datacenter %q, which has %d nodes", rf, dc, n))
				}
			}
		}
		if len(errs) > 0 {
			slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
			return fmt.Errorf("%w: %w (%s)", ErrReplicationDoesNotFit, errors.Join(errs...), cluster)
		}
	}
	return nil
}

// suggest returns a replication map like m that fits dcs: factors capped
// at the nodes there are, datacenters the cluster lacks dropped (each of
// its own given min(3, nodes) when none is left).
func suggest(m map[string]string, dcs map[string]int) map[string]string {
	out := map[string]string{"class": m["class"]}
	total := 0
	for _, n := range dcs {
		total += n
	}
	if strings.HasSuffix(m["class"], "SimpleStrategy") {
		rf, _ := strconv.Atoi(m["replication_factor"])
		out["replication_factor"] = strconv.Itoa(max(1, min(rf, total)))
		return out
	}
	for key, v := range m {
		rf, err := strconv.Atoi(v)
		if n, ok := dcs[key]; ok && err == nil {
			out[key] = strconv.Itoa(min(rf, n))
		}
	}
	if len(out) == 1 {
		for dc, n := range dcs {
			out[dc] = strconv.Itoa(min(3, n))
		}
	}
	return out
}

// datacenters returns the cluster's datacenters and how many nodes each
// has, from the coordinator's system.local and system.peers.
func datacenters(ctx context.Context, s *gocql.Session) (map[string]int, error) {
	dcs := map[string]int{}
	for _, stmt := range []string{"SELECT data_center FROM system.local", "SELECT data_center FROM system.peers"} {
		iter := s.Query(stmt).Consistency(gocql.One).WithContext(ctx).Iter()
		var dc string
		for iter.Scan(&dc) {
			dcs[dc]++
		}
		if err := iter.Close(); err != nil {
			return nil, fmt.Errorf("schema: reading the cluster's datacenters: %w", err)
		}
	}
	return dcs, nil
}

// keyspaceReplication reads the replication map of an existing keyspace.
func keyspaceReplication(ctx context.Context, s *gocql.Session, ks string) (map[string]string, error) {
	m := map[string]string{}
	if err := s.Query("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = ?", ks).
		Consistency(gocql.One).WithContext(ctx).Scan(&m); err != nil {
		return nil, fmt.Errorf("schema: reading the replication of keyspace %s: %w", ks, err)
	}
	return m, nil
}

// anyRecorded reports whether the version table of ks exists and holds a
// row, read at ONE (a keyspace whose replication does not fit the cluster
// cannot answer at a quorum).
func anyRecorded(ctx context.Context, s *gocql.Session, ks string) (bool, error) {
	exists, err := rowExists(ctx, s, "SELECT table_name FROM system_schema.tables WHERE keyspace_name = ? AND table_name = ?", ks, VersionTable)
	if err != nil || !exists {
		return false, err
	}
	return rowExists(ctx, s, "SELECT version FROM "+ks+"."+VersionTable+" LIMIT 1")
}

// mapLiteral renders a replication map as CQL, for messages.
func mapLiteral(m map[string]string) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		if _, err := strconv.Atoi(v); err != nil {
			v = "'" + v + "'"
		}
		parts = append(parts, fmt.Sprintf("'%s': %s", k, v))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
