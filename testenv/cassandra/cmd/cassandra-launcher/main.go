// Command cassandra-launcher fetches, starts and stops the Cassandra that
// cqlseq's integration tests run against: one node, or a cluster of nodes
// on 127.0.0.1..N (same ports, as ccm runs them).
//
//	cassandra-launcher fetch
//	cassandra-launcher up   -state FILE   # prints host:port on stdout
//	cassandra-launcher up   -state FILE -nodes 3 -heap 512m   # prints the hosts, comma-separated
//	cassandra-launcher down -state FILE   # stops every node the state file names
//	cassandra-launcher restart -state FILE -down 8s   # crash (SIGKILL), wait, start again
//	cassandra-launcher restart -state FILE -node 2 -down 8s   # one node of a cluster
//	cassandra-launcher kill|pause|resume -state FILE -node 2   # SIGKILL, SIGSTOP, SIGCONT
//	cassandra-launcher status -state FILE # waits until the ring is all up and normal
//	cassandra-launcher check              # reports missing tools
//	cassandra-launcher image              # builds the image cqlseq/cassandra:VERSION unless present
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/cqlseq/cqlseq/testenv/cassandra"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "cassandra-launcher:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: cassandra-launcher fetch|image|up|down|restart|kill|pause|resume|status|check [flags]")
	}
	flags := flag.NewFlagSet(args[0], flag.ContinueOnError)
	var o cassandra.Options
	state := flags.String("state", ".cache/cassandra.state.json", "state file written by up and read by down")
	flags.StringVar(&o.Version, "version", cassandra.DefaultVersion, "Cassandra version (Maven Central cassandra-all)")
	flags.StringVar(&o.CacheDir, "cache", "", "jar cache directory (default $CQLSEQ_CASSANDRA_CACHE or ~/.cache/cqlseq/cassandra)")
	flags.StringVar(&o.RunDir, "rundir", "", "parent of the run directory (default the system temp dir)")
	flags.StringVar(&o.Heap, "heap", "1g", "JVM heap size")
	flags.DurationVar(&o.StartTimeout, "timeout", 180*time.Second, "how long to wait for the first CQL answer")
	flags.BoolVar(&o.CrashSafe, "crash-safe", false, "up: a crash (restart) loses no acknowledged write and no schema change")
	flags.BoolVar(&o.Secure, "secure", false, "up (one node): password authentication, roles (superuser cassandra/cassandra) and client TLS only; the CA's PEM is the state's ca_file")
	down := flags.Duration("down", 0, "restart: how long the node stays down after the crash")
	nodes := flags.Int("nodes", 1, "up: number of nodes (127.0.0.1..N)")
	node := flags.Int("node", 0, "restart, kill, pause, resume: the node (1-based) of a cluster")
	var io cassandra.ImageOptions
	flags.StringVar(&io.Name, "image", "", "image: the image's name (default cqlseq/cassandra:VERSION)")
	flags.StringVar(&io.Base, "base", "", "image: the base image (default "+cassandra.BaseImage+", made with debootstrap, else debian:bookworm-slim)")
	flags.BoolVar(&io.Rebuild, "rebuild", false, "image: build even if the image is present")
	if err := flags.Parse(args[1:]); err != nil {
		return err
	}
	o.Log = func(f string, a ...any) { fmt.Fprintf(os.Stderr, "cassandra-launcher: "+f+"\n", a...) }
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	switch args[0] {
	case "check":
		return cassandra.CheckTools(o)
	case "fetch":
		began := time.Now()
		lib, err := cassandra.Fetch(ctx, o)
		if err != nil {
			return err
		}
		o.Log("jars in %s (%.1f s)", lib, time.Since(began).Seconds())
		return nil
	case "image":
		io.Options = o
		img, err := cassandra.BuildImage(ctx, io)
		if err != nil {
			return err
		}
		if img.Built {
			o.Log("image %s built in %.1f s, %.0f MB", img.Name, img.BuildFor.Seconds(), float64(img.Size)/1e6)
		} else {
			o.Log("image %s present (%.0f MB): not rebuilt", img.Name, float64(img.Size)/1e6)
		}
		return nil
	case "up":
		if *nodes > 1 {
			return upCluster(ctx, o, *state, *nodes)
		}
		if inst, err := cassandra.ReadState(*state); err == nil && inst.Running() {
			return fmt.Errorf("state file %s names a running instance (pid %d, %s); run down first", *state, inst.PID, inst.Host)
		}
		began := time.Now()
		inst, err := cassandra.Start(ctx, o)
		if err != nil {
			return err
		}
		if err := cassandra.WriteState(*state, inst); err != nil {
			_, _ = cassandra.Stop(inst)
			return err
		}
		o.Log("Cassandra %s (release_version %s) answered CQL on %s: %.1f s after JVM start, %.1f s in all",
			inst.Version, inst.ReleaseInfo, inst.Host, inst.StartupTime.Seconds(), time.Since(began).Seconds())
		fmt.Println(inst.Host)
		return nil
	case "kill", "pause", "resume", "status":
		return clusterCommand(ctx, args[0], o, *state, *node)
	case "restart":
		if *node > 0 {
			c, err := cassandra.ReadClusterState(*state)
			if err != nil {
				return err
			}
			o.Version = c.Nodes[0].Version
			if err := cassandra.RestartNode(ctx, c, *node, o, *down); err != nil {
				return err
			}
			if err := cassandra.WriteClusterState(*state, c); err != nil {
				return err
			}
			o.Log("node %d answered CQL again (pid %d), %.1f s after JVM start; the ring is all up and normal", *node, c.Nodes[*node-1].PID, c.Nodes[*node-1].StartupTime.Seconds())
			return nil
		}
		inst, err := cassandra.ReadState(*state)
		if err != nil {
			return err
		}
		o.Version = inst.Version
		if err := cassandra.Restart(ctx, inst, o, *down); err != nil {
			return err
		}
		if err := cassandra.WriteState(*state, inst); err != nil {
			return err
		}
		o.Log("Cassandra answered CQL on %s again (pid %d), %.1f s after JVM start", inst.Host, inst.PID, inst.StartupTime.Seconds())
		return nil
	case "down":
		if c, err := cassandra.ReadClusterState(*state); err == nil {
			rss, err := cassandra.StopCluster(c)
			var sum int64
			for i, r := range rss {
				sum += r
				o.Log("node %d: stopped pid %d (peak RSS %.0f MiB)", i+1, c.Nodes[i].PID, float64(r)/1024)
			}
			if err != nil {
				return err
			}
			o.Log("cluster stopped (peak RSS %.0f MiB in all), removed %s", float64(sum)/1024, c.Dir)
			return os.Remove(*state)
		} else if !errors.Is(err, cassandra.ErrNotCluster) && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		inst, err := cassandra.ReadState(*state)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				o.Log("no state file %s: nothing to stop", *state)
				return nil
			}
			return err
		}
		rss, err := cassandra.Stop(inst)
		if err != nil {
			return err
		}
		o.Log("stopped pid %d (peak RSS %.0f MiB), removed %s", inst.PID, float64(rss)/1024, inst.Dir)
		return os.Remove(*state)
	}
	return fmt.Errorf("unknown command %q (fetch|image|up|down|restart|kill|pause|resume|status|check)", args[0])
}

