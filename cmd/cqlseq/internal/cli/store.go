package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gocql/gocql"
	"github.com/spf13/pflag"

	"github.com/cqlseq/cqlseq/metrics"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/boltdb"
	"github.com/cqlseq/cqlseq/storage/cql"
)

// Store kinds.
const (
	storeBolt = "bbolt"
	storeCQL  = "cql"
	storeMem  = "memory" // demo --memory only
)

// boltFileName is the file a --dir holds.
const boltFileName = "cqlseq.db"

// storeFlags select and configure a store.
type storeFlags struct {
	kind string
	fs   *pflag.FlagSet // to tell given flags from defaults (resolve)

	// bbolt
	dir, file string
	noSync    bool

	// cql
	cluster clusterFlags
}

// clusterFlags reach a CQL cluster.
type clusterFlags struct {
	hosts       []string
	keyspace    string
	username    string
	password    string
	tlsCA       string
	tlsInsecure bool
	consistency string
	localDC     string
	timeout     time.Duration
	hostLookup  bool
	attempts    attemptFlags
	now         func() time.Time // the store's wall clock (nil: time.Now); not a flag
}

// attemptFlags are storage/cql's attempt and host-health knobs (zero: the
// library's default).
type attemptFlags struct {
	health         bool
	attemptTimeout time.Duration
	lwtTimeout     time.Duration
	hedgeDelay     time.Duration
	noHedging      bool
	suspectFloor   time.Duration
	suspectFactor  float64
}

func (f *storeFlags) addKind(fs *pflag.FlagSet) {
	f.fs = fs
	fs.StringVar(&f.kind, "store", "", "store: bbolt or cql (default: cql when --hosts, --keyspace or CQLSEQ_CQL_HOSTS names a cluster, else bbolt)")
}

// cqlFlags and boltFlags are the flags that name a store of each kind.
var (
	cqlFlags  = []string{"hosts", "keyspace"}
	boltFlags = []string{"dir", "file"}
)

// given returns the flags of names that the command line set.
func (f *storeFlags) given(names []string) []string {
	var out []string
	for _, n := range names {
		if f.fs != nil && f.fs.Lookup(n) != nil && f.fs.Changed(n) {
			out = append(out, "--"+n)
		}
	}
	return out
}

// resolve applies the one rule that chooses the store, the same in every
// command: --store when given; else a CQL flag (--hosts, --keyspace) or
// CQLSEQ_CQL_HOSTS selects cql, unless a bbolt flag (--dir, --file) is
// given; else bbolt. A --store that contradicts the flags given, or flags of
// both kinds, is an error (a usage error: exit code 2).
func (f *storeFlags) resolve() error {
	cqlGiven, boltGiven := f.given(cqlFlags), f.given(boltFlags)
	both := func() error {
		return fmt.Errorf("%s name a CQL cluster and %s a bbolt file: give the flags of one store", strings.Join(cqlGiven, ", "), strings.Join(boltGiven, ", "))
	}
	switch f.kind {
	case "":
		switch {
		case len(cqlGiven) > 0 && len(boltGiven) > 0:
			return both()
		case len(cqlGiven) > 0, len(boltGiven) == 0 && strings.TrimSpace(os.Getenv("CQLSEQ_CQL_HOSTS")) != "":
			f.kind = storeCQL
		default:
			f.kind = storeBolt
		}
	case storeBolt:
		if len(cqlGiven) > 0 {
			return fmt.Errorf("--store bbolt contradicts %s (flags of the CQL store): drop one", strings.Join(cqlGiven, ", "))
		}
	case storeCQL:
		if len(boltGiven) > 0 {
			return fmt.Errorf("--store cql contradicts %s (flags of the bbolt store): drop one", strings.Join(boltGiven, ", "))
		}
	}
	return nil
}

func (f *storeFlags) addBolt(fs *pflag.FlagSet, dirHelp string) {
	f.addBoltReadOnly(fs, dirHelp)
	fs.BoolVar(&f.noSync, "no-sync", false, "bbolt: no fsync per commit (a machine crash may lose recent writes)")
}

