package cql

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/gocql/gocql"

	"github.com/cqlseq/cqlseq/storage"
)

// Defaults of Options.
const (
	DefaultTable          = "values"
	DefaultConsistency    = gocql.LocalQuorum
	DefaultSerial         = gocql.LocalSerial
	DefaultTimeout        = 5 * time.Second
	DefaultConnectTimeout = 5 * time.Second
	// DefaultReconnectInterval: a node the session marked down is back in
	// use at most this long after it answers again (gocql's default: 60 s).
	DefaultReconnectInterval = 5 * time.Second
	DefaultPageSize          = 1000
	DefaultNumConns          = 2
	DefaultBatchRows         = 100
	DefaultBatchBytes        = 32 << 10
	// DefaultAttemptTimeout: a LAN round trip plus a replica's write is a
	// few milliseconds, so a second without an answer means the host, not
	// the query, is slow; four more seconds remain for other hosts.
	DefaultAttemptTimeout = time.Second
	DefaultSuspectFloor   = 100 * time.Millisecond
	DefaultSuspectFactor  = 10
	DefaultProbeInterval  = time.Second
	// MaxPageSize bounds Options.PageSize.
	MaxPageSize = 1 << 16
)

// Options configure Open.
type Options struct {
	// Hosts are the contact points, "host" or "host:port" (default port
	// 9042). Required unless Session is set.
	Hosts []string
	// Keyspace holds the table. Required. Create it and the table with
	// package schema.
	Keyspace string
	// Table is the key-value table, of the shape
	// (p_key blob, c_col blob, value blob, PRIMARY KEY ((p_key), c_col)).
	// Default "values".
	Table string

	// Session, when set, is used instead of connecting: its own settings
	// (hosts, consistency, timeouts, TLS, ...) stay as the caller built
	// them, except that every query is given Consistency,
	// SerialConsistency and a deadline. Close does not close it. Hosts,
	// Username, Password, TLS, ConnectTimeout, NumConns, ReconnectInterval,
	// DisableInitialHostLookup and LocalDC must then be left zero.
	Session *gocql.Session

	// Consistency of reads and writes. Default LOCAL_QUORUM. ANY (the
	// zero value) cannot be chosen.
	Consistency gocql.Consistency
	// SerialConsistency of lightweight transactions: gocql.Serial or
	// gocql.LocalSerial (default).
	SerialConsistency gocql.Consistency
	// LocalDC is the client's data centre: coordinators are chosen there
	// first (gocql's DCAwareRoundRobinPolicy inside its token-aware policy,
	// health ordering applied on top), and only there when Consistency or
	// SerialConsistency is LOCAL_*, so that every quorum is LocalDC's.
	// Required when the cluster has several data centres and a consistency
	// is LOCAL_QUORUM, LOCAL_ONE or LOCAL_SERIAL (the defaults): without it
	// coordinators in different data centres form quorums that do not
	// overlap. Open and Connect refuse such a configuration, and a LocalDC
	// none of the cluster's hosts is in, with an error wrapping
	// storage.ErrInvalidArgument, after connecting (they read the session's
	// host metadata). Empty: any coordinator (token aware over round robin).
	// A connection option: a caller's Session is the caller's to check.
	LocalDC string

	// Timeout bounds each call (each page of a Read), all its attempts
	// included, unless the call's context has an earlier deadline. Default
	// 5 s.
	Timeout time.Duration
	// AttemptTimeout bounds one attempt of a read or a plain write inside
	// Timeout: an attempt without an answer by then is retried on the next
	// host (at most twice). Default 1 s, or Timeout if that is shorter.
	// Must not exceed Timeout.
	AttemptTimeout time.Duration
	// LWTAttemptTimeout bounds the one attempt of a conditional statement
	// (never retried: see package doc); the rest of Timeout is left for the
	// SERIAL re-read that settles an unknown outcome (which gets at least
	// AttemptTimeout). Default 4/5 of Timeout: an outcome declared unknown
	// early costs the writer a replay (and may stop a fenced partition),
	// never a wrong answer. Must be less than Timeout.
	LWTAttemptTimeout time.Duration

	// SuspectFloor and SuspectFactor set when a silent host is suspected:
	// attempts to it outstanding or unanswered for longer than
	// max(SuspectFloor, SuspectFactor x the p99 of recent healthy replies)
	// with no reply from it since. An attempt that times out suspects its
	// host at once, unless other hosts timed out with it (within
	// SuspectFloor of each other, with no reply from any host: a shared
	// silence; a later timeout leaves an earlier host suspected).
	// Suspected hosts go last in every query plan until they reply.
	// Defaults 100 ms and 10.
	SuspectFloor  time.Duration
	SuspectFactor float64
	// ProbeInterval is how often a suspected host is sent a probe (an
	// idempotent statement, hedged) to learn that it answers again.
	// Default 1 s.
	ProbeInterval time.Duration
	// HedgeDelay is how long a read or a plain write waits for its first
	// attempt before a speculative attempt on the next host. Zero (the
	// default): adaptive, the p99 of recent healthy replies (at least 1 ms,
	// at most AttemptTimeout/2). NoHedging turns speculative attempts off.
	HedgeDelay time.Duration
	NoHedging  bool
	// DisableHealth turns the health policy off: gocql's default host
	// choice (token aware over round robin, or over DC-aware round robin
	// with LocalDC), one attempt per statement bounded by Timeout
	// (AttemptTimeout and LWTAttemptTimeout default to Timeout), gocql's
	// default retry policy and no hedging; SuspectFloor, SuspectFactor,
	// ProbeInterval and HedgeDelay are not used. With one replica paused or
	// cut off, a third of all statements then wait out Timeout.
	DisableHealth bool

	// SkipTimestampProbe: Open does not write CheckTimestamps' probe cell.
	// For a caller that only reads (cqlseq inspect, verify), perhaps as a
	// role that may not write.
	SkipTimestampProbe bool
	// ConnectTimeout bounds connecting to each host in Open. Default 5 s.
	ConnectTimeout time.Duration
	// ReconnectInterval is how often the session tries again to connect
	// to the nodes it has marked down (after a crash or a restart longer
	// than its pool's reconnection tries): a node is back in use at most
	// this long after it answers again. Default 5 s.
	ReconnectInterval time.Duration

	// Username and Password enable password authentication when Username
	// is set.
	Username string
	Password string
	// TLS enables TLS with this configuration. Host names are verified
	// unless TLS.InsecureSkipVerify is set.
	TLS *tls.Config

	// PageSize is the number of rows a Read fetches per query (and holds
	// in memory at once). Default 1000, at most MaxPageSize.
	PageSize int
	// NumConns is the number of connections per host (per shard on
	// ScyllaDB). Default 2.
	NumConns int
	// DisableInitialHostLookup keeps the driver to Hosts instead of the
	// addresses the nodes advertise: for a single node behind a port
	// mapping or a loopback address.
	DisableInitialHostLookup bool

	// BatchRows and BatchBytes bound one UNLOGGED batch of PutBatch (rows,
	// and bytes of keys and values): a partition with more is written in
	// several batches. Defaults 100 rows and 32 KiB (under Cassandra's
	// default batch_size_fail_threshold of 50 KiB).
	BatchRows  int
	BatchBytes int
	// WriteWorkers bounds the partitions PutBatch writes concurrently (a
	// sequencer flush writes one partition per workspace, a trust2 group
	// one per record partition). Default storage.DefaultWriteWorkers.
	WriteWorkers int

	// Logger receives the driver's messages and unknown LWT outcomes.
	// Default slog.Default().
	Logger *slog.Logger

	// Now is the store's wall clock: every wall-clock reading of the store
	// (the client timestamps of unversioned plain writes, the health
	// policy's clock) is taken through it. Default time.Now. Tests and the
	// campaign skew it (cqlseq bench --clock-offset); no safety property of
	// cqlseq depends on it (docs/design.md).
	Now func() time.Time
}

