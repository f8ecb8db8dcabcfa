package cassandra

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The image ImageName builds runs the jars Fetch caches, on a JRE from
// Debian, in a container: its entrypoint writes cassandra.yaml for the
// container's own address (the same settings as a launcher node: nodeYAML
// and jvmArgs) and runs CassandraDaemon in the foreground as PID 1.
//
// Environment of a container (all optional):
//
//	CASSANDRA_HEAP           JVM heap, default 512m
//	CASSANDRA_SEEDS          seed addresses or names, comma-separated; default the container's own address
//	CASSANDRA_INITIAL_TOKEN  initial_token, default 0 (give each node of a cluster its own: InitialToken)
//	CASSANDRA_AUTO_BOOTSTRAP false for the nodes of a fresh, empty cluster
//	CASSANDRA_CRASH_SAFE     1: batch commit log and flushed schema changes (Options.CrashSafe)
//	CASSANDRA_LISTEN_ADDRESS the node's address, default the first global IPv4 address
//
// cassandra-ready (in the image) exits 0 once CQL listens on 9042: the
// image's health check, and docker-compose's.

// ImageLabel is set on the image (and so on every container made from it).
const ImageLabel = "org.cqlseq.image"

// BaseImage is the Debian base BuildImage makes with debootstrap when no
// base is given and debootstrap is installed.
const BaseImage = "cqlseq/debian:bookworm-minbase"

// ImageName is the name BuildImage gives the image of a Cassandra version.
func ImageName(version string) string { return "cqlseq/cassandra:" + version }

// ImageOptions configures BuildImage.
type ImageOptions struct {
	// Options gives the version, the jar cache and Log; the jars are
	// fetched (Fetch) if they are not cached.
	Options
	// Name of the image. Default ImageName(Version).
	Name string
	// Base image. Default BaseImage, made first with debootstrap
	// (--variant=minbase bookworm) if it is not present and debootstrap is
	// installed, else debian:bookworm-slim (pulled by the build).
	Base string
	// Docker is the docker command. Default "docker".
	Docker string
	// Rebuild builds even if the image is present.
	Rebuild bool
}

// Image describes the image BuildImage found or built.
type Image struct {
	Name     string
	Built    bool          // false: it was present
	BuildFor time.Duration // Built: the whole build, base image included
	Size     int64         // bytes, as docker image inspect reports
}

// ErrNoEngine reports that no Docker engine answers.
var ErrNoEngine = errors.New("cassandra: no Docker engine answers")

// EngineAnswers reports whether a Docker engine answers the docker command
// within 10 s (docker info), with the reason when it does not.
func EngineAnswers(ctx context.Context, docker string) error {
	if docker == "" {
		docker = "docker"
	}
	if _, err := exec.LookPath(docker); err != nil {
		return fmt.Errorf("%w: no %s command: %v", ErrNoEngine, docker, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, docker, "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		return fmt.Errorf("%w: %s info: %v: %s", ErrNoEngine, docker, err, tail(string(out), 5))
	}
	return nil
}

// BuildImage makes sure the image exists: a present image is not rebuilt
// (unless Rebuild). Building it fetches the jars, makes the base image if
// needed, and runs docker build on a context of the jars, the
// configuration templates and the entrypoint.
func BuildImage(ctx context.Context, o ImageOptions) (Image, error) {
	o.EnsureDefaults()
	if o.Name == "" {
		o.Name = ImageName(o.Version)
	}
	if o.Docker == "" {
		o.Docker = "docker"
	}
	if err := EngineAnswers(ctx, o.Docker); err != nil {
		return Image{}, err
	}
	if !o.Rebuild {
		if size, err := imageSize(ctx, o.Docker, o.Name); err == nil {
			return Image{Name: o.Name, Size: size}, nil
		}
	}
	began := time.Now()
	lib, err := Fetch(ctx, o.Options)
	if err != nil {
		return Image{}, err
	}
	base := o.Base
	if base == "" {
		if base, err = ensureBase(ctx, o); err != nil {
			return Image{}, err
		}
	}
	dir, err := os.MkdirTemp("", "cqlseq-image-")
	if err != nil {
		return Image{}, fmt.Errorf("cassandra: %w", err)
	}
	defer os.RemoveAll(dir)
	if err := writeImageContext(dir, lib); err != nil {
		return Image{}, err
	}
	o.Log("building image %s from %s (Cassandra %s jars, a JRE and iproute2 from Debian)", o.Name, base, o.Version)
	cmd := exec.CommandContext(ctx, o.Docker, "build", "-q", "--build-arg", "BASE="+base,
		"--label", ImageLabel+"=cassandra-"+o.Version, "-t", o.Name, dir)
	// The classic builder: it needs no buildx plugin and works with every
	// engine since 17.05 (ARG before FROM).
	cmd.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return Image{}, fmt.Errorf("cassandra: docker build %s: %w\n%s", o.Name, err, tail(string(out), 40))
	}
	size, err := imageSize(ctx, o.Docker, o.Name)
	if err != nil {
		return Image{}, err
	}
	return Image{Name: o.Name, Built: true, BuildFor: time.Since(began), Size: size}, nil
}

