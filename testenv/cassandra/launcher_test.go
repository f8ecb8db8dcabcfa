package cassandra

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCheckToolsNamesMissingJava(t *testing.T) {
	o := Options{Java: filepath.Join(t.TempDir(), "no-such-java"), CacheDir: t.TempDir()}
	err := CheckTools(o)
	require.Error(t, err)
	require.True(t, errors.Is(err, ErrMissingTool))
	require.Contains(t, err.Error(), "java")
	require.Contains(t, err.Error(), "Java 17")
}

func TestConfigUsesGivenPortsAndDirs(t *testing.T) {
	y := cassandraYAML("/run/x", 19042, 17000, false)
	for _, want := range []string{"commitlog_sync: periodic\ncommitlog_sync_period: 10000ms\n", "native_transport_port: 19042", "storage_port: 17000", `seeds: "127.0.0.1:17000"`,
		"- /run/x/data", "commitlog_directory: /run/x/commitlog", "auto_snapshot: false",
		// Below the client's 5 s deadline (storage/cql DefaultTimeout), and a
		// replica write timeout inside the 4 s LWT attempt.
		"write_request_timeout: 2000ms", "read_request_timeout: 2000ms", "request_timeout: 4000ms", "cas_contention_timeout: 1500ms"} {
		require.Contains(t, y, want)
	}
	y = cassandraYAML("/run/x", 19042, 17000, true)
	require.Contains(t, y, "commitlog_sync: batch\n")
	require.NotContains(t, y, "commitlog_sync_period", "Cassandra refuses a period in batch mode")
	args := strings.Join(jvmArgs(Options{Heap: "1g"}, "/lib", "/lib/jamm-0.4.0.jar", "/run/x"), " ")
	for _, want := range []string{"-Xmx1g", "-javaagent:/lib/jamm-0.4.0.jar", "-Dcassandra.config=file:///run/x/cassandra.yaml",
		"--add-opens java.base/sun.nio.ch=ALL-UNNAMED", "--add-exports java.base/jdk.internal.misc=ALL-UNNAMED",
		"org.apache.cassandra.service.CassandraDaemon"} {
		require.Contains(t, args, want)
	}
	require.NotContains(t, args, "cassandra.jmx", "JMX stays off")
	require.NotContains(t, args, "jmxremote", "JMX stays off")
	require.Contains(t, args, "-Dcassandra.unsafesystem=true", "schema changes unflushed by default")
	safe := strings.Join(jvmArgs(Options{Heap: "1g", CrashSafe: true}, "/lib", "/lib/jamm-0.4.0.jar", "/run/x"), " ")
	require.NotContains(t, safe, "unsafesystem", "a crash-safe node flushes its schema changes")
	require.Contains(t, safe, "-Dcassandra.skip_sync=true")
}

func TestParseJavaMajor(t *testing.T) {
	for _, tt := range []struct {
		out  string
		want int
		werr bool
	}{
		{`openjdk version "17.0.15" 2025-04-15`, 17, false},
		{`java version "1.8.0_402"`, 8, false},
		{`openjdk version "21" 2023-09-19`, 21, false},
		{`garbage`, 0, true},
	} {
		n, err := parseJavaMajor(tt.out)
		if tt.werr {
			require.Error(t, err, tt.out)
			continue
		}
		require.NoError(t, err, tt.out)
		require.Equal(t, tt.want, n, tt.out)
	}
}

func TestOptionsValidate(t *testing.T) {
	var o Options
	o.EnsureDefaults()
	require.NoError(t, o.Validate())

	o = Options{Version: "", Java: "", Heap: "", StartTimeout: -time.Second}
	err := o.Validate()
	require.ErrorIs(t, err, ErrInvalidOptions)
	for _, want := range []string{"Version", "Java", "Heap", "StartTimeout"} {
		require.Contains(t, err.Error(), want)
	}
}

func TestSecureNodeYAML(t *testing.T) {
	open := nodeYAML(singleNode("/d", 9042, 7000, false))
	if !strings.Contains(open, "authenticator: AllowAllAuthenticator") || strings.Contains(open, "client_encryption_options") {
		t.Fatalf("an open node:\n%s", open)
	}
	c := singleNode("/d", 9042, 7000, false)
	c.secure, c.keystore = true, "/d/tls/keystore.jks"
	y := nodeYAML(c)
	for _, w := range []string{"authenticator: PasswordAuthenticator\n", "authorizer: CassandraAuthorizer\n", "role_manager: CassandraRoleManager\n",
		"client_encryption_options:\n  enabled: true\n  optional: false\n  keystore: /d/tls/keystore.jks\n"} {
		if !strings.Contains(y, w) {
			t.Errorf("secure yaml lacks %q:\n%s", w, y)
		}
	}
	if strings.Contains(y, "AllowAll") {
		t.Errorf("secure yaml still allows all:\n%s", y)
	}
}

func TestStartClusterRefusesSecure(t *testing.T) {
	_, err := StartCluster(context.Background(), Options{Secure: true, Java: "java"}, 2, nil)
	if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "Secure is for Start") {
		t.Fatalf("StartCluster with Secure: %v", err)
	}
}