// EnsureDefaults fills zero fields with their defaults.
func (o *Options) EnsureDefaults() {
	if o.Table == "" {
		o.Table = DefaultTable
	}
	if o.Consistency == 0 {
		o.Consistency = DefaultConsistency
	}
	if o.SerialConsistency == 0 {
		o.SerialConsistency = DefaultSerial
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.DisableHealth {
		if o.AttemptTimeout == 0 {
			o.AttemptTimeout = o.Timeout
		}
		if o.LWTAttemptTimeout == 0 {
			o.LWTAttemptTimeout = o.Timeout
		}
	}
	if o.AttemptTimeout == 0 {
		o.AttemptTimeout = min(DefaultAttemptTimeout, o.Timeout)
	}
	if o.LWTAttemptTimeout == 0 {
		o.LWTAttemptTimeout = o.Timeout * 4 / 5
	}
	if o.SuspectFloor == 0 {
		o.SuspectFloor = DefaultSuspectFloor
	}
	if o.SuspectFactor == 0 {
		o.SuspectFactor = DefaultSuspectFactor
	}
	if o.ProbeInterval == 0 {
		o.ProbeInterval = DefaultProbeInterval
	}
	if o.Session == nil {
		if o.ConnectTimeout == 0 {
			o.ConnectTimeout = DefaultConnectTimeout
		}
		if o.NumConns == 0 {
			o.NumConns = DefaultNumConns
		}
		if o.ReconnectInterval == 0 {
			o.ReconnectInterval = DefaultReconnectInterval
		}
	}
	if o.PageSize == 0 {
		o.PageSize = DefaultPageSize
	}
	if o.BatchRows == 0 {
		o.BatchRows = DefaultBatchRows
	}
	if o.BatchBytes == 0 {
		o.BatchBytes = DefaultBatchBytes
	}
	if o.WriteWorkers == 0 {
		o.WriteWorkers = storage.DefaultWriteWorkers
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Validate reports every problem of o at once, wrapping
// storage.ErrInvalidArgument. Call EnsureDefaults first.
func (o *Options) Validate() error {
	var errs []error
	if !validName.MatchString(o.Keyspace) {
		errs = append(errs, fmt.Errorf("keyspace name %q does not match %s", o.Keyspace, NamePattern))
	}
	if !validName.MatchString(o.Table) {
		errs = append(errs, fmt.Errorf("table name %q does not match %s", o.Table, NamePattern))
	}
	if o.BatchRows < 0 || o.BatchBytes < 0 || o.WriteWorkers < 0 {
		errs = append(errs, fmt.Errorf("negative BatchRows %d, BatchBytes %d or WriteWorkers %d", o.BatchRows, o.BatchBytes, o.WriteWorkers))
	}
	return invalid(append(errs, o.connProblems()...))
}

// validateConn is Validate of the connection fields alone (Connect and
// ClusterConfig), which need a connection and no Session.
func (o *Options) validateConn() error {
	var errs []error
	if o.Session != nil {
		errs = append(errs, errors.New("a Session is set: Connect makes a session of its own"))
	}
	return invalid(append(errs, o.connProblems()...))
}

// invalid joins problems into one error wrapping storage.ErrInvalidArgument,
// or returns nil.
func invalid(errs []error) error {
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cql: %w: %w", storage.ErrInvalidArgument, err)
	}
	return nil
}

// connProblems lists the problems of the connection fields.
func (o *Options) connProblems() []error {
	var errs []error
	bad := func(f string, a ...any) { errs = append(errs, fmt.Errorf(f, a...)) }
	if o.Session == nil {
		if len(o.Hosts) == 0 {
			bad("no Hosts and no Session")
		}
		for _, h := range o.Hosts {
			if h == "" {
				bad("empty host in Hosts")
			}
		}
		if o.ConnectTimeout < 0 {
			bad("negative ConnectTimeout %v", o.ConnectTimeout)
		}
		if o.NumConns < 0 {
			bad("negative NumConns %d", o.NumConns)
		}
		if o.ReconnectInterval < 0 {
			bad("negative ReconnectInterval %v", o.ReconnectInterval)
		}
	} else if len(o.Hosts) > 0 || o.Username != "" || o.Password != "" || o.TLS != nil || o.ConnectTimeout != 0 || o.NumConns != 0 || o.ReconnectInterval != 0 || o.DisableInitialHostLookup || o.LocalDC != "" {
		bad("Session is set: connection options (Hosts, Username, Password, TLS, ConnectTimeout, NumConns, ReconnectInterval, DisableInitialHostLookup, LocalDC) belong to the caller's session")
	}
	if o.Password != "" && o.Username == "" {
		bad("Password without Username")
	}
	switch o.Consistency {
	case gocql.One, gocql.Two, gocql.Three, gocql.Quorum, gocql.All, gocql.LocalQuorum, gocql.EachQuorum, gocql.LocalOne:
	default:
		bad("Consistency %v is not a read/write consistency", o.Consistency)
	}
	if o.SerialConsistency != gocql.Serial && o.SerialConsistency != gocql.LocalSerial {
		bad("SerialConsistency %v is neither SERIAL nor LOCAL_SERIAL", o.SerialConsistency)
	}
	if o.Timeout < 0 {
		bad("negative Timeout %v", o.Timeout)
	}
	if o.AttemptTimeout < 0 || o.AttemptTimeout > o.Timeout {
		bad("AttemptTimeout %v: want 0 < AttemptTimeout <= Timeout (%v)", o.AttemptTimeout, o.Timeout)
	}
	if !o.DisableHealth && (o.LWTAttemptTimeout < 0 || o.LWTAttemptTimeout >= o.Timeout) {
		bad("LWTAttemptTimeout %v: want 0 < LWTAttemptTimeout < Timeout (%v), leaving time for the SERIAL re-read", o.LWTAttemptTimeout, o.Timeout)
	}
	if o.SuspectFloor < 0 || o.SuspectFactor < 0 || o.ProbeInterval < 0 || o.HedgeDelay < 0 {
		bad("negative SuspectFloor %v, SuspectFactor %v, ProbeInterval %v or HedgeDelay %v", o.SuspectFloor, o.SuspectFactor, o.ProbeInterval, o.HedgeDelay)
	}
	if o.HedgeDelay > 0 && o.HedgeDelay >= o.AttemptTimeout {
		bad("HedgeDelay %v: want less than AttemptTimeout (%v)", o.HedgeDelay, o.AttemptTimeout)
	}
	if o.PageSize < 0 {
		bad("negative PageSize %d", o.PageSize)
	} else if o.PageSize > MaxPageSize {
		bad("PageSize %d above %d (a Read allocates a page of PageSize rows)", o.PageSize, MaxPageSize)
	}
	return errs
}
