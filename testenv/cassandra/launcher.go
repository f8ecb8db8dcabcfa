// Package cassandra runs a real Apache Cassandra for tests, one node or a
// cluster of nodes on loopback addresses (StartCluster), from
// the jars Maven Central publishes, with no Docker engine: Fetch copies the
// cassandra-all artifact and its runtime dependencies into a cache, Start
// writes a fresh run directory (cassandra.yaml, logback.xml, data) with free
// loopback ports and starts CassandraDaemon on Java 17 in its own process
// group, waits until a CQL query succeeds, and Stop ends exactly that process
// and removes its run directory. Restart crashes a running instance
// (SIGKILL) and starts it again on the same directory, ports and data.
package cassandra

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gocql/gocql"

	"github.com/cqlseq/cqlseq/storage/cql"
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

// ErrMissingTool reports a program the launcher needs that is not installed.
var ErrMissingTool = errors.New("cassandra: missing tool")

// CheckTools reports every missing program (java 17+, and mvn when the jars
// are not cached yet) in one error wrapping ErrMissingTool.
func CheckTools(o Options) error {
	o.EnsureDefaults()
	var errs []error
	if _, err := exec.LookPath(o.Java); err != nil {
		errs = append(errs, fmt.Errorf("%w: java (Java 17 is needed to run Cassandra %s; install openjdk-17-jre-headless or set JAVA_HOME)", ErrMissingTool, o.Version))
	} else if major, err := javaMajor(o.Java); err != nil {
		errs = append(errs, fmt.Errorf("%w: %s -version failed: %v", ErrMissingTool, o.Java, err))
	} else if major < 17 {
		errs = append(errs, fmt.Errorf("%w: Java 17 or newer is needed, %s is Java %d", ErrMissingTool, o.Java, major))
	}
	if !fetched(libDir(o)) {
		if _, err := exec.LookPath("mvn"); err != nil {
			errs = append(errs, fmt.Errorf("%w: mvn (Maven fetches the Cassandra %s jars into %s; install maven)", ErrMissingTool, o.Version, libDir(o)))
		}
	}
	return errors.Join(errs...)
}

func javaMajor(java string) (int, error) {
	out, err := exec.Command(java, "-version").CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("%v: %s", err, bytes.TrimSpace(out))
	}
	return parseJavaMajor(string(out))
}

// parseJavaMajor reads the major version from `java -version` output, e.g.
// `openjdk version "17.0.15" 2025-04-15` or `java version "1.8.0_402"`.
func parseJavaMajor(s string) (int, error) {
	i := strings.IndexByte(s, '"')
	if i < 0 {
		return 0, fmt.Errorf("unrecognised version output %q", s)
	}
	v := s[i+1:]
	if j := strings.IndexAny(v, ".\""); j >= 0 {
		v = v[:j]
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("unrecognised version output %q", s)
	}
	if n == 1 { // "1.8.0"
		return 8, nil
	}
	return n, nil
}

func libDir(o Options) string { return filepath.Join(o.CacheDir, o.Version, "lib") }

func fetched(lib string) bool {
	_, err := os.Stat(filepath.Join(lib, ".complete"))
	return err == nil
}

const pomTemplate = `<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.cqlseq</groupId>
  <artifactId>cassandra-fetch</artifactId>
  <version>1</version>
  <dependencies>
    <dependency>
      <groupId>org.apache.cassandra</groupId>
      <artifactId>cassandra-all</artifactId>
      <version>%s</version>
    </dependency>
  </dependencies>
</project>
`

