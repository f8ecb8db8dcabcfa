package cassandra

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestImageContextTemplatesMatchTheEntrypoint checks that the build
// context has every file the Dockerfile copies, and that each placeholder
// of the configuration templates is one the entrypoint fills in.
func TestImageContextTemplatesMatchTheEntrypoint(t *testing.T) {
	lib := t.TempDir()
	for _, j := range []string{"cassandra-all-5.0.8.jar", "jamm-0.4.0.jar"} {
		require.NoError(t, os.WriteFile(filepath.Join(lib, j), []byte("jar"), 0o644))
	}
	dir := t.TempDir()
	require.NoError(t, writeImageContext(dir, lib))
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err, name)
		return string(b)
	}
	require.Equal(t, "jar", read("lib/cassandra-all-5.0.8.jar"))
	entry := read("bin/cassandra-entrypoint")
	for _, y := range []string{"conf/cassandra.yaml.in", "conf/cassandra-crash-safe.yaml.in"} {
		s := read(y)
		require.Contains(t, s, "listen_address: @ADDRESS@", y)
		require.Contains(t, s, `seeds: "@SEEDS@:7000"`, y)
		require.Contains(t, s, "initial_token: @TOKEN@", y)
		require.Contains(t, s, "native_transport_port: 9042", y)
		require.Contains(t, s, "- /var/lib/cassandra/data", y)
	}
	require.Contains(t, read("conf/cassandra-crash-safe.yaml.in"), "commitlog_sync: batch")
	for _, sub := range []string{"s/@ADDRESS@/", "s/@SEEDS@:7000/", "s/@TOKEN@/", "s/@HEAP@/"} {
		require.Contains(t, entry, sub)
	}
	args := read("conf/jvm.args")
	require.Contains(t, args, "-Xmx@HEAP@\n")
	require.Contains(t, args, "-javaagent:/opt/cassandra/lib/jamm-0.4.0.jar\n")
	require.Contains(t, args, "-Dcassandra.unsafesystem=true\n", "the entrypoint drops it for CASSANDRA_CRASH_SAFE=1")
	require.True(t, strings.HasSuffix(args, "org.apache.cassandra.service.CassandraDaemon\n"))
	require.Contains(t, read("Dockerfile"), "ENTRYPOINT [\"/usr/local/bin/cassandra-entrypoint\"]")
	fi, err := os.Stat(filepath.Join(dir, "bin", "cassandra-ready"))
	require.NoError(t, err)
	require.NotZero(t, fi.Mode()&0o111, "cassandra-ready is executable")
}
