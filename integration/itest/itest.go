// Package itest is the shared harness of cqlseq's integration tests (the
// integration module, its own Go module so that testcontainers never reaches
// library users). Every test package of the module calls Main from its
// TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(itest.Main(m)) }
//
// Main finds the cluster in this order:
//  1. CQLSEQ_CQL_HOSTS (comma-separated host:port list), engine from
//     CQLSEQ_CQL_ENGINE or detected;
//  2. when a Docker engine answers, one node in a container through
//     testcontainers (without its reaper; see dockertest): the image
//     CQLSEQ_CQL_IMAGE, else ScyllaDB (modules/scylladb) if its image is
//     present or can be pulled, else cqlseq's Cassandra image
//     (cassandra.BuildImage builds it if missing);
//  3. a single-node Apache Cassandra started from Maven Central jars by
//     testenv/cassandra.
//
// CQLSEQ_CQL_CLUSTER=testcontainers allows only 2 (so a run cannot fall
// back to the launcher unnoticed), =launcher only 3 (as CQLSEQ_NO_DOCKER
// does). The container is terminated when the tests end, also on SIGINT or
// SIGTERM; if the process dies without that (a panic in a test, go test's
// -timeout), a watchdog process removes it.
//
// With CI=true, finding no cluster fails the run; otherwise it skips it.
// One uniquely named keyspace is created (and migrated) per test binary and
// dropped at the end; tests sharing it must use keys of their own, or take a
// fresh keyspace with NewKeyspace.
//
// Tests of the cqlseq binary run it with RunCLI (or ExecCLI), which builds
// it once per test binary (CLI).
package itest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gocql/gocql"
	"go.uber.org/goleak"

	"github.com/cqlseq/cqlseq/integration/dockertest"
	"github.com/cqlseq/cqlseq/storage/cql"
	"github.com/cqlseq/cqlseq/testenv/cassandra"
	"github.com/cqlseq/cqlseq/testenv/leakcheck"
)

// testCluster describes the cluster found by Main.
var testCluster struct {
	hosts    []string
	engine   string // "cassandra" or "scylla"
	source   string // "env", "testcontainers" or "launcher"
	image    string // testcontainers: the image
	release  string // system.local release_version
	keyspace string // the run's shared keyspace
}

// Main finds the cluster, creates the run's keyspace, runs the tests, drops
// the keyspace and stops what it started. It returns the exit code.
func Main(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := parseRF(os.Getenv("CQLSEQ_CQL_RF")); err != nil {
		fmt.Fprintf(os.Stderr, "integration: FAIL: %v\n", err)
		return 1
	}
	stop, err := findCluster(ctx)
	if err != nil {
		if os.Getenv("CI") == "true" {
			fmt.Fprintf(os.Stderr, "integration: FAIL: no CQL cluster (CI=true makes this a failure): %v\n", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "integration: SKIP: no CQL cluster: %v\n", err)
		return 0
	}
	stop = stopOnce(stop)
	defer stop()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		if s, ok := <-sigs; ok {
			fmt.Fprintf(os.Stderr, "integration: %v: stopping the cluster\n", s)
			stop()
			os.Exit(1)
		}
	}()
	from := testCluster.source
	if testCluster.image != "" {
		from += ", image " + testCluster.image
	}
	found := fmt.Sprintf("%s %s at %s (from %s), replication factor %d", testCluster.engine, testCluster.release, strings.Join(testCluster.hosts, ","), from, replicationFactor())
	fmt.Fprintf(os.Stderr, "integration: %s\n", found)
	noteCluster(found)

	ks, drop, err := createRunKeyspace(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "integration: FAIL: %v\n", err)
		return 1
	}
	testCluster.keyspace = ks
	code := m.Run()
	removeCLI()
	if err := drop(); err != nil {
		fmt.Fprintf(os.Stderr, "integration: dropping keyspace %s: %v\n", ks, err)
	}
	return code
}