// Fetch makes sure the jars of o.Version are in the cache and returns their
// directory. A second call finds the cache complete and runs nothing.
func Fetch(ctx context.Context, o Options) (string, error) {
	o.EnsureDefaults()
	lib := libDir(o)
	if fetched(lib) {
		return lib, nil
	}
	if _, err := exec.LookPath("mvn"); err != nil {
		return "", fmt.Errorf("%w: mvn (needed once to fetch Cassandra %s jars from Maven Central)", ErrMissingTool, o.Version)
	}
	work := filepath.Join(o.CacheDir, o.Version)
	if err := os.MkdirAll(work, 0o755); err != nil {
		return "", fmt.Errorf("cassandra: %w", err)
	}
	tmpLib := lib + ".partial"
	_ = os.RemoveAll(tmpLib)
	pom := filepath.Join(work, "pom.xml")
	if err := os.WriteFile(pom, fmt.Appendf(nil, pomTemplate, o.Version), 0o644); err != nil {
		return "", fmt.Errorf("cassandra: %w", err)
	}
	o.Log("fetching Cassandra %s jars from Maven Central into %s", o.Version, lib)
	cmd := exec.CommandContext(ctx, "mvn", "-B", "-q", "-f", pom,
		"org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies",
		"-DincludeScope=runtime", "-DoutputDirectory="+tmpLib)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("cassandra: mvn copy-dependencies failed: %w\n%s", err, tail(out.String(), 40))
	}
	if _, err := findJar(tmpLib, "cassandra-all-"); err != nil {
		return "", fmt.Errorf("cassandra: mvn finished but %w\n%s", err, tail(out.String(), 40))
	}
	_ = os.RemoveAll(lib)
	if err := os.Rename(tmpLib, lib); err != nil {
		return "", fmt.Errorf("cassandra: %w", err)
	}
	if err := os.WriteFile(filepath.Join(lib, ".complete"), []byte(o.Version+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("cassandra: %w", err)
	}
	return lib, nil
}

func findJar(lib, prefix string) (string, error) {
	m, _ := filepath.Glob(filepath.Join(lib, prefix+"*.jar"))
	if len(m) == 0 {
		return "", fmt.Errorf("no %s*.jar in %s", prefix, lib)
	}
	return m[0], nil
}

// Instance is a running Cassandra started by Start. Its fields are what Stop
// needs; it is written to and read from a state file by the command.
type Instance struct {
	PID         int           `json:"pid"`
	Dir         string        `json:"dir"`
	Host        string        `json:"host"`             // host:port of the native transport
	Listen      string        `json:"listen,omitempty"` // the node's address; "" is 127.0.0.1
	Version     string        `json:"version"`
	ReleaseInfo string        `json:"release_version"`   // system.local release_version
	StartupTime time.Duration `json:"startup_ns"`        // from exec to the first CQL answer
	CrashSafe   bool          `json:"crash_safe"`        // Options.CrashSafe at Start
	Secure      bool          `json:"secure,omitempty"`  // Options.Secure at Start
	CAFile      string        `json:"ca_file,omitempty"` // Secure: the PEM of the CA that signed the node's certificate
}

// The superuser of a Secure node (Cassandra's default role).
const (
	Superuser         = "cassandra"
	SuperuserPassword = "cassandra"
)

