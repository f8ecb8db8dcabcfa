package cassandra

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

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
