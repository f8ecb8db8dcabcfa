// Package testenv holds the test environment: the Cassandra launcher and the
// checks of docker-compose.yml and docker-compose.cassandra.yml.
package testenv

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/cqlseq/cqlseq/testenv/cassandra"
)

// composeFile is what the checks read of a compose file.
type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Command     string            `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Ports       []string          `yaml:"ports"`
		Healthcheck map[string]any    `yaml:"healthcheck"`
		DependsOn   map[string]any    `yaml:"depends_on"`
	} `yaml:"services"`
}

// readCompose returns the file at path and what the checks read of it.
func readCompose(t *testing.T, path string) ([]byte, composeFile) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var f composeFile
	require.NoError(t, yaml.Unmarshal(b, &f))
	return b, f
}

// TestComposeFile checks docker-compose.yml where no compose client can: a
// 3-node ScyllaDB cluster on a pinned tag, in developer mode with small
// memory, health-checked, publishing CQL 9042 and shard-aware 19042 on the
// first node, the others seeded from it.
func TestComposeFile(t *testing.T) {
	b, f := readCompose(t, "../docker-compose.yml")
	require.Len(t, f.Services, 3)
	for name, s := range f.Services {
		require.Regexp(t, `^scylladb/scylla:\d+\.\d+\.\d+$`, s.Image, name)
		require.Contains(t, s.Command, "--developer-mode 1", name)
		require.Contains(t, s.Command, "--memory", name)
		require.Contains(t, s.Command, "--seeds=scylla1", name)
		require.NotEmpty(t, s.Healthcheck["test"], name)
	}
	first := f.Services["scylla1"]
	require.ElementsMatch(t, []string{"9042:9042", "19042:19042"}, first.Ports)
	require.NotNil(t, f.Services["scylla2"].DependsOn["scylla1"])
	require.NotNil(t, f.Services["scylla3"].DependsOn["scylla2"])
	require.True(t, strings.Contains(string(b), "make test-integration"), "the file says how to point the tests at it")
}

// TestComposeCassandraFile checks docker-compose.cassandra.yml: three nodes
// of cqlseq's own image (CQLSEQ_IMAGE may name another build), seeded from
// the first, each with the initial token InitialToken gives a 3-node
// cluster, health-checked, started one after another, CQL published from
// the first.
func TestComposeCassandraFile(t *testing.T) {
	b, f := readCompose(t, "../docker-compose.cassandra.yml")
	require.Len(t, f.Services, 3)
	for i, name := range []string{"cassandra1", "cassandra2", "cassandra3"} {
		s, ok := f.Services[name]
		require.True(t, ok, name)
		require.Equal(t, "${CQLSEQ_IMAGE:-"+cassandra.ImageName(cassandra.DefaultVersion)+"}", s.Image, name)
		require.Equal(t, "cassandra1", s.Environment["CASSANDRA_SEEDS"], name)
		require.Equal(t, cassandra.InitialToken(i, 3), s.Environment["CASSANDRA_INITIAL_TOKEN"], name)
		require.Equal(t, "false", s.Environment["CASSANDRA_AUTO_BOOTSTRAP"], name)
		require.NotEmpty(t, s.Environment["CASSANDRA_HEAP"], name)
		require.NotEmpty(t, s.Healthcheck["test"], name)
	}
	require.Equal(t, []string{"9042:9042"}, f.Services["cassandra1"].Ports)
	require.NotNil(t, f.Services["cassandra2"].DependsOn["cassandra1"])
	require.NotNil(t, f.Services["cassandra3"].DependsOn["cassandra2"])
	require.Contains(t, string(b), "make image", "the file says how to get its image")
}