// upCluster starts an n-node cluster, saving the state file after each
// node so that down stops every process even if this one is killed.
func upCluster(ctx context.Context, o cassandra.Options, state string, n int) error {
	if c, err := cassandra.ReadClusterState(state); err == nil {
		for i, inst := range c.Nodes {
			if inst.Running() {
				return fmt.Errorf("state file %s names a running node %d (pid %d, %s); run down first", state, i+1, inst.PID, inst.Host)
			}
		}
	}
	began := time.Now()
	c, err := cassandra.StartCluster(ctx, o, n, func(c *cassandra.Cluster) error {
		return cassandra.WriteClusterState(state, c)
	})
	if err != nil {
		_ = os.Remove(state)
		return err
	}
	for i, inst := range c.Nodes {
		o.Log("node %d: %s (pid %d), answered CQL %.1f s after its JVM start", i+1, inst.Host, inst.PID, inst.StartupTime.Seconds())
	}
	o.Log("%d nodes up and normal in %.1f s", n, time.Since(began).Seconds())
	fmt.Println(strings.Join(c.Hosts(), ","))
	return nil
}

// clusterCommand runs kill, pause, resume or status on the cluster named
// by the state file.
func clusterCommand(ctx context.Context, cmd string, o cassandra.Options, state string, node int) error {
	c, err := cassandra.ReadClusterState(state)
	if err != nil {
		return err
	}
	switch cmd {
	case "kill":
		err = cassandra.KillNode(c, node)
	case "pause":
		err = cassandra.PauseNode(c, node)
	case "resume":
		err = cassandra.ResumeNode(c, node)
	case "status":
		o.EnsureDefaults()
		if err = cassandra.WaitRing(ctx, c, o.StartTimeout); err == nil {
			fmt.Println(strings.Join(c.Hosts(), ","))
		}
		return err
	}
	if err == nil {
		o.Log("%s: node %d (pid %d) done", cmd, node, c.Nodes[node-1].PID)
	}
	return err
}
