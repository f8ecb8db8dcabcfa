// Command cassandra-launcher fetches, starts and stops the single-node
// Cassandra that cqlseq's integration tests run against.
//
//	cassandra-launcher fetch
//	cassandra-launcher up   -state FILE   # prints host:port on stdout
//	cassandra-launcher down -state FILE
//	cassandra-launcher restart -state FILE -down 8s   # crash (SIGKILL), wait, start again
//	cassandra-launcher check              # reports missing tools
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
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
		return fmt.Errorf("usage: cassandra-launcher fetch|up|down|restart|check [flags]")
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
	down := flags.Duration("down", 0, "restart: how long the node stays down after the crash")
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
	case "up":
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
	case "restart":
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
	return fmt.Errorf("unknown command %q (fetch|up|down|restart|check)", args[0])
}
