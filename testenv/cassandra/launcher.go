package cassandra

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// DefaultVersion is the Cassandra release the project tests against.
const DefaultVersion = "5.0.8"

// Options configures Fetch and Start.
type Options struct {
	// Version of org.apache.cassandra:cassandra-all. Default DefaultVersion.
	Version string
	// CacheDir holds the fetched jars (CacheDir/<version>/lib). Default
	// $CQLSEQ_CASSANDRA_CACHE, else $XDG_CACHE_HOME/cqlseq/cassandra, else
	// ~/.cache/cqlseq/cassandra.
	CacheDir string
	// RunDir is the parent of the per-run directory. Default os.TempDir().
	RunDir string
	// Java is the java executable. Default $JAVA_HOME/bin/java, else "java"
	// from PATH.
	Java string
	// Heap is the JVM heap (-Xms and -Xmx). Default "1g".
	Heap string
	// StartTimeout bounds the wait for the first CQL answer. Default 180 s.
	StartTimeout time.Duration
	// CrashSafe makes a crash of the process (SIGKILL, see Restart) lose
	// no acknowledged write and no schema change: the commit log runs in
	// batch mode (a write is acknowledged once its entry is marked in the
	// commit log) and schema changes are flushed (no
	// cassandra.unsafesystem). Default false: periodic commit log (a
	// crash may lose the last writes) and unflushed system tables (a crash
	// may lose recent keyspaces and tables), faster DDL. Neither mode
	// fsyncs (cassandra.skip_sync): an OS crash may lose anything.
	CrashSafe bool
	// Secure starts the node with password authentication and roles
	// (PasswordAuthenticator, CassandraAuthorizer, CassandraRoleManager;
	// the default superuser Superuser/SuperuserPassword) and client TLS
	// only: a CA and the node's certificate for 127.0.0.1 signed by it, made
	// with keytool in the run directory; Instance.CAFile is the CA's PEM,
	// what a client trusts. Start only (StartCluster refuses it).
	Secure bool
	// ExtraYAML is appended to the node's cassandra.yaml (Start only):
	// settings a test needs, such as a guardrail. It must not repeat a
	// setting the launcher writes.
	ExtraYAML string
	// Datacenters puts StartCluster's nodes in data centres: the first
	// Datacenters[0] nodes in dc1, the next Datacenters[1] in dc2, and so
	// on; every node is in rack1. Its sum must be the cluster's size. The
	// nodes then use GossipingPropertyFileSnitch, each reading its data
	// centre and rack from the cassandra-rackdc.properties in its
	// directory. Empty (the default): SimpleSnitch, one data centre
	// (datacenter1). StartCluster only.
	Datacenters []int
	// Log receives progress lines. Default: discarded.
	Log func(format string, args ...any)
}

// EnsureDefaults fills zero fields.
func (o *Options) EnsureDefaults() {
	if o.Version == "" {
		o.Version = DefaultVersion
	}
	if o.CacheDir == "" {
		o.CacheDir = defaultCacheDir()
	}
	if o.RunDir == "" {
		o.RunDir = os.TempDir()
	}
	if o.Java == "" {
		o.Java = "java"
		if jh := os.Getenv("JAVA_HOME"); jh != "" {
			o.Java = filepath.Join(jh, "bin", "java")
		}
	}
	if o.Heap == "" {
		o.Heap = "1g"
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 180 * time.Second
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
}

// ErrInvalidOptions reports an invalid Options field.
var ErrInvalidOptions = errors.New("cassandra: invalid options")

// Validate reports every invalid field at once; each error wraps
// ErrInvalidOptions. Call it after EnsureDefaults.
func (o *Options) Validate() error {
	var errs []error
	bad := func(f string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: "+f, append([]any{ErrInvalidOptions}, a...)...))
	}
	if o.Version == "" {
		bad("Version is empty")
	}
	if o.Java == "" {
		bad("Java is empty")
	}
	if o.Heap == "" {
		bad("Heap is empty")
	}
	if o.StartTimeout <= 0 {
		bad("StartTimeout %v is not positive", o.StartTimeout)
	}
	for i, n := range o.Datacenters {
		if n < 1 {
			bad("Datacenters[%d] (dc%d) has %d nodes: want at least 1", i, i+1, n)
		}
	}
	return errors.Join(errs...)
}

func defaultCacheDir() string {
	if d := os.Getenv("CQLSEQ_CASSANDRA_CACHE"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "cqlseq", "cassandra")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".cache", "cqlseq", "cassandra")
	}
	return filepath.Join(os.TempDir(), "cqlseq-cassandra-cache")
}

// Start starts Cassandra in a fresh run directory and returns when a CQL
// query succeeds. On failure it stops what it started and returns an error
// with the tail of the server's log.
func Start(ctx context.Context, o Options) (*Instance, error) {
	var invalid error
	if len(o.Datacenters) > 0 {
		invalid = fmt.Errorf("%w: Datacenters is for StartCluster", ErrInvalidOptions)
	}
	lib, dir, err := setUp(ctx, &o, invalid, "cqlseq-cassandra-")
	if err != nil {
		return nil, err
	}
	inst, err := start(ctx, o, lib, dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return inst, nil
}

// setUp is the start of Start and StartCluster: it sets o's defaults,
// validates it (joining invalid, the caller's own finding, if any),
// prepares the jars and makes a fresh run directory named with prefix. It
// returns the jars' directory and the run directory.
func setUp(ctx context.Context, o *Options, invalid error, prefix string) (lib, dir string, err error) {
	o.EnsureDefaults()
	if err := errors.Join(o.Validate(), invalid); err != nil {
		return "", "", err
	}
	if lib, err = prepare(ctx, *o); err != nil {
		return "", "", err
	}
	if dir, err = os.MkdirTemp(o.RunDir, prefix); err != nil {
		return "", "", fmt.Errorf("cassandra: %w", err)
	}
	return lib, dir, nil
}

// prepare checks the tools, fetches the jars (returning their directory)
// and makes o.RunDir.
func prepare(ctx context.Context, o Options) (string, error) {
	if err := CheckTools(o); err != nil {
		return "", err
	}
	lib, err := Fetch(ctx, o)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(o.RunDir, 0o755); err != nil {
		return "", fmt.Errorf("cassandra: %w", err)
	}
	return lib, nil
}

func start(ctx context.Context, o Options, lib, dir string) (*Instance, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	nativePort, storagePort := ports[0], ports[1]
	cfg := singleNode(dir, nativePort, storagePort, o.CrashSafe)
	cfg.extra = o.ExtraYAML
	inst := &Instance{Dir: dir, Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(nativePort)), Version: o.Version, CrashSafe: o.CrashSafe}
	if o.Secure {
		if cfg.keystore, inst.CAFile, err = makeKeystore(ctx, o, dir); err != nil {
			return nil, err
		}
		cfg.secure, inst.Secure = true, true
	}
	if err := writeNodeFiles(cfg); err != nil {
		return nil, err
	}
	if err := launch(ctx, o, lib, inst); err != nil {
		return nil, err
	}
	return inst, nil
}
