package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// child is a running cqlseq bench.
type child struct {
	cmd    *exec.Cmd
	done   chan struct{}
	err    error
	ackLog string
	json   string
	out    string
}

// startBench starts cqlseq bench on ks in mode with load ld, appending to
// ackLog, for an hour (it is killed or interrupted long before). extra
// come before -bench-args.
func (t *tort) startBench(ks, mode string, ld load, ackLog, tag string, extra ...string) (*child, error) {
	c := &child{ackLog: ackLog, json: filepath.Join(t.c.dir, tag+".json"), out: filepath.Join(t.c.dir, tag+".out"), done: make(chan struct{})}
	_ = os.Remove(c.json)
	f, err := os.Create(c.out)
	if err != nil {
		return nil, err
	}
	c.cmd = exec.Command(t.c.cqlseq, t.benchArgs(ks, mode, ld, ackLog, c.json, extra)...)
	c.cmd.Stdout, c.cmd.Stderr = f, f
	// A child outlives no campaign: killed if the driver dies.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		_ = f.Close()
		return nil, err
	}
	go func() {
		c.err = c.cmd.Wait()
		_ = f.Close()
		close(c.done)
	}()
	return c, nil
}

// benchArgs are the arguments of a child bench: the campaign's, then
// extra, then -bench-args (a repeated flag's last value wins, so they
// override).
func (t *tort) benchArgs(ks, mode string, ld load, ackLog, jsonFile string, extra []string) []string {
	args := []string{"bench", "--store", "cql", "--hosts", t.c.hosts, "--keyspace", ks, "--mode", mode,
		"--partitions", strconv.Itoa(ld.partitions), "--workspaces", strconv.Itoa(ld.workspaces),
		"--concurrency", strconv.Itoa(ld.concurrency), "--duration", "1h",
		"--timeout", t.c.timeout.String(), "--ack-log", ackLog, "--json", jsonFile, "--ready-timeout", "5m"}
	return append(append(args, extra...), t.c.benchArgs...)
}

func (c *child) kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
}

// stop kills the child unless it has ended.
func (c *child) stop() {
	select {
	case <-c.done:
	default:
		c.kill()
	}
}

// interrupt stops the child as Ctrl-C would (it writes its report) and
// returns its busy and failed counts.
func (c *child) interrupt() string {
	_ = c.cmd.Process.Signal(syscall.SIGCONT)
	_ = c.cmd.Process.Signal(os.Interrupt)
	select {
	case <-c.done:
	case <-time.After(2 * time.Minute):
		c.kill()
		return "? (killed: did not stop)"
	}
	b, err := os.ReadFile(c.json)
	if err != nil {
		return "? (no report)"
	}
	return busyFailed(b)
}

// busyFailed reads "busy/failed" from bench's JSON report.
func busyFailed(b []byte) string {
	num := func(key string) string {
		i := bytes.Index(b, []byte(`"`+key+`": `))
		if i < 0 {
			return "?"
		}
		rest := b[i+len(key)+4:]
		j := bytes.IndexAny(rest, ",\n}")
		if j < 0 {
			return "?"
		}
		return string(rest[:j])
	}
	return num("rejections") + "/" + num("errors")
}
