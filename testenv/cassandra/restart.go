package cassandra

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrInvalidInstance reports an Instance that Restart cannot restart.
var ErrInvalidInstance = errors.New("cassandra: invalid instance")

// Restart crashes inst and starts it again, as a node that loses power and
// comes back: it sends SIGKILL to inst's process group (no drain, no
// flush; an instance whose process has already ended is only started),
// waits down, and starts CassandraDaemon again in inst.Dir with the same
// cassandra.yaml (ports, commit log, data), waiting for CQL as Start does.
// On success inst's PID, ReleaseInfo and StartupTime describe the new
// process. o must name the Version inst runs; its CrashSafe is ignored (the
// instance keeps the mode it was started in), the other fields are used as
// by Start.
//
// Restart checks inst, o and the tools before it kills anything. What the
// node still holds after the crash depends on inst.CrashSafe (true: every
// acknowledged write and schema change). If the
// start fails, the node stays down and inst keeps the old, ended PID; Stop
// still removes its directory.
func Restart(ctx context.Context, inst *Instance, o Options, down time.Duration) error {
	o.EnsureDefaults()
	if inst != nil {
		o.CrashSafe = inst.CrashSafe
	}
	ports, err := checkRestart(inst, o, down)
	if err != nil {
		return err
	}
	if err := CheckTools(o); err != nil {
		return err
	}
	lib, err := Fetch(ctx, o)
	if err != nil {
		return err
	}
	if inst.PID > 0 && isOurs(inst) {
		if err := crash(inst.PID, 10*time.Second); err != nil {
			return err
		}
		o.Log("crashed Cassandra pid %d (SIGKILL to its process group); down for %v", inst.PID, down)
	}
	t := time.NewTimer(down)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
		return fmt.Errorf("cassandra: restart of %s: %w", inst.Dir, ctx.Err())
	}
	if err := waitPortsFree(ctx, inst.listen(), ports, 10*time.Second); err != nil {
		return err
	}
	return launch(ctx, o, lib, inst)
}

// checkRestart reports every reason inst cannot be restarted with o after
// down, and returns the ports its configuration binds.
func checkRestart(inst *Instance, o Options, down time.Duration) ([]int, error) {
	var errs []error
	bad := func(f string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: "+f, append([]any{ErrInvalidInstance}, a...)...))
	}
	if err := o.Validate(); err != nil {
		errs = append(errs, err)
	}
	if down < 0 {
		errs = append(errs, fmt.Errorf("%w: down time %v is negative", ErrInvalidOptions, down))
	}
	if inst == nil {
		bad("nil")
		return nil, errors.Join(errs...)
	}
	if inst.Version != o.Version {
		bad("it runs Cassandra %q, the options name %q", inst.Version, o.Version)
	}
	if !strings.Contains(filepath.Base(inst.Dir), "cqlseq-cassandra-") {
		bad("directory %q is not a run directory made by Start", inst.Dir)
		return nil, errors.Join(errs...)
	}
	native, storagePort, err := configuredPorts(filepath.Join(inst.Dir, "cassandra.yaml"))
	if err != nil {
		bad("%v", err)
		return nil, errors.Join(errs...)
	}
	if _, p, err := net.SplitHostPort(inst.Host); err != nil || p != strconv.Itoa(native) {
		bad("host %q does not match native_transport_port %d of its cassandra.yaml", inst.Host, native)
	}
	return []int{native, storagePort}, errors.Join(errs...)
}

// configuredPorts reads native_transport_port and storage_port from a
// cassandra.yaml written by Start.
func configuredPorts(path string) (native, storagePort int, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	found := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "native_transport_port" && k != "storage_port") {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n <= 0 || n > 65535 {
			return 0, 0, fmt.Errorf("%s: %s %q is not a port", path, k, strings.TrimSpace(v))
		}
		found[k] = n
	}
	if found["native_transport_port"] == 0 || found["storage_port"] == 0 {
		return 0, 0, fmt.Errorf("%s: native_transport_port or storage_port missing", path)
	}
	return found["native_transport_port"], found["storage_port"], nil
}

// crash sends SIGKILL to pid's process group and waits until pid has ended.
func crash(pid int, limit time.Duration) error {
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("cassandra: killing process group %d: %w", pid, err)
	}
	deadline := time.Now().Add(limit)
	for alive(pid) {
		if time.Now().After(deadline) {
			return fmt.Errorf("cassandra: pid %d did not exit within %v of SIGKILL", pid, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// waitPortsFree waits until every port can be bound on addr (a crashed
// process's sockets close with it; anything else holding one is reported).
func waitPortsFree(ctx context.Context, addr string, ports []int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		var busy error
		for _, p := range ports {
			l, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(p)))
			if err != nil {
				busy = fmt.Errorf("cassandra: port %d of the instance is in use: %w", p, err)
				break
			}
			_ = l.Close()
		}
		if busy == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return busy
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (%w)", busy, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
