package itest

import (
	"os"
	"path/filepath"
	"testing"
)

func TestNoteClusterAppendsThePackagesLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "it.log")
	t.Setenv("CQLSEQ_IT_LOG", path)
	noteCluster("cassandra 5.0.8 at localhost:1 (from testcontainers, image cqlseq/cassandra:5.0.8)")
	noteCluster("second")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "itest: cassandra 5.0.8 at localhost:1 (from testcontainers, image cqlseq/cassandra:5.0.8)\nitest: second\n"
	if string(b) != want {
		t.Fatalf("log %q, want %q", b, want)
	}
}
