package netcluster_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/integration/itest"
	"github.com/cqlseq/cqlseq/integration/netcluster"
	"github.com/cqlseq/cqlseq/testenv/torture"
)

// The faults' rate target: over the whole fault, at least this share of
// the acknowledgements per second of the 10 s before it (gray-check's).
const minRatio = 0.2

var measure = torture.Measure{Lead: 10 * time.Second, Settle: 2 * time.Second}

// TestFaultsKeepServing starts three nodes with one-way delays 0, 0.5 and
// 5 ms, runs cqlseq bench (4 partitions x 16 clients, fenced, then trust2)
// on a keyspace of replication factor 3, and, one after another: pauses
// node 2 for 10 s (docker pause), disconnects node 3 from the network for
// 10 s (a real partition, the host's clients cut off too), kills node 2
// and restarts it 5 s later. Each fault must keep at least minRatio of the
// rate before it, and cqlseq verify --acks must find every acknowledged
// command and no number twice. Needs a Docker engine and
// CQLSEQ_NETCLUSTER=1 (make test-netcluster); it takes about 6 minutes.
func TestFaultsKeepServing(t *testing.T) {
	if os.Getenv("CQLSEQ_NETCLUSTER") == "" {
		t.Skip("needs a Docker engine and CQLSEQ_NETCLUSTER=1 (make test-netcluster)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	cl, err := netcluster.Start(ctx, netcluster.Options{
		Delays:    []time.Duration{0, 500 * time.Microsecond, 5 * time.Millisecond},
		CrashSafe: true, // node 2 is killed
		Log:       t.Logf,
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cl.Terminate()) })
	rtt, err := cl.MeasureRTT(ctx)
	require.NoError(t, err)
	t.Logf("round trips: %s", rtt)
	bin := itest.CLI(t)
	hosts := strings.Join(cl.Hosts(), ",")

	for _, mode := range []string{"fenced", "trust2"} {
		t.Run(mode, func(t *testing.T) {
			ks := "netfault_" + mode
			out, err := exec.CommandContext(ctx, bin, "migrate", "--hosts", hosts, "--keyspace", ks, "--timeout", "30s",
				"--replication", "{'class': 'SimpleStrategy', 'replication_factor': 3}").CombinedOutput()
			require.NoError(t, err, "%s", out)
			dir := t.TempDir()
			ack, jf := filepath.Join(dir, "acks.log"), filepath.Join(dir, "bench.json")
			bench := exec.Command(bin, "bench", "--store", "cql", "--hosts", hosts, "--keyspace", ks, "--mode", mode,
				"--partitions", "4", "--concurrency", "16", "--duration", "1h", "--ack-log", ack, "--json", jf, "--ready-timeout", "5m")
			// The bench ends with this process, however it ends.
			bench.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			var benchOut strings.Builder
			bench.Stdout, bench.Stderr = &benchOut, &benchOut
			cpu0, err := cl.CPU(ctx) // the containers' CPU time, as make bench-latency reads it
			require.NoError(t, err)
			require.NoError(t, bench.Start())
			done := make(chan error, 1)
			go func() { done <- bench.Wait() }()
			stopped := false
			stop := func() {
				if stopped {
					return
				}
				stopped = true
				_ = bench.Process.Signal(os.Interrupt)
				select {
				case <-done:
				case <-time.After(2 * time.Minute):
					_ = bench.Process.Signal(syscall.SIGKILL)
					<-done
				}
			}
			t.Cleanup(stop)

			smp, err := torture.StartSampler(ctx, ack, torture.DefaultSampleInterval)
			require.NoError(t, err)
			defer smp.Stop()
			waitAcks(t, ctx, smp, done, 3*time.Minute)
			sleep(t, ctx, 5*time.Second+measure.Lead)
			cpu1, err := cl.CPU(ctx)
			require.NoError(t, err)
			t.Logf("the nodes' containers used %.1f s of CPU since the bench started", (cpu1 - cpu0).Seconds())
			require.Greater(t, cpu1, cpu0, "the nodes' CPU time grows under load")

			faults := []struct {
				name   string
				inject func(context.Context) error
			}{
				{"node 2 paused 10 s", func(ctx context.Context) error {
					n := cl.Node(2)
					require.NoError(t, n.Pause(ctx))
					sleep(t, ctx, 10*time.Second)
					return n.Unpause(ctx)
				}},
				{"node 3 disconnected 10 s", func(ctx context.Context) error {
					n := cl.Node(3)
					require.NoError(t, n.Disconnect(ctx))
					sleep(t, ctx, 10*time.Second)
					return n.Connect(ctx)
				}},
				{"node 2 killed, restarted 5 s later", func(ctx context.Context) error {
					n := cl.Node(2)
					require.NoError(t, n.Kill(ctx))
					sleep(t, ctx, 5*time.Second)
					return n.Restart(ctx)
				}},
			}
			for _, f := range faults {
				began := time.Now()
				require.NoError(t, f.inject(ctx), f.name)
				ended := time.Now()
				sleep(t, ctx, 4*torture.DefaultSampleInterval) // a sample after the end
				samples, err := smp.Samples()
				require.NoError(t, err)
				r, err := measure.Rates(samples, torture.Fault{Began: began, Ended: ended})
				require.NoError(t, err, f.name)
				t.Logf("%s %s (%.1f s): %.0f acks/s before, %.0f during (ratio %.2f), %.0f from +%v (ratio %.2f)",
					mode, f.name, ended.Sub(began).Seconds(), r.Before.Rate(), r.During.Rate(), r.RatioDuring(),
					r.Late.Rate(), measure.Settle, r.RatioLate())
				require.GreaterOrEqual(t, r.RatioDuring(), minRatio, "%s %s: acks/s during the fault over those before", mode, f.name)
				sleep(t, ctx, 5*time.Second+measure.Lead)
			}
			stop()
			require.NoError(t, ctx.Err())
			vj := filepath.Join(dir, "verify.json")
			out, err = exec.CommandContext(ctx, bin, "verify", "--store", "cql", "--hosts", hosts, "--keyspace", ks, "--timeout", "30s",
				"--partition", "0,1,2,3", "--acks", ack, "--json", vj).CombinedOutput()
			var ee *exec.ExitError
			if err != nil && !errors.As(err, &ee) {
				t.Fatalf("verify: %v: %s", err, out)
			}
			b, err := os.ReadFile(vj)
			require.NoError(t, err, "verify wrote no report: %s", out)
			v, err := torture.ParseVerdict(b)
			require.NoError(t, err)
			t.Logf("%s: verify: %d acknowledged commands, %d lost, %d duplicates, %d regressions", mode, v.Acks, v.Lost, v.Duplicates, v.Regressions)
			require.True(t, v.OK, "verify: %s", out)
			require.Positive(t, v.Acks)
		})
	}
}

// waitAcks waits until the ack log has its first acknowledgement.
func waitAcks(t *testing.T, ctx context.Context, smp *torture.Sampler, done <-chan error, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for smp.Last().Acks == 0 {
		select {
		case err := <-done:
			t.Fatalf("bench ended before its first acknowledgement: %v", err)
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no acknowledgement within %v", limit)
		}
	}
}

func sleep(t *testing.T, ctx context.Context, d time.Duration) {
	t.Helper()
	select {
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	case <-time.After(d):
	}
}
