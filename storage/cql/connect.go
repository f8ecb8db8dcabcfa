package cql

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/gocql/gocql"
)

// Engine names, as DetectEngine returns them (and package schema takes them).
const (
	EngineCassandra = "cassandra"
	EngineScylla    = "scylla"
)

// NamePattern is what keyspace and table names must match: CQL cannot bind
// names, so they are validated before they reach a statement. Unquoted, so
// the server lower-cases them.
const NamePattern = `^[a-zA-Z][a-zA-Z0-9_]{0,47}$`

var validName = regexp.MustCompile(NamePattern)

// ValidName reports whether s is accepted as a keyspace or table name (see
// NamePattern).
func ValidName(s string) bool { return validName.MatchString(s) }

// ClusterConfig returns the gocql configuration of o's connection fields
// (Hosts, Consistency, SerialConsistency, Timeout, AttemptTimeout,
// ConnectTimeout, Username, Password, TLS, PageSize, NumConns,
// DisableInitialHostLookup, LocalDC, Logger) and, unless DisableHealth is set, the
// health-aware host choice (a host selection policy and a query and batch
// observer that work together: replace neither), keyspace unset. Keyspace,
// Table and the batch fields are not used or checked; o must not have a
// Session. For a caller that needs a gocql setting Options does not carry;
// Connect is the usual way to a session. A Store given such a session as
// Options.Session hedges only with a fixed HedgeDelay, and its data centres
// are the caller's to check (gocql checks that LocalDC has hosts).
func ClusterConfig(o Options) (*gocql.ClusterConfig, error) {
	c, _, err := clusterConfig(o)
	return c, err
}

// clusterConfig is ClusterConfig, with the session's health (nil with
// DisableHealth); the health policy reads Options.Now.
func clusterConfig(o Options) (*gocql.ClusterConfig, *health, error) {
	o.EnsureDefaults()
	now := o.Now
	if err := o.validateConn(); err != nil {
		return nil, nil, err
	}
	c := gocql.NewCluster(o.Hosts...)
	c.Consistency = o.Consistency
	c.SerialConsistency = o.SerialConsistency
	// gocql's Timeout is the default of one attempt: Timeout for the
	// session's other users (the migrator's DDL); a Store gives each of its
	// statements AttemptTimeout or LWTAttemptTimeout, and the call's
	// deadline (Timeout) travels in its context.
	c.Timeout = o.Timeout
	c.ReadTimeout = o.Timeout
	c.WriteTimeout = o.Timeout
	c.ConnectTimeout = o.ConnectTimeout
	c.ReconnectInterval = o.ReconnectInterval
	c.NumConns = o.NumConns
	c.PageSize = o.PageSize
	c.DisableInitialHostLookup = o.DisableInitialHostLookup
	c.Logger = slogAdapter{o.Logger}
	if o.Username != "" {
		c.Authenticator = gocql.PasswordAuthenticator{Username: o.Username, Password: o.Password}
	}
	if o.TLS != nil {
		c.SslOpts = &gocql.SslOptions{Config: o.TLS.Clone(), EnableHostVerification: !o.TLS.InsecureSkipVerify}
	}
	if o.DisableHealth {
		if o.LocalDC != "" {
			c.PoolConfig.HostSelectionPolicy = hostPolicy(&o)
		}
		return c, nil, nil
	}
	h := newHealth(&o, now)
	c.PoolConfig.HostSelectionPolicy = healthPolicy{HostSelectionPolicy: hostPolicy(&o), h: h}
	c.QueryObserver = healthObserver{h}
	c.BatchObserver = healthObserver{h}
	return c, h, nil
}

// Connect opens a session to the cluster of o's connection fields (see
// ClusterConfig), keyspace unset: for the migrator, engine detection and
// tests; Open connects with it unless Options.Session is set. ctx's
// deadline also bounds the connection attempt to each host. The caller
// closes the session. A session whose initialisation fails is closed here:
// gocql's NewSession leaks its goroutines (scylladb/gocql#966), so Connect
// uses the non-blocking constructor, which hands the session over. A
// cluster that does not answer gives an error wrapping
// storage.ErrUnavailable; refused credentials, permissions or TLS wrap
// storage.ErrAuthentication, ErrAuthorization or ErrTLS instead. Once
// connected, the session's hosts are checked against LocalDC and the
// consistencies (see Options.LocalDC): a mismatch closes the session and
// gives an error wrapping storage.ErrInvalidArgument.
func Connect(ctx context.Context, o Options) (*gocql.Session, error) {
	s, _, err := connect(ctx, o)
	return s, err
}

// connect is Connect, with the session's health (nil with DisableHealth).
func connect(ctx context.Context, o Options) (*gocql.Session, *health, error) {
	o.EnsureDefaults()
	c, h, err := clusterConfig(o)
	if err != nil {
		return nil, nil, err
	}
	if o.LocalDC != "" {
		c.PoolConfig.HostSelectionPolicy = dcCheckedByOpen{c.PoolConfig.HostSelectionPolicy}
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("cql: connect: %w", err)
	}
	if d, ok := ctx.Deadline(); ok && time.Until(d) < c.ConnectTimeout {
		c.ConnectTimeout = max(time.Until(d), time.Millisecond)
	}
	s, err := gocql.NewSessionNonBlocking(*c)
	if err == nil {
		if err = s.WaitUntilReady(); err != nil {
			s.Close()
		}
	}
	if err != nil {
		return nil, nil, connectErr(strings.Join(c.Hosts, ","), o.TLS != nil, err)
	}
	if err := ctx.Err(); err != nil {
		s.Close()
		return nil, nil, fmt.Errorf("cql: connect: %w", err)
	}
	if err := checkDataCentres(s.GetHosts(), o.LocalDC, o.Consistency, o.SerialConsistency); err != nil {
		s.Close()
		return nil, nil, err
	}
	return s, h, nil
}

// DetectEngine returns EngineScylla if the cluster of s is ScyllaDB (it
// has system.scylla_local), else EngineCassandra. It fails only if the
// cluster cannot be read at all.
func DetectEngine(ctx context.Context, s *gocql.Session) (string, error) {
	var key string
	if s.Query("SELECT key FROM system.scylla_local LIMIT 1").WithContext(ctx).Scan(&key) == nil {
		return EngineScylla, nil
	}
	var release string
	if err := s.Query("SELECT release_version FROM system.local").WithContext(ctx).Scan(&release); err != nil {
		return "", fmt.Errorf("cql: detecting the engine: %w", trimmed{err})
	}
	return EngineCassandra, nil
}

// slogAdapter passes gocql's log lines to slog at Info level: the one gocql
// logger of cqlseq.
type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Print(v ...any) {
	a.l.Info("gocql: " + strings.TrimSpace(fmt.Sprint(v...)))
}
func (a slogAdapter) Printf(format string, v ...any) {
	a.l.Info("gocql: " + strings.TrimSpace(fmt.Sprintf(format, v...)))
}
func (a slogAdapter) Println(v ...any) {
	a.l.Info("gocql: " + strings.TrimSpace(fmt.Sprintln(v...)))
}
