package cql

import (
	"context"
	"errors"
	"fmt"

	"github.com/gocql/gocql"
)

// ErrTimestampsRefused: the cluster refuses the write timestamps of
// cqlseq's versioned writes, 2^62 + version (storage.Row; rows.go's
// versionBase), some 146,000 years ahead of any clock: every flush,
// trust2 event and versioned record write would fail. Cassandra refuses
// them with a maximum_timestamp_fail_threshold guardrail (or
// user_timestamps_enabled: false) for a user that is not a superuser;
// ScyllaDB with restrict_future_timestamp: true, its default, for every
// user (scylladb/scylladb docs/cql/synthetic-timestamps.rst).
var ErrTimestampsRefused = errors.New("cql: the cluster refuses the write timestamps cqlseq uses (2^62 + version)")

// Timestamp probe: one cell of the store's table, written at versionBase
// (the lowest timestamp a versioned write uses), expiring after
// probeTTLSeconds. No key of cqlseq's begins with its partition key's 0xff
// byte (they begin with a small big-endian view or prefix number, or with
// ASCII text), and nothing reads it.
var (
	probePKey = []byte("\xffcqlseq.timestamp-probe")
	probeCCol = []byte{0}
)

const probeTTLSeconds = 60

// fixFor is what an operator changes so that the cluster accepts the
// timestamps.
func fixFor(engine string) string {
	if engine == EngineScylla {
		return "set restrict_future_timestamp: false in scylla.yaml on every node (live-updatable)"
	}
	return "remove maximum_timestamp_fail_threshold (and user_timestamps_enabled: false) from cassandra.yaml on every node and restart them, or run cqlseq as a superuser role"
}

// CheckTimestamps writes the probe cell into keyspace.table as the
// session's user, at cqlseq's timestamps, and returns an error wrapping
// ErrTimestampsRefused if the node refuses it as an invalid request (a
// guardrail, ScyllaDB's restrict_future_timestamp), with the server's
// message and the setting to change. It returns the client warnings the
// write drew (Cassandra's maximum_timestamp_warn_threshold). Any other
// failure (a timeout, an unavailable replica, a missing table) proves
// nothing and is returned as is, wrapped.
func CheckTimestamps(ctx context.Context, s *gocql.Session, keyspace, table string) (warnings []string, err error) {
	stmt := fmt.Sprintf("INSERT INTO %s.%s (p_key, c_col, value) VALUES (?, ?, ?) USING TIMESTAMP ? AND TTL %d",
		keyspace, table, probeTTLSeconds)
	iter := s.Query(stmt, probePKey, probeCCol, []byte{}, int64(versionBase)).WithContext(ctx).Iter()
	warnings = iter.Warnings()
	err = iter.Close()
	var se serverError
	switch {
	case err == nil:
		return warnings, nil
	case errors.As(err, &se) && se.GetCode() == gocql.ErrCodeInvalid:
		engine, derr := DetectEngine(ctx, s)
		if derr != nil {
			engine = EngineCassandra
		}
		return warnings, fmt.Errorf("%w: the node refused a write at timestamp 2^62 (%s): %s (docs/operations.md, Write timestamps)",
			ErrTimestampsRefused, se.GetMessage(), fixFor(engine))
	}
	return warnings, fmt.Errorf("cql: the write timestamp probe: %w", err)
}
