package cassandra

import (
	"fmt"
	"path/filepath"
	"strings"
)

func jvmArgs(o Options, lib, jamm, dir string) []string {
	a := []string{
		"-Xms" + o.Heap, "-Xmx" + o.Heap, "-Xss256k",
		"-XX:+UseG1GC", "-XX:+HeapDumpOnOutOfMemoryError", "-XX:HeapDumpPath=" + filepath.Join(dir, "tmp"),
		"-Djdk.attach.allowAttachSelf=true", "-Dio.netty.tryReflectionSetAccessible=true",
		"-Djava.net.preferIPv4Stack=true", "-Dchronicle.analytics.disable=true",
		"-javaagent:" + jamm,
		"-Dcassandra.config=file://" + filepath.Join(dir, "cassandra.yaml"),
		// Read by GossipingPropertyFileSnitch only (Options.Datacenters);
		// SimpleSnitch ignores it and the file is then not written.
		"-Dcassandra-rackdc.properties=file://" + filepath.Join(dir, rackdcFile),
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
	extra                   string // appended as it is (Options.ExtraYAML)
	dc                      string // data centre (GossipingPropertyFileSnitch); "": SimpleSnitch
}

// rackdcFile is the node's data centre and rack, in its directory, when
// it has a data centre (nodeConfig.dc).
const rackdcFile = "cassandra-rackdc.properties"

// rackdcProperties is the content of a node's rackdcFile.
func rackdcProperties(dc string) string { return "dc=" + dc + "\nrack=rack1\n" }

// snitch is the node's endpoint_snitch.
func (c nodeConfig) snitch() string {
	if c.dc == "" {
		return "SimpleSnitch"
	}
	return "GossipingPropertyFileSnitch"
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
endpoint_snitch: %[10]s
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
%[8]s%[9]s`, c.dir, c.nativePort, c.storagePort, sync, c.token, c.listen, c.seed, security(c), extraYAML(c.extra), c.snitch())
}

// extraYAML is Options.ExtraYAML on lines of its own.
func extraYAML(extra string) string {
	if extra == "" || strings.HasSuffix(extra, "\n") {
		return extra
	}
	return extra + "\n"
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