func imageSize(ctx context.Context, docker, name string) (int64, error) {
	out, err := exec.CommandContext(ctx, docker, "image", "inspect", "--format", "{{.Size}}", name).Output()
	if err != nil {
		return 0, fmt.Errorf("cassandra: no image %s: %w", name, err)
	}
	return strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
}

// ensureBase returns the base image: BaseImage if present or made now with
// debootstrap, else debian:bookworm-slim.
func ensureBase(ctx context.Context, o ImageOptions) (string, error) {
	if _, err := imageSize(ctx, o.Docker, BaseImage); err == nil {
		return BaseImage, nil
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		o.Log("no debootstrap: the image builds on debian:bookworm-slim (pulled from a registry)")
		return "debian:bookworm-slim", nil
	}
	began := time.Now()
	root, err := os.MkdirTemp("", "cqlseq-debootstrap-")
	if err != nil {
		return "", fmt.Errorf("cassandra: %w", err)
	}
	defer os.RemoveAll(root)
	o.Log("making base image %s: debootstrap --variant=minbase bookworm", BaseImage)
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "debootstrap", "--variant=minbase", "bookworm", root, "http://deb.debian.org/debian")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("cassandra: debootstrap: %w\n%s", err, tail(out.String(), 30))
	}
	// tar -C root -c . | docker import - BaseImage
	tarCmd := exec.CommandContext(ctx, "tar", "-C", root, "-c", ".")
	imp := exec.CommandContext(ctx, o.Docker, "import", "-", BaseImage)
	pipe, err := tarCmd.StdoutPipe()
	if err != nil {
		return "", fmt.Errorf("cassandra: %w", err)
	}
	imp.Stdin = pipe
	var tarErr, impOut bytes.Buffer
	tarCmd.Stderr = &tarErr
	imp.Stdout, imp.Stderr = &impOut, &impOut
	if err := tarCmd.Start(); err != nil {
		return "", fmt.Errorf("cassandra: tar: %w", err)
	}
	impErr := imp.Run()
	if err := tarCmd.Wait(); err != nil {
		return "", fmt.Errorf("cassandra: tar -C %s: %w: %s", root, err, tail(tarErr.String(), 10))
	}
	if impErr != nil {
		return "", fmt.Errorf("cassandra: docker import: %w: %s", impErr, tail(impOut.String(), 10))
	}
	o.Log("base image %s made in %.1f s", BaseImage, time.Since(began).Seconds())
	return BaseImage, nil
}

// Paths inside the image.
const (
	imageLib  = "/opt/cassandra/lib"
	imageConf = "/etc/cassandra"
	imageHome = "/var/lib/cassandra"
)

const dockerfile = `ARG BASE=debian:bookworm-slim
FROM ${BASE}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends openjdk-17-jre-headless iproute2 iptables \
 && rm -rf /var/lib/apt/lists/*
COPY lib/ /opt/cassandra/lib/
COPY conf/ /etc/cassandra/
COPY bin/ /usr/local/bin/
EXPOSE 7000 9042
HEALTHCHECK --interval=5s --timeout=3s --start-period=30s --retries=60 CMD ["/usr/local/bin/cassandra-ready"]
ENTRYPOINT ["/usr/local/bin/cassandra-entrypoint"]
`

