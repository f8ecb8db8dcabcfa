package cassandra

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

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

func TestExtraYAMLEndsTheFile(t *testing.T) {
	c := singleNode("/d", 9042, 7000, false)
	c.extra = "maximum_timestamp_fail_threshold: 1d"
	y := nodeYAML(c)
	if !strings.HasSuffix(y, "\nmaximum_timestamp_fail_threshold: 1d\n") {
		t.Fatalf("the extra settings do not end the file:\n%s", y)
	}
	if nodeYAML(singleNode("/d", 9042, 7000, false)) != strings.TrimSuffix(y, "maximum_timestamp_fail_threshold: 1d\n") {
		t.Fatal("the extra settings changed the rest of the file")
	}
}
