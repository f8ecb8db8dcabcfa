package itest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/modules/scylladb"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/cqlseq/cqlseq/integration/dockertest"
	"github.com/cqlseq/cqlseq/testenv/cassandra"
)

// scyllaImage is the image used when a Docker engine answers and it can be
// had (present, or pulled); the same tag as docker-compose.yml.
const scyllaImage = "scylladb/scylla:6.2.3"

// containerHeap is the JVM heap of a Cassandra container.
const containerHeap = "512m"

// startContainer starts the run's cluster, one node, through
// testcontainers: CQLSEQ_CQL_IMAGE if set (a name containing "scylla" runs
// through the ScyllaDB module, any other is taken for cqlseq's Cassandra
// image), else ScyllaDB if its image is present or can be pulled, else
// cqlseq's Cassandra image, built if missing (cassandra.BuildImage).
func startContainer(ctx context.Context) (func(), error) {
	if err := dockertest.EngineAnswers(ctx); err != nil {
		return nil, err
	}
	img := strings.TrimSpace(os.Getenv("CQLSEQ_CQL_IMAGE"))
	if img == "" {
		if err := haveImage(ctx, scyllaImage); err == nil {
			img = scyllaImage
		} else {
			logf("%s cannot be had (%v): using cqlseq's Cassandra image", scyllaImage, err)
			img = cassandra.ImageName(cassandra.DefaultVersion)
		}
	}
	if strings.Contains(img, "scylla") {
		return startScylla(ctx, img)
	}
	if img == cassandra.ImageName(cassandra.DefaultVersion) {
		o := cassandra.ImageOptions{Options: cassandra.Options{Log: logf}}
		b, err := cassandra.BuildImage(ctx, o)
		if err != nil {
			return nil, err
		}
		if b.Built {
			logf("built image %s in %.1f s (%.0f MB)", b.Name, b.BuildFor.Seconds(), float64(b.Size)/1e6)
		}
	}
	return startCassandraContainer(ctx, img)
}

// haveImage reports whether img is present, pulling it once (no retries)
// if it is not.
func haveImage(ctx context.Context, img string) error {
	c, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.ImageInspect(ctx, img); err == nil {
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	r, err := c.ImagePull(pctx, img, client.ImagePullOptions{})
	if err != nil {
		return err
	}
	defer r.Close()
	if _, err := io.Copy(io.Discard, r); err != nil {
		return err
	}
	_, err = c.ImageInspect(ctx, img)
	return err
}

func startScylla(ctx context.Context, img string) (func(), error) {
	ctr, err := scylladb.Run(ctx, img, scylladb.WithCustomCommands("--memory=1G", "--smp=1", "--developer-mode=1"),
		testcontainers.WithLabels(dockertest.Labels()))
	var c testcontainers.Container
	if ctr != nil {
		c = ctr
	}
	return adopt(c, img, err,
		func() (string, error) { return ctr.NonShardAwareConnectionHost(ctx) },
		func() error { return describeCluster(ctx, "scylla") })
}

func startCassandraContainer(ctx context.Context, img string) (func(), error) {
	began := time.Now()
	ctr, err := testcontainers.Run(ctx, img,
		testcontainers.WithExposedPorts("9042/tcp"),
		testcontainers.WithEnv(map[string]string{"CASSANDRA_HEAP": containerHeap}),
		testcontainers.WithLabels(dockertest.Labels()),
		testcontainers.WithWaitStrategy(wait.ForAll(
			wait.ForLog("Startup complete"),
			wait.ForListeningPort("9042/tcp"),
		).WithDeadline(4*time.Minute)),
	)
	var c testcontainers.Container
	if ctr != nil {
		c = ctr
	}
	stop, err := adopt(c, img, err,
		func() (string, error) { return ctr.PortEndpoint(ctx, "9042/tcp", "") },
		func() error { return waitCQL(ctx, time.Minute) })
	if err != nil {
		return nil, err
	}
	logf("Cassandra container %s (%s) answered CQL %.1f s after it was created", shortID(ctr), img, time.Since(began).Seconds())
	return stop, nil
}

// adopt makes c (nil when it was not created) the run's cluster: it is
// watched and terminated by the returned stop, also when err, endpoint or
// ready fails, in which case stop has already run.
func adopt(c testcontainers.Container, img string, err error, endpoint func() (string, error), ready func() error) (func(), error) {
	wd := watch(c)
	stop := func() { terminate(c, wd) }
	if err != nil {
		stop()
		return nil, err
	}
	host, err := endpoint()
	if err != nil {
		stop()
		return nil, err
	}
	testCluster.hosts = []string{host}
	testCluster.source = "testcontainers"
	testCluster.image = img
	if err := ready(); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// waitCQL retries describeCluster until it succeeds or limit passes.
func waitCQL(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		err := describeCluster(ctx, "cassandra")
		if err == nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// watch starts a watchdog for ctr (nil if ctr is nil).
func watch(ctr testcontainers.Container) *dockertest.Watchdog {
	if ctr == nil {
		return nil
	}
	return dockertest.Watch("container", ctr.GetContainerID())
}

// terminate removes ctr (if any) and then stops its watchdog.
func terminate(ctr testcontainers.Container, wd *dockertest.Watchdog) {
	if ctr != nil {
		if err := testcontainers.TerminateContainer(ctr, testcontainers.StopTimeout(0)); err != nil {
			logf("terminating container %s: %v", shortID(ctr), err)
		} else {
			logf("container %s terminated", shortID(ctr))
		}
	}
	wd.Stop()
}

func shortID(ctr testcontainers.Container) string {
	id := ctr.GetContainerID()
	if len(id) > 12 {
		id = id[:12]
	}
	return id
}

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "integration: "+format+"\n", a...)
}