const entrypoint = `#!/bin/sh
# cqlseq's Cassandra image: writes cassandra.yaml for this container's
# address and runs Cassandra in the foreground (see testenv/cassandra/image.go).
set -eu
home=` + imageHome + `
conf=` + imageConf + `
addr=${CASSANDRA_LISTEN_ADDRESS:-$(ip -4 -o addr show scope global | awk '{split($4, a, "/"); print a[1]; exit}')}
[ -n "$addr" ] || { echo "cassandra-entrypoint: no IPv4 address" >&2; exit 1; }
# Seeds may be names (docker-compose services): wait until each resolves.
seeds=""
for s in $(echo "${CASSANDRA_SEEDS:-$addr}" | tr ',' ' '); do
  i=0
  until ip=$(getent ahostsv4 "$s" | awk 'NR == 1 {print $1}') && [ -n "$ip" ]; do
    i=$((i + 1)); [ $i -le 120 ] || { echo "cassandra-entrypoint: seed $s does not resolve" >&2; exit 1; }
    sleep 1
  done
  seeds="$seeds${seeds:+,}$ip:7000"
done
yaml=$conf/cassandra.yaml.in
args=$conf/jvm.args
if [ "${CASSANDRA_CRASH_SAFE:-0}" = 1 ]; then yaml=$conf/cassandra-crash-safe.yaml.in; fi
mkdir -p $home/data $home/commitlog $home/saved_caches $home/hints $home/cdc_raw $home/logs $home/tmp
sed -e "s/@ADDRESS@/$addr/g" -e "s/@SEEDS@:7000/$seeds/" -e "s/@TOKEN@/${CASSANDRA_INITIAL_TOKEN:-0}/" "$yaml" > $home/cassandra.yaml
if [ "${CASSANDRA_AUTO_BOOTSTRAP:-true}" = false ]; then echo "auto_bootstrap: false" >> $home/cassandra.yaml; fi
cp $conf/logback.xml $home/logback.xml
ulimit -n 100000 2>/dev/null || true
echo "cassandra-entrypoint: Cassandra on $addr, seeds $seeds, token ${CASSANDRA_INITIAL_TOKEN:-0}, heap ${CASSANDRA_HEAP:-512m}, crash-safe ${CASSANDRA_CRASH_SAFE:-0}"
set -f
if [ "${CASSANDRA_CRASH_SAFE:-0}" = 1 ]; then
  exec java $(grep -v unsafesystem "$args" | sed "s/@HEAP@/${CASSANDRA_HEAP:-512m}/")
fi
exec java $(sed "s/@HEAP@/${CASSANDRA_HEAP:-512m}/" "$args")
`

const readyScript = `#!/bin/sh
# Exits 0 once Cassandra's native transport listens on 9042.
ss -Hltn 'sport = :9042' | grep -q .
`

// imageLogback logs to the file, as a launcher node does, and to stdout
// (docker logs).
const imageLogback = `<configuration scan="false">
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>${cassandra.logdir}/system.log</file>
    <encoder><pattern>%-5level [%thread] %date{ISO8601} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <appender name="STDOUT" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%-5level [%thread] %date{ISO8601} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <root level="WARN"><appender-ref ref="FILE"/><appender-ref ref="STDOUT"/></root>
  <logger name="org.apache.cassandra.service.CassandraDaemon" level="INFO"/>
</configuration>
`

// imageNode is the configuration template of a container node: nodeYAML
// with placeholders the entrypoint fills in.
func imageNode(crashSafe bool) nodeConfig {
	return nodeConfig{dir: imageHome, listen: "@ADDRESS@", seed: "@SEEDS@", token: "@TOKEN@",
		nativePort: 9042, storagePort: 7000, crashSafe: crashSafe}
}

// writeImageContext writes the build context: the Dockerfile, lib/ (the
// jars, hard-linked where possible), conf/ and bin/.
func writeImageContext(dir, lib string) error {
	jamm, err := findJar(lib, "jamm-")
	if err != nil {
		return fmt.Errorf("cassandra: %w", err)
	}
	for _, d := range []string{"lib", "conf", "bin"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return fmt.Errorf("cassandra: %w", err)
		}
	}
	jars, err := filepath.Glob(filepath.Join(lib, "*.jar"))
	if err != nil || len(jars) == 0 {
		return fmt.Errorf("cassandra: no jars in %s", lib)
	}
	for _, j := range jars {
		if err := linkOrCopy(j, filepath.Join(dir, "lib", filepath.Base(j))); err != nil {
			return err
		}
	}
	args := jvmArgs(Options{Heap: "@HEAP@"}, imageLib, filepath.Join(imageLib, filepath.Base(jamm)), imageHome)
	files := map[string]string{
		"Dockerfile":                        dockerfile,
		"conf/cassandra.yaml.in":            nodeYAML(imageNode(false)),
		"conf/cassandra-crash-safe.yaml.in": nodeYAML(imageNode(true)),
		"conf/jvm.args":                     strings.Join(args, "\n") + "\n",
		"conf/logback.xml":                  imageLogback,
		"bin/cassandra-entrypoint":          entrypoint,
		"bin/cassandra-ready":               readyScript,
	}
	for name, body := range files {
		mode := os.FileMode(0o644)
		if strings.HasPrefix(name, "bin/") {
			mode = 0o755
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), mode); err != nil {
			return fmt.Errorf("cassandra: %w", err)
		}
	}
	return nil
}

func linkOrCopy(src, dst string) error {
	if os.Link(src, dst) == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("cassandra: %w", err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return fmt.Errorf("cassandra: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("cassandra: copying %s: %w", src, err)
	}
	return out.Close()
}