// Start starts Cassandra in a fresh run directory and returns when a CQL
// query succeeds. On failure it stops what it started and returns an error
// with the tail of the server's log.
func Start(ctx context.Context, o Options) (*Instance, error) {
	lib, dir, err := setUp(ctx, &o, nil, "cqlseq-cassandra-")
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

// launch starts CassandraDaemon on the configuration in inst.Dir and waits
// until CQL answers on inst.Host; then it sets inst's PID, ReleaseInfo and
// StartupTime. On failure the process it started has ended and inst is
// unchanged.
func launch(ctx context.Context, o Options, lib string, inst *Instance) error {
	dir := inst.Dir
	jamm, err := findJar(lib, "jamm-")
	if err != nil {
		return fmt.Errorf("cassandra: %w", err)
	}
	raiseNoFile()

	// Appended to: a restart's output follows the crashed run's.
	logFile, err := os.OpenFile(filepath.Join(dir, "logs", "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("cassandra: %w", err)
	}
	defer logFile.Close()
	args := jvmArgs(o, lib, jamm, dir)
	cmd := exec.Command(o.Java, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Stdin = nil
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	began := time.Now()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("cassandra: starting %s: %w", o.Java, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	pid := cmd.Process.Pid
	o.Log("started Cassandra %s pid %d in %s, waiting for CQL on %s", o.Version, pid, dir, inst.Host)

	waitCtx, cancel := context.WithTimeout(ctx, o.StartTimeout)
	defer cancel()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		if rel, err := probeInstance(inst); err == nil {
			inst.PID = pid
			inst.ReleaseInfo = rel
			inst.StartupTime = time.Since(began)
			// The child keeps running after this process exits; the
			// goroutine waiting on it is abandoned only then.
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("cassandra: the JVM exited before CQL answered (%v); log tail:\n%s", err, LogTail(dir, 60))
		case <-waitCtx.Done():
			_ = killGroup(pid, 10*time.Second)
			return fmt.Errorf("cassandra: no CQL answer on %s within %v (%w); log tail:\n%s", inst.Host, o.StartTimeout, waitCtx.Err(), LogTail(dir, 60))
		case <-tick.C:
		}
	}
}

func probe(host string) (string, error) { return probeInstance(&Instance{Host: host}) }

// probeInstance reads the node's release version, as the superuser over
// TLS on a Secure node. A Secure node answers only once its default
// superuser exists.
func probeInstance(inst *Instance) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	s, err := connect(ctx, inst, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer s.Close()
	var rel string
	if err := s.Query("SELECT release_version FROM system.local").Scan(&rel); err != nil {
		return "", err
	}
	return rel, nil
}

// connect opens a session to the one node inst through storage/cql
// (cqlseq's one way to a session), as the superuser over TLS on a Secure
// node, its queries bounded by timeout.
func connect(ctx context.Context, inst *Instance, timeout time.Duration) (*gocql.Session, error) {
	o := cql.Options{
		Hosts:                    []string{inst.Host},
		DisableInitialHostLookup: true,
		Timeout:                  timeout,
		ConnectTimeout:           timeout,
		Logger:                   slog.New(slog.DiscardHandler),
	}
	if inst.Secure {
		pool, err := caPool(inst.CAFile)
		if err != nil {
			return nil, err
		}
		o.TLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		o.Username, o.Password = Superuser, SuperuserPassword
	}
	return cql.Connect(ctx, o)
}

func jvmArgs(o Options, lib, jamm, dir string) []string {
	a := []string{
		"-Xms" + o.Heap, "-Xmx" + o.Heap, "-Xss256k",
		"-XX:+UseG1GC", "-XX:+HeapDumpOnOutOfMemoryError", "-XX:HeapDumpPath=" + filepath.Join(dir, "tmp"),
		"-Djdk.attach.allowAttachSelf=true", "-Dio.netty.tryReflectionSetAccessible=true",
		"-Djava.net.preferIPv4Stack=true", "-Dchronicle.analytics.disable=true",
		"-javaagent:" + jamm,
		"-Dcassandra.config=file://" + filepath.Join(dir, "cassandra.yaml"),
		"-Dcassandra.storagedir=" + dir,
		"-Dcassandra-foreground=yes",
		"-Dlogback.configurationFile=" + filepath.Join(dir, "logback.xml"),
		"-Dcassandra.logdir=" + filepath.Join(dir, "logs"),
		"-Dcassandra.skip_wait_for_gossip_to_settle=0",
		"-Dcassandra.ring_delay_ms=1000",
		"-Dcassandra.superuser_setup_delay_ms=0",
		"-Dcassandra.skip_sync=true",
		"-Djava.io.tmpdir=" + filepath.Join(dir, "tmp"),
		"-Djna.tmpdir=" + filepath.Join(dir, "tmp"),
	}
	if !o.CrashSafe {
		a = append(a, "-Dcassandra.unsafesystem=true")
	}
	for _, x := range []string{"java.base/jdk.internal.misc", "java.management.rmi/com.sun.jmx.remote.internal.rmi",
		"java.management/com.sun.jmx.remote.security", "java.rmi/sun.rmi.registry", "java.rmi/sun.rmi.server",
		"java.sql/java.sql", "java.base/java.lang.ref", "jdk.unsupported/sun.misc"} {
		a = append(a, "--add-exports", x+"=ALL-UNNAMED")
	}
	for _, x := range []string{"java.base/java.lang.module", "java.base/jdk.internal.loader", "java.base/jdk.internal.ref",
		"java.base/jdk.internal.reflect", "java.base/jdk.internal.math", "java.base/jdk.internal.module",
		"java.base/jdk.internal.util.jar", "java.base/sun.nio.ch", "java.base/java.io", "java.base/java.lang.reflect",
		"java.base/java.lang", "java.base/java.util", "java.base/java.nio", "jdk.management/com.sun.management.internal"} {
		a = append(a, "--add-opens", x+"=ALL-UNNAMED")
	}
	return append(a, "-cp", filepath.Join(lib, "*"), "org.apache.cassandra.service.CassandraDaemon")
}

// cassandraYAML is the configuration of a single node on 127.0.0.1.
func cassandraYAML(dir string, nativePort, storagePort int, crashSafe bool) string {
	return nodeYAML(singleNode(dir, nativePort, storagePort, crashSafe))
}

func singleNode(dir string, nativePort, storagePort int, crashSafe bool) nodeConfig {
	return nodeConfig{dir: dir, listen: "127.0.0.1", seed: "127.0.0.1", token: "0",
		nativePort: nativePort, storagePort: storagePort, crashSafe: crashSafe}
}

// nodeConfig is what differs between the cassandra.yaml files of nodes.
type nodeConfig struct {
	dir                     string
	listen                  string // listen_address and rpc_address
	seed                    string // the seed's address (its storage port is storagePort)
	token                   string // initial_token
	nativePort, storagePort int
	crashSafe               bool
	joinWithoutBootstrap    bool   // auto_bootstrap: false (a node of a fresh, empty cluster)
	secure                  bool   // password authentication, roles, client TLS only
	keystore                string // secure: the node's JKS keystore (password keystorePassword)
}

// nodeYAML is a node's cassandra.yaml. Its request timeouts stay below the
// client's deadline of a call (storage/cql DefaultTimeout, 5 s): a
// coordinator reports a replica timeout (2 s) while the client still waits,
// inside an LWT attempt (4 s), and a Paxos round under contention gives up
// (1.5 s) before the attempt does.
func nodeYAML(c nodeConfig) string {
	// Cassandra refuses a sync period in batch mode.
	sync := "commitlog_sync: batch\n"
	if !c.crashSafe {
		sync = "commitlog_sync: periodic\ncommitlog_sync_period: 10000ms\n"
	}
	if c.joinWithoutBootstrap {
		sync += "auto_bootstrap: false\n"
	}
	return fmt.Sprintf(`cluster_name: cqlseq-test
num_tokens: 1
initial_token: %[5]s
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
endpoint_snitch: SimpleSnitch
%[4]scommitlog_directory: %[1]s/commitlog
data_file_directories:
  - %[1]s/data
saved_caches_directory: %[1]s/saved_caches
hints_directory: %[1]s/hints
cdc_raw_directory: %[1]s/cdc_raw
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "%[7]s:%[3]d"
listen_address: %[6]s
rpc_address: %[6]s
storage_port: %[3]d
native_transport_port: %[2]d
start_native_transport: true
auto_snapshot: false
write_request_timeout: 2000ms
read_request_timeout: 2000ms
range_request_timeout: 4000ms
request_timeout: 4000ms
cas_contention_timeout: 1500ms
%[8]s`, c.dir, c.nativePort, c.storagePort, sync, c.token, c.listen, c.seed, security(c))
}

// security is the end of a node's cassandra.yaml: open, or (secure)
// passwords, roles and client TLS only.
func security(c nodeConfig) string {
	if !c.secure {
		return "authenticator: AllowAllAuthenticator\nauthorizer: AllowAllAuthorizer\n"
	}
	return fmt.Sprintf(`authenticator: PasswordAuthenticator
authorizer: CassandraAuthorizer
role_manager: CassandraRoleManager
roles_validity: 0ms
permissions_validity: 0ms
client_encryption_options:
  enabled: true
  optional: false
  keystore: %s
  keystore_password: %s
  require_client_auth: false
`, c.keystore, keystorePassword)
}

const logbackXML = `<configuration scan="false">
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>${cassandra.logdir}/system.log</file>
    <encoder><pattern>%-5level [%thread] %date{ISO8601} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <root level="WARN"><appender-ref ref="FILE"/></root>
  <logger name="org.apache.cassandra.service.CassandraDaemon" level="INFO"/>
  <logger name="org.apache.cassandra.gms" level="INFO"/>
  <logger name="org.apache.cassandra.net" level="INFO"/>
</configuration>
`

func freePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("cassandra: finding a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func raiseNoFile() {
	var r syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r) == nil && r.Cur < 100000 {
		if r.Max < 100000 {
			r.Cur = r.Max
		} else {
			r.Cur = 100000
		}
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r)
	}
}

// Stop ends the instance's process group (SIGTERM, then SIGKILL after 20 s)
// after checking the PID still belongs to a CassandraDaemon started in
// inst.Dir, reports the process's peak resident set, and removes inst.Dir.
func Stop(inst *Instance) (peakRSSKiB int64, err error) {
	if inst.PID > 0 && isOurs(inst) {
		peakRSSKiB = peakRSS(inst.PID)
		if err := killGroup(inst.PID, 20*time.Second); err != nil {
			return peakRSSKiB, err
		}
	}
	if inst.Dir != "" && strings.Contains(filepath.Base(inst.Dir), "cqlseq-cassandra-") {
		if err := os.RemoveAll(inst.Dir); err != nil {
			return peakRSSKiB, fmt.Errorf("cassandra: removing %s: %w", inst.Dir, err)
		}
	}
	return peakRSSKiB, nil
}

// Running reports whether the instance's process is alive and is the
// CassandraDaemon this launcher started in inst.Dir (a stale state file left
// by a killed session names a dead or reused pid).
func (inst *Instance) Running() bool { return alive(inst.PID) && isOurs(inst) }

func isOurs(inst *Instance) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", inst.PID))
	if err != nil {
		return false
	}
	cmd := string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
	return strings.Contains(cmd, "CassandraDaemon") && strings.Contains(cmd, filepath.Clean(inst.Dir)+"/")
}