// addBoltReadOnly adds the bbolt flags of a command that only reads.
func (f *storeFlags) addBoltReadOnly(fs *pflag.FlagSet, dirHelp string) {
	fs.StringVar(&f.dir, "dir", "", dirHelp)
	fs.StringVar(&f.file, "file", "", "bbolt file (instead of --dir/"+boltFileName+")")
}

func (c *clusterFlags) add(fs *pflag.FlagSet) {
	hosts := []string{"127.0.0.1:9042"}
	if h := strings.TrimSpace(os.Getenv("CQLSEQ_CQL_HOSTS")); h != "" {
		hosts = strings.Split(h, ",")
	}
	fs.StringSliceVar(&c.hosts, "hosts", hosts, "CQL contact points host[:port] (default: CQLSEQ_CQL_HOSTS, else 127.0.0.1:9042)")
	fs.Lookup("hosts").DefValue = "[]" // the usage names both defaults; pflag would add the one in effect
	fs.StringVar(&c.keyspace, "keyspace", "cqlseq", "CQL keyspace")
	fs.StringVar(&c.username, "username", "", "CQL user (password authentication)")
	fs.StringVar(&c.password, "password", "", "CQL password (default from CQLSEQ_CQL_PASSWORD)")
	fs.StringVar(&c.tlsCA, "tls-ca", "", "enable TLS, trusting the CA certificates in this PEM file")
	fs.BoolVar(&c.tlsInsecure, "tls-insecure", false, "enable TLS without verifying the server's certificate (excludes --tls-ca)")
	fs.StringVar(&c.consistency, "consistency", "LOCAL_QUORUM", "consistency of reads and writes")
	fs.DurationVar(&c.timeout, "timeout", 5*time.Second, "CQL connect and per-query timeout")
	fs.BoolVar(&c.hostLookup, "host-lookup", false, "with one host, also connect to the addresses the nodes advertise (always on with several hosts)")
	fs.StringVar(&c.localDC, "cql-local-dc", "", "the client's data centre: coordinators are chosen there (only there with LOCAL_* consistencies); required with LOCAL_* consistencies on a cluster of several data centres")
	a := &c.attempts
	fs.BoolVar(&a.health, "cql-health-policy", true, "health-aware host choice, per-attempt timeouts and hedging; false: gocql's default host choice and one attempt per query (for comparisons)")
	fs.DurationVar(&a.attemptTimeout, "cql-attempt-timeout", 0, "one attempt of a read or plain write, inside --timeout (default 1s)")
	fs.DurationVar(&a.lwtTimeout, "cql-lwt-attempt-timeout", 0, "the attempt of a conditional write; the rest of --timeout settles an unknown outcome (default 4/5 of --timeout)")
	fs.DurationVar(&a.hedgeDelay, "cql-hedge-delay", 0, "delay before a read or plain write is tried on a second host (default: the healthy p99)")
	fs.BoolVar(&a.noHedging, "cql-no-hedging", false, "never try a second host before the first attempt ends")
	fs.DurationVar(&a.suspectFloor, "cql-suspect-floor", 0, "a host with an attempt outstanding this long (or 10x the healthy p99) and no reply since goes last in query plans (default 100ms)")
	fs.Float64Var(&a.suspectFactor, "cql-suspect-factor", 0, "the multiple of the healthy p99 after which an outstanding attempt suspects its host (default 10)")
}

// apply sets the attempt knobs of o.
func (a *attemptFlags) apply(o *cql.Options) {
	o.DisableHealth = !a.health
	o.AttemptTimeout = a.attemptTimeout
	o.LWTAttemptTimeout = a.lwtTimeout
	o.HedgeDelay = a.hedgeDelay
	o.NoHedging = a.noHedging
	o.SuspectFloor = a.suspectFloor
	o.SuspectFactor = a.suspectFactor
}

