// Package dockertest holds what the integration module's container
// harnesses share: whether a Docker engine answers, the labels set on every
// container and network they start, and a watchdog that removes a
// container if the test process dies without removing it.
//
// The harnesses run testcontainers without its reaper (Ryuk): its image
// cannot be pulled where no registry is reachable, and every container is
// terminated by the code that started it. Prepare disables the reaper
// unless TESTCONTAINERS_RYUK_DISABLED is set. A process that ends without
// running its deferred calls (a panic in a test goroutine, go test's
// -timeout, SIGKILL) cannot terminate anything: for that, Watch starts a
// small shell process per container that removes it once the test
// process's end closes its stdin, what Ryuk does from a container.
package dockertest

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/testcontainers/testcontainers-go"
)

// Labels set on every container and network the harnesses start: make's
// check-containers and CI fail when one is left after a run.
const (
	LabelTest = "org.cqlseq.test" // always "1"
	LabelRun  = "org.cqlseq.run"  // CQLSEQ_RUN_ID, when set
)

// Labels returns the labels of a container or network started now.
func Labels() map[string]string {
	l := map[string]string{LabelTest: "1"}
	if id := os.Getenv("CQLSEQ_RUN_ID"); id != "" {
		l[LabelRun] = id
	}
	return l
}

// Prepare disables testcontainers' reaper unless the environment says
// otherwise, and makes published ports be reached on localhost when the
// engine runs in this network namespace (its docker0 bridge is here):
// testcontainers takes a process for one inside a container when
// /.dockerenv exists, as it does on machines made from a container image,
// and would dial the default gateway. Call it before the first
// testcontainers call (the library reads its configuration once).
func Prepare() {
	if _, set := os.LookupEnv("TESTCONTAINERS_RYUK_DISABLED"); !set {
		_ = os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	}
	if _, set := os.LookupEnv("TESTCONTAINERS_HOST_OVERRIDE"); !set && localEngine() {
		_ = os.Setenv("TESTCONTAINERS_HOST_OVERRIDE", "localhost")
	}
}

// localEngine reports whether the engine is reached on a local socket and
// its default bridge is an interface of this network namespace.
func localEngine() bool {
	if h := os.Getenv("DOCKER_HOST"); h != "" && !strings.HasPrefix(h, "unix://") {
		return false
	}
	_, err := net.InterfaceByName("docker0")
	return err == nil
}

// EngineAnswers reports, within 5 s, why no Docker engine answers, or nil.
func EngineAnswers(ctx context.Context) error {
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		return fmt.Errorf("no Docker provider: %w", err)
	}
	defer p.Close()
	hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := p.Health(hctx); err != nil {
		return fmt.Errorf("no Docker engine answers: %w", err)
	}
	return nil
}

// Watchdog removes a container when the process that started it ends
// without calling Stop.
type Watchdog struct {
	cmd *exec.Cmd
	w   io.Closer
}

// Watch starts a watchdog for the container or network id (kind
// "container" or "network"): a shell in a process group of its own that
// waits for its stdin to close and then runs docker rm -f (docker network
// rm). It needs the docker command; without it Watch returns nil, and Stop
// of nil does nothing.
func Watch(kind, id string) *Watchdog {
	docker, err := exec.LookPath("docker")
	if err != nil {
		return nil
	}
	rm := `"$1" rm -f -v "$2"`
	if kind == "network" {
		rm = `"$1" network rm "$2"`
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil
	}
	cmd := exec.Command("/bin/sh", "-c", "read _ ; "+rm+" >/dev/null 2>&1", "watchdog", docker, id)
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil
	}
	r.Close()
	return &Watchdog{cmd: cmd, w: w}
}

// Stop ends the watchdog without removing anything: the caller has.
func (d *Watchdog) Stop() {
	if d == nil {
		return
	}
	_ = d.cmd.Process.Kill()
	_ = d.cmd.Wait()
	_ = d.w.Close()
}