// listen returns the node's address.
func (inst *Instance) listen() string {
	if inst.Listen == "" {
		return "127.0.0.1"
	}
	return inst.Listen
}

func peakRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				n, _ := strconv.ParseInt(f[1], 10, 64)
				return n
			}
		}
	}
	return 0
}

func killGroup(pid int, grace time.Duration) error {
	_ = syscall.Kill(-pid, syscall.SIGCONT) // a paused node cannot act on SIGTERM
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if !alive(pid) {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	for range 50 {
		if !alive(pid) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("cassandra: pid %d did not exit after SIGKILL", pid)
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) S ...
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// LogTail returns the last n lines of the run's logs (stdout and system.log).
func LogTail(dir string, n int) string {
	var sb strings.Builder
	for _, f := range []string{"logs/stdout.log", "logs/system.log"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			continue
		}
		fmt.Fprintf(&sb, "--- %s\n%s\n", f, tail(string(b), n))
	}
	return sb.String()
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// WriteState saves inst to path as JSON.
func WriteState(path string, inst *Instance) error {
	b, err := json.MarshalIndent(inst, "", "  ")
	if err != nil {
		return fmt.Errorf("cassandra: %w", err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("cassandra: %w", err)
	}
	return nil
}

// ReadState loads an Instance saved by WriteState.
func ReadState(path string) (*Instance, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cassandra: %w", err)
	}
	var inst Instance
	if err := json.Unmarshal(b, &inst); err != nil {
		return nil, fmt.Errorf("cassandra: state file %s: %w", path, err)
	}
	return &inst, nil
}