// validate resolves the store kind (resolve) and reports every problem of
// the store flags at once.
func (f *storeFlags) validate() error {
	if err := f.resolve(); err != nil {
		return err
	}
	var errs []error
	switch f.kind {
	case storeBolt:
		if f.dir != "" && f.file != "" {
			errs = append(errs, errors.New("--dir and --file are exclusive"))
		}
	case storeCQL:
		errs = append(errs, f.cluster.validate()...)
	default:
		errs = append(errs, fmt.Errorf("--store %q: want %s or %s", f.kind, storeBolt, storeCQL))
	}
	return errors.Join(errs...)
}

func (c *clusterFlags) validate() []error {
	var errs []error
	if len(c.hosts) == 0 {
		errs = append(errs, errors.New("--hosts is empty"))
	}
	for _, h := range c.hosts {
		if strings.TrimSpace(h) == "" {
			errs = append(errs, errors.New("--hosts has an empty host"))
			break
		}
	}
	if !cql.ValidName(c.keyspace) {
		errs = append(errs, fmt.Errorf("--keyspace %q: want a CQL name matching %s", c.keyspace, cql.NamePattern))
	}
	if _, err := c.parseConsistency(); err != nil {
		errs = append(errs, err)
	}
	if c.timeout <= 0 {
		errs = append(errs, fmt.Errorf("--timeout %v: must be > 0", c.timeout))
	}
	if c.password != "" && c.username == "" {
		errs = append(errs, errors.New("--password without --username"))
	}
	if c.tlsCA != "" && c.tlsInsecure {
		errs = append(errs, errors.New("--tls-ca and --tls-insecure are exclusive: --tls-insecure would skip verifying against the CA"))
	}
	if c.timeout > 0 {
		// The attempt knobs against --timeout, as cql.Open will check them.
		o := cql.Options{Hosts: []string{"h"}, Keyspace: "k", Timeout: c.timeout}
		c.attempts.apply(&o)
		o.EnsureDefaults()
		if err := o.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("--cql-* flags: %w", err))
		}
	}
	return errs
}

func (c *clusterFlags) parseConsistency() (gocql.Consistency, error) {
	v, err := gocql.ParseConsistencyWrapper(c.consistency)
	if err != nil || v.IsSerial() || v == gocql.Any {
		return 0, fmt.Errorf("--consistency %q: want ONE, TWO, THREE, QUORUM, ALL, LOCAL_QUORUM, EACH_QUORUM or LOCAL_ONE", c.consistency)
	}
	return v, nil
}

func (c *clusterFlags) passwordOrEnv() string {
	if c.password != "" {
		return c.password
	}
	return os.Getenv("CQLSEQ_CQL_PASSWORD")
}

func (c *clusterFlags) tlsConfig() (*tls.Config, error) {
	if c.tlsCA == "" && !c.tlsInsecure {
		return nil, nil
	}
	t := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: c.tlsInsecure}
	if c.tlsCA != "" {
		pem, err := os.ReadFile(c.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca %s: no PEM certificate in the file", c.tlsCA)
		}
		t.RootCAs = pool
	}
	return t, nil
}

func (c *clusterFlags) trimmedHosts() []string {
	out := make([]string, 0, len(c.hosts))
	for _, h := range c.hosts {
		out = append(out, strings.TrimSpace(h))
	}
	return out
}

// cqlOptions returns the storage/cql options of the flags.
func (c *clusterFlags) cqlOptions(log *slog.Logger) (cql.Options, error) {
	cons, err := c.parseConsistency()
	if err != nil {
		return cql.Options{}, err
	}
	t, err := c.tlsConfig()
	if err != nil {
		return cql.Options{}, err
	}
	hosts := c.trimmedHosts()
	o := cql.Options{
		Hosts:                    hosts,
		Keyspace:                 c.keyspace,
		Consistency:              cons,
		Timeout:                  c.timeout,
		ConnectTimeout:           c.timeout,
		Username:                 c.username,
		Password:                 c.passwordOrEnv(),
		TLS:                      t,
		DisableInitialHostLookup: len(hosts) == 1 && !c.hostLookup,
		LocalDC:                  strings.TrimSpace(c.localDC),
		Logger:                   log,
		Now:                      c.now,
	}
	c.attempts.apply(&o)
	return o, nil
}

