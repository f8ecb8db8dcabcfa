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