// findCluster sets testCluster and returns a func that stops what it started.
func findCluster(ctx context.Context) (stop func(), err error) {
	if h := strings.TrimSpace(os.Getenv("CQLSEQ_CQL_HOSTS")); h != "" {
		testCluster.hosts = splitHosts(h)
		testCluster.source = "env"
		return func() {}, describeCluster(ctx, os.Getenv("CQLSEQ_CQL_ENGINE"))
	}
	var reasons []error
	path := strings.TrimSpace(os.Getenv("CQLSEQ_CQL_CLUSTER"))
	switch path {
	case "", "testcontainers", "launcher":
	default:
		return nil, fmt.Errorf("CQLSEQ_CQL_CLUSTER %q: want testcontainers or launcher", path)
	}
	if path != "launcher" && os.Getenv("CQLSEQ_NO_DOCKER") == "" {
		dockertest.Prepare()
		stop, err := startContainer(ctx)
		if err == nil {
			return stop, nil
		}
		if path == "testcontainers" {
			return nil, fmt.Errorf("testcontainers (CQLSEQ_CQL_CLUSTER=testcontainers): %w", err)
		}
		reasons = append(reasons, fmt.Errorf("testcontainers: %w", err))
	}
	o := cassandra.Options{Log: func(f string, a ...any) { fmt.Fprintf(os.Stderr, "integration: "+f+"\n", a...) }}
	inst, err := cassandra.Start(ctx, o)
	if err != nil {
		reasons = append(reasons, fmt.Errorf("cassandra launcher: %w", err))
		return nil, errors.Join(reasons...)
	}
	testCluster.hosts = []string{inst.Host}
	testCluster.source = "launcher"
	fmt.Fprintf(os.Stderr, "integration: Cassandra answered CQL %.1f s after JVM start\n", inst.StartupTime.Seconds())
	stop = func() {
		rss, err := cassandra.Stop(inst)
		if err != nil {
			fmt.Fprintf(os.Stderr, "integration: stopping Cassandra: %v\n", err)
		}
		fmt.Fprintf(os.Stderr, "integration: Cassandra stopped, peak RSS %.0f MiB\n", float64(rss)/1024)
	}
	if err := describeCluster(ctx, "cassandra"); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// noteCluster appends "package: found" to the file CQLSEQ_IT_LOG names, if
// any: go test shows a passing package's output only with -v, and make
// test-integration prints this file to say which cluster each package used.
func noteCluster(found string) {
	path := os.Getenv("CQLSEQ_IT_LOG")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	wd, _ := os.Getwd()
	fmt.Fprintf(f, "%s: %s\n", filepath.Base(wd), found)
}

// stopOnce returns a func that calls stop the first time only.
func stopOnce(stop func()) func() {
	var once sync.Once
	return func() { once.Do(stop) }
}

func splitHosts(s string) []string {
	var out []string
	for _, h := range strings.Split(s, ",") {
		if h = strings.TrimSpace(h); h != "" {
			out = append(out, h)
		}
	}
	return out
}

// describeCluster reads release_version and decides the engine
// (cql.DetectEngine) unless given.
func describeCluster(ctx context.Context, engine string) error {
	s, err := cql.Connect(ctx, connOptions())
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.Query("SELECT release_version FROM system.local").WithContext(ctx).Scan(&testCluster.release); err != nil {
		return fmt.Errorf("reading system.local: %w", err)
	}
	if engine == "" {
		if engine, err = cql.DetectEngine(ctx, s); err != nil {
			return err
		}
	}
	testCluster.engine = engine
	return nil
}

// connOptions returns the storage/cql connection options of the found
// cluster, keyspace unset.
func connOptions() cql.Options {
	return cql.Options{
		Hosts:          Hosts(),
		Timeout:        10 * time.Second,
		ConnectTimeout: 10 * time.Second,
		// A single contact point on loopback or behind a container port
		// mapping: do not follow the addresses the node advertises.
		DisableInitialHostLookup: len(testCluster.hosts) == 1,
	}
}

// connect opens a session to the found cluster, keyspace unset.
func connect(ctx context.Context) (*gocql.Session, error) {
	return cql.Connect(ctx, connOptions())
}

// Hosts returns the cluster's contact points (host:port).
func Hosts() []string { return slices.Clone(testCluster.hosts) }

// Engine returns "cassandra" or "scylla".
func Engine() string { return testCluster.engine }

// Release returns the server's release_version.
func Release() string { return testCluster.release }

// Source says how the cluster was found: "env", "testcontainers" or
// "launcher".
func Source() string { return testCluster.source }

// Image returns the container image of a cluster from testcontainers, else
// "".
func Image() string { return testCluster.image }

// Keyspace returns the run's shared keyspace, with cqlseq's schema applied.
func Keyspace() string { return testCluster.keyspace }

// ClusterConfig returns a config for the test cluster, keyspace unset
// (cql.ClusterConfig), for a test that needs a gocql setting of its own.
func ClusterConfig(t testing.TB) *gocql.ClusterConfig {
	t.Helper()
	c, err := cql.ClusterConfig(connOptions())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Session returns a session to the test cluster (keyspace unset), closed at
// the test's cleanup.
func Session(t testing.TB) *gocql.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), WaitLimit)
	defer cancel()
	s, err := connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// UniqueName returns prefix followed by 12 random hex digits: a valid CQL
// identifier of at most 48 characters when prefix is short.
func UniqueName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// Replication returns the replication map of a test keyspace: replication
// factor CQLSEQ_CQL_RF (default 1; make test-cluster sets 3). Every
// session reads and writes at LOCAL_QUORUM and LOCAL_SERIAL, so with 3 a
// write needs 2 of the 3 replicas and a Paxos round really crosses nodes.
func Replication() string {
	return fmt.Sprintf("{'class': 'SimpleStrategy', 'replication_factor': %d}", replicationFactor())
}

// replicationFactor is CQLSEQ_CQL_RF, 1 when unset or not a number in
// 1..9 (Main reports an invalid value before any test runs).
func replicationFactor() int {
	rf, err := parseRF(os.Getenv("CQLSEQ_CQL_RF"))
	if err != nil {
		return 1
	}
	return rf
}

func parseRF(s string) (int, error) {
	if s = strings.TrimSpace(s); s == "" {
		return 1, nil
	}
	rf, err := strconv.Atoi(s)
	if err != nil || rf < 1 || rf > 9 {
		return 0, fmt.Errorf("CQLSEQ_CQL_RF %q: want a replication factor 1..9", s)
	}
	return rf, nil
}

// OpenStore opens a storage/cql Store with a session of its own on the
// run's keyspace, closed at the test's cleanup. tune, if given, adjusts the
// options first.
func OpenStore(tb testing.TB, tune ...func(*cql.Options)) *cql.Store {
	tb.Helper()
	hosts := Hosts()
	o := cql.Options{
		Hosts:                    hosts,
		Keyspace:                 Keyspace(),
		DisableInitialHostLookup: len(hosts) == 1,
		Timeout:                  10 * time.Second,
	}
	for _, f := range tune {
		f(&o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := cql.Open(ctx, o)
	if err != nil {
		tb.Fatalf("cql.Open on %v: %v", hosts, err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	return st
}

// NoLeaks checks at the end of t, after every cleanup registered later (the
// stores' Close among them), that t left no goroutine behind. The check
// waits, bounded by leakcheck.Wait, for goroutines that end asynchronously
// after a close (gocql's connection readers and write flushers). Call it
// before opening anything the test must close.
func NoLeaks(t testing.TB) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, ignore) })
}