// hostHealth returns the CQL session's host-health counters, if the store
// is CQL with health-aware host choice.
func (s *openedStore) hostHealth() (cql.HealthStats, bool) {
	if c, ok := s.st.(*cql.Store); ok {
		return c.HealthStats()
	}
	return cql.HealthStats{}, false
}

// registerHostHealth exports the store's host-health counters on mc, if it
// has any.
func (s *openedStore) registerHostHealth(mc *metrics.Collectors) error {
	if _, ok := s.hostHealth(); !ok {
		return nil
	}
	return mc.RegisterHostHealth(func() metrics.HostHealth {
		h, _ := s.hostHealth()
		return metrics.HostHealth{Attempts: h.Attempts, Hedges: h.Hedges, Retries: h.Retries, Probes: h.Probes,
			Suspicions: h.Suspicions, Suspected: len(h.Suspected)}
	})
}

// openedStore is an open store and how to describe and close it.
type openedStore struct {
	st     storage.Storage
	kind   string
	desc   string // for reports: "bbolt /path/cqlseq.db", "cql keyspace ks at h1,h2"
	path   string // the bbolt file
	tmpDir string // removed by close
}

// close closes the store and removes its temporary directory.
func (o *openedStore) close() error {
	var errs []error
	if o.st != nil {
		errs = append(errs, o.st.Close())
	}
	if o.tmpDir != "" {
		errs = append(errs, os.RemoveAll(o.tmpDir))
	}
	return errors.Join(errs...)
}

// boltPath returns the bbolt file the flags name, or "" if none.
func (f *storeFlags) boltPath() string {
	switch {
	case f.file != "":
		return f.file
	case f.dir != "":
		return filepath.Join(f.dir, boltFileName)
	}
	return ""
}

// open opens the store the flags select. With mustExist a bbolt file must
// already exist and is opened read-only (inspect, verify); otherwise a missing --dir is created and
// no --dir/--file means a temporary directory removed by close.
func (f *storeFlags) open(ctx context.Context, log *slog.Logger, mustExist bool) (*openedStore, error) {
	switch f.kind {
	case storeCQL:
		o, err := f.cluster.cqlOptions(log)
		if err != nil {
			return nil, err
		}
		o.SkipTimestampProbe = mustExist // only reads
		st, err := cql.Open(ctx, o)
		if err != nil {
			return nil, err
		}
		return &openedStore{st: st, kind: storeCQL, desc: fmt.Sprintf("cql keyspace %s at %s", o.Keyspace, strings.Join(o.Hosts, ","))}, nil
	case storeBolt:
		return f.openBolt(log, mustExist)
	}
	return nil, fmt.Errorf("unknown store %q", f.kind)
}

func (f *storeFlags) openBolt(log *slog.Logger, mustExist bool) (*openedStore, error) {
	o := &openedStore{kind: storeBolt, path: f.boltPath()}
	switch {
	case o.path == "" && mustExist:
		return nil, errors.New("no bbolt file: give --dir or --file")
	case o.path == "":
		dir, err := os.MkdirTemp("", "cqlseq-")
		if err != nil {
			return nil, err
		}
		o.tmpDir, o.path = dir, filepath.Join(dir, boltFileName)
	case f.dir != "" && !mustExist:
		if err := os.MkdirAll(f.dir, 0o755); err != nil {
			return nil, err
		}
	}
	st, err := boltdb.Open(o.path, boltdb.Options{NoSync: f.noSync, Logger: log, ReadOnly: mustExist})
	if err != nil {
		_ = o.close()
		if errors.Is(err, boltdb.ErrLocked) {
			// bbolt's lock keeps every other process out, readers too.
			err = fmt.Errorf("%w; a bbolt file is read once the process that has it open (a bench, a demo) has ended", err)
		}
		return nil, err
	}
	o.st, o.desc = st, "bbolt "+o.path
	if f.noSync {
		o.desc += " (no fsync)"
	}
	return o, nil
}
