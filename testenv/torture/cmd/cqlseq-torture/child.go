package main

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/cqlseq/cqlseq/apppart"
	"github.com/cqlseq/cqlseq/testenv/torture"
)

// child is a running child process (a cqlseq bench).
type child struct {
	tag    string
	cmd    *exec.Cmd
	done   chan struct{} // closed once the process has exited
	err    error         // Wait's, set before done is closed
	ackLog string
	json   string
	out    string // its stdout
	errOut string // its stderr
	// timeline is the file bench --timeline writes (not when SIGKILLed).
	timeline string
	// sampler samples ackLog while the phase runs (see track).
	sampler  *torture.Sampler
	started  time.Time // when it was started
	exitedAt time.Time // set before done is closed
}

// startBench starts cqlseq bench on ks in mode with load ld, appending to
// ackLog, for an hour (it is killed or interrupted long before). extra
// come before -bench-args.
func (t *tort) startBench(ks, mode string, ld load, ackLog, tag string, extra ...string) (*child, error) {
	jsonFile := filepath.Join(t.c.dir, tag+".json")
	_ = os.Remove(jsonFile)
	tl := filepath.Join(t.c.dir, tag+".timeline.json")
	removeIfExists(tl)
	extra = append([]string{"--timeline", tl, "--timeline-interval", timelineInterval.String()}, extra...)
	c, err := startChild(t.c.dir, tag, t.c.cqlseq, t.benchArgs(ks, mode, ld, ackLog, jsonFile, extra)...)
	if err != nil {
		return nil, err
	}
	c.ackLog, c.json, c.timeline = ackLog, jsonFile, tl
	t.track(c)
	return c, nil
}

// startChild starts name with args, its stdout in dir/tag.out and its
// stderr in dir/tag.err. The child is SIGKILLed if the campaign dies.
func startChild(dir, tag, name string, args ...string) (*child, error) {
	c := &child{tag: tag, out: filepath.Join(dir, tag+".out"), errOut: filepath.Join(dir, tag+".err"), done: make(chan struct{})}
	fo, err := os.Create(c.out)
	if err != nil {
		return nil, err
	}
	fe, err := os.Create(c.errOut)
	if err != nil {
		_ = fo.Close()
		return nil, err
	}
	c.cmd = exec.Command(name, args...)
	c.cmd.Stdout, c.cmd.Stderr = fo, fe
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		_, _ = fo.Close(), fe.Close()
		return nil, err
	}
	c.started = time.Now()
	go func() {
		c.err = c.cmd.Wait()
		c.exitedAt = time.Now()
		_, _ = fo.Close(), fe.Close()
		close(c.done)
	}()
	return c, nil
}

// exited returns nil while the child runs; once it has exited, an error
// with its exit status and the last line of its stderr.
func (c *child) exited() error {
	select {
	case <-c.done:
	default:
		return nil
	}
	b, _ := os.ReadFile(c.errOut)
	last := lastLine(string(b))
	if last == "" {
		last = "(nothing on stderr)"
	}
	return fmt.Errorf("%s exited (%v): %s (output in %s, %s)", c.tag, c.err, last, c.out, c.errOut)
}

// benchArgs are the arguments of a child bench: the campaign's, then
// extra, then -bench-args (a repeated flag's last value wins, so they
// override). --hosts is a list flag, whose repetitions add up: the
// campaign's hosts are left out when extra gives --hosts.
func (t *tort) benchArgs(ks, mode string, ld load, ackLog, jsonFile string, extra []string) []string {
	args := []string{"bench", "--store", "cql"}
	if !slices.Contains(extra, "--hosts") {
		args = append(args, "--hosts", t.c.hosts)
	}
	args = append(args, "--keyspace", ks, "--mode", mode,
		"--partitions", strconv.Itoa(ld.partitions), "--workspaces", strconv.Itoa(ld.workspaces),
		"--concurrency", strconv.Itoa(ld.concurrency), "--duration", "1h",
		"--timeout", t.c.timeout.String(), "--ack-log", ackLog, "--json", jsonFile, "--ready-timeout", "5m",
		"--flush-after-events", flushWindowOf(ackLog))
	return append(append(args, extra...), t.c.benchArgs...)
}

// flushWindows are the --flush-after-events of the campaign's owners: after
// every group (numbers written under every fault, as before the window), a
// short window, and apppart's default.
var flushWindows = []int{1, 64, apppart.DefaultFlushAfterEvents}

// flushWindowOf is the flush window of the owner logging to ackLog: drawn
// from its name, so that owners started at once need no shared generator
// and a run's owners get the same windows again.
func flushWindowOf(ackLog string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(filepath.Base(ackLog)))
	return strconv.Itoa(flushWindows[h.Sum32()%uint32(len(flushWindows))])
}

func (c *child) kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
	if c.sampler != nil {
		c.sampler.Stop() // its last sample: the ack log as the child left it
	}
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
