package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cqlseq/cqlseq/testenv/cassandra"
)

// fakeNode starts a process group whose leader's command line looks like a
// launcher node's in dir (CassandraDaemon and dir/), and returns its state
// file.
func fakeNode(t *testing.T) (state string, pid int) {
	t.Helper()
	dir := t.TempDir()
	node := filepath.Join(dir, "cqlseq-cassandra-node1")
	cmd := exec.Command("sh", "-c", "sleep 30", "CassandraDaemon", node+"/")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGCONT)
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	c := &cassandra.Cluster{Dir: dir, Nodes: []*cassandra.Instance{{PID: cmd.Process.Pid, Dir: node, Host: "127.0.0.1:1"}}}
	state = filepath.Join(dir, "state.json")
	if err := cassandra.WriteClusterState(state, c); err != nil {
		t.Fatal(err)
	}
	return state, cmd.Process.Pid
}

func procState(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])[0]
}

func TestPauserAround(t *testing.T) {
	state, pid := fakeNode(t)
	p, err := newPauser(state, 1, 50*time.Millisecond, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop()
	var during string
	desc, err := p.around(func() {
		time.Sleep(150 * time.Millisecond)
		during = procState(t, pid)
	})
	if err != nil {
		t.Fatal(err)
	}
	if during != "T" {
		t.Errorf("state during the pause %q, want T", during)
	}
	if s := procState(t, pid); s == "T" {
		t.Errorf("state after around %q: not resumed", s)
	}
	if !strings.Contains(desc, "during the pause") || !strings.Contains(desc, "node 1 paused 0.0") {
		t.Errorf("description %q", desc)
	}
	// A child that ends before -pause-after: no pause.
	desc, err = p.around(func() {})
	if err != nil || !strings.HasPrefix(desc, "not paused") {
		t.Errorf("around a short child: %q, %v", desc, err)
	}
	// A pause interrupted by stop: resumed, and no later pause.
	if err := p.pause(); err != nil {
		t.Fatal(err)
	}
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if s := procState(t, pid); s == "T" {
		t.Errorf("state after stop %q: not resumed", s)
	}
	if err := p.pause(); err != nil || p.paused {
		t.Errorf("pause after stop: paused %v, %v", p.paused, err)
	}
	if !strings.Contains(p.summary(), "paused 1 times") {
		t.Errorf("summary %q", p.summary())
	}
}
