package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// syncBuffer is a bytes.Buffer safe for the CLI's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// result is one in-process run of the command.
type result struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

// runCLI runs cqlseq with args in-process, as Main does (stderr is not a
// terminal: no progress bars).
func runCLI(t *testing.T, args ...string) result {
	t.Helper()
	return runEnv(context.Background(), false, args...)
}

func runEnv(ctx context.Context, tty bool, args ...string) result {
	var out, errb syncBuffer
	began := time.Now()
	code := run(ctx, args, &env{stdout: &out, stderr: &errb, tty: tty})
	return result{code: code, stdout: out.String(), stderr: errb.String(), took: time.Since(began)}
}

// requireOneLine checks that stderr is exactly one "cqlseq: ..." line.
func requireOneLine(t *testing.T, r result) string {
	t.Helper()
	require.True(t, strings.HasPrefix(r.stderr, "cqlseq: "), "stderr %q", r.stderr)
	require.Equal(t, 1, strings.Count(r.stderr, "\n"), "stderr must be one line: %q", r.stderr)
	require.True(t, strings.HasSuffix(r.stderr, "\n"))
	require.NotContains(t, r.stderr, "goroutine ", "no stack trace")
	return r.stderr
}

func TestDemoBolt(t *testing.T) {
	dir := t.TempDir()
	r := runCLI(t, "demo", "--dir", dir, "--duration", "700ms", "--partitions", "2", "--workspaces", "300", "--no-sync")
	require.Equal(t, ExitOK, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	assert.Empty(t, r.stderr)
	for _, want := range []string{"1. load", "2. crash", "3. restart", "4. continue", "5. verify", "OK", "no number was issued twice"} {
		assert.Contains(t, r.stdout, want)
	}
	assert.FileExists(t, filepath.Join(dir, boltFileName), "--dir is kept")

	// The demo's file passes verify on its own too.
	v := runCLI(t, "verify", "--dir", dir, "--partition", "0,1")
	require.Equal(t, ExitOK, v.code, "stdout:\n%s\nstderr:\n%s", v.stdout, v.stderr)
	assert.Equal(t, 2, strings.Count(v.stdout, ": OK\n"), v.stdout)
}

func TestDemoMemory(t *testing.T) {
	r := runCLI(t, "demo", "--memory", "--duration", "500ms", "--workspaces", "100")
	require.Equal(t, ExitOK, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	assert.Contains(t, r.stdout, "in-memory store")
	assert.Contains(t, r.stdout, "5. verify")
	assert.Contains(t, r.stdout, "OK")
}

func TestDemoTempDirRemoved(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	r := runCLI(t, "demo", "--duration", "300ms", "--partitions", "1", "--workspaces", "10", "--no-sync")
	require.Equal(t, ExitOK, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	left, err := os.ReadDir(os.Getenv("TMPDIR"))
	require.NoError(t, err)
	assert.Empty(t, left, "the temporary bbolt directory is removed")
}

func TestBenchBoltBaselineJSON(t *testing.T) {
	dir := t.TempDir()
	jf := filepath.Join(dir, "report.json")
	r := runCLI(t, "bench", "--dir", dir, "--no-sync", "--duration", "500ms", "--partitions", "2", "--workspaces", "100",
		"--concurrency", "2", "--mode", "trust1", "--flush-after-events", "1", "--baseline", "--json", jf) // flushes to report
	require.Equal(t, ExitOK, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	for _, want := range []string{"actualization", "sequencer", "latency", "busy", "flushes", "baseline", "ratio"} {
		assert.Contains(t, r.stdout, want)
	}
	b, err := os.ReadFile(jf)
	require.NoError(t, err)
	var rep benchReport
	require.NoError(t, json.Unmarshal(b, &rep))
	assert.Equal(t, "trust1", rep.Mode)
	assert.Equal(t, 2, rep.Partitions)
	assert.Equal(t, 2, rep.Concurrency)
	assert.Greater(t, rep.Sequencer.Commands, uint64(0))
	assert.Equal(t, 2*rep.Sequencer.Commands, rep.Sequencer.Numbers, "two numbers per command")
	l := rep.Sequencer.Latency
	assert.Greater(t, l.P50, 0.0)
	assert.LessOrEqual(t, l.P50, l.P95)
	assert.LessOrEqual(t, l.P95, l.P99)
	assert.LessOrEqual(t, l.P99, l.Max)
	assert.Greater(t, rep.Flush.Flushes, uint64(0))
	assert.LessOrEqual(t, rep.Flush.Values, rep.Sequencer.Numbers+2, "flushed values are at most the numbers issued")
	require.NotNil(t, rep.Baseline)
	assert.Greater(t, rep.Baseline.Commands, uint64(0))
	assert.InDelta(t, rep.Sequencer.PerSecond/rep.Baseline.PerSecond, rep.Ratio, 1e-9)
	assert.Zero(t, rep.Sequencer.Errors)
	assert.Zero(t, rep.Baseline.Errors)

	// The bench's partitions verify; the baseline's are apart from them.
	v := runCLI(t, "verify", "--dir", dir, "--partition", "0", "--partition", "1")
	require.Equal(t, ExitOK, v.code, "stdout:\n%s\nstderr:\n%s", v.stdout, v.stderr)

	// Inspect shows the offset, a workspace's numbers and decoded events.
	in := runCLI(t, "inspect", "--dir", dir, "--partition", "1", "--limit", "2")
	require.Equal(t, ExitOK, in.code, "stdout:\n%s\nstderr:\n%s", in.stdout, in.stderr)
	assert.Contains(t, in.stdout, "next PLog offset")
	assert.Contains(t, in.stdout, "epoch")
	assert.Contains(t, in.stdout, "offset 1: WSID ")
	assert.Contains(t, in.stdout, "offset 2: WSID ")
	assert.NotContains(t, in.stdout, "offset 3: WSID ", "--limit 2")
}

// TestInspectWSShowsOnlyThatWorkspacesEvents is issue 28's item 8: --ws
// selected the numbers shown but every event was printed.
func TestInspectWSShowsOnlyThatWorkspacesEvents(t *testing.T) {
	dir := t.TempDir()
	r := runCLI(t, "bench", "--dir", dir, "--no-sync", "--duration", "300ms", "--partitions", "2", "--workspaces", "6",
		"--concurrency", "2", "--mode", "trust2")
	require.Equal(t, ExitOK, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	eventWS := regexp.MustCompile(`(?m)^  offset \d+: WSID (\d+) `)
	wsOfEvents := func(out string) map[string]int {
		seen := map[string]int{}
		for _, m := range eventWS.FindAllStringSubmatch(out, -1) {
			seen[m[1]]++
		}
		return seen
	}

	// Partition 1 holds workspaces 2, 4 and 6: unfiltered, more than one shows.
	all := runCLI(t, "inspect", "--dir", dir, "--partition", "1", "--limit", "50")
	require.Equal(t, ExitOK, all.code, "stdout:\n%s\nstderr:\n%s", all.stdout, all.stderr)
	require.Greater(t, len(wsOfEvents(all.stdout)), 1, all.stdout)

	in := runCLI(t, "inspect", "--dir", dir, "--partition", "1", "--ws", "4", "--limit", "5")
	require.Equal(t, ExitOK, in.code, "stdout:\n%s\nstderr:\n%s", in.stdout, in.stderr)
	assert.Contains(t, in.stdout, "events of workspace 4 from offset 1:")
	assert.Equal(t, map[string]int{"4": 5}, wsOfEvents(in.stdout), "five events, all of workspace 4:\n%s", in.stdout)

	none := runCLI(t, "inspect", "--dir", dir, "--partition", "1", "--ws", "3")
	require.Equal(t, ExitOK, none.code, "stdout:\n%s\nstderr:\n%s", none.stdout, none.stderr)
	assert.Empty(t, wsOfEvents(none.stdout), "workspace 3 is partition 0's")
	assert.Contains(t, none.stdout, "none of these workspaces'")
}

func TestBenchTwiceOnOneFileContinues(t *testing.T) {
	dir := t.TempDir()
	for range 2 {
		r := runCLI(t, "bench", "--dir", dir, "--no-sync", "--duration", "200ms", "--partitions", "1", "--workspaces", "5", "--baseline")
		require.Equal(t, ExitOK, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	v := runCLI(t, "verify", "--dir", dir)
	require.Equal(t, ExitOK, v.code, "stdout:\n%s\nstderr:\n%s", v.stdout, v.stderr)
}

func TestProgressBarOnTerminal(t *testing.T) {
	r := runEnv(context.Background(), true, "bench", "--store", "bbolt", "--no-sync", "--duration", "600ms", "--partitions", "1", "--workspaces", "5")
	require.Equal(t, ExitOK, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	assert.Contains(t, r.stderr, "sequencer", "the bar names the phase")
	assert.Contains(t, r.stderr, "commands")

	r = runEnv(context.Background(), true, "bench", "--no-progress", "--no-sync", "--duration", "300ms", "--partitions", "1", "--workspaces", "5")
	require.Equal(t, ExitOK, r.code)
	assert.Empty(t, r.stderr, "--no-progress draws nothing")
}

func TestInterruptStopsBench(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := time.AfterFunc(500*time.Millisecond, cancel)
	defer stop.Stop()
	r := runEnv(ctx, false, "bench", "--no-sync", "--duration", "1m", "--partitions", "2", "--workspaces", "10")
	assert.Equal(t, ExitInterrupted, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	assert.Less(t, r.took, 20*time.Second, "the bench stops soon after the interrupt")
	requireOneLine(t, r)
	assert.Contains(t, r.stderr, "interrupted")
	if strings.Contains(r.stdout, "sequencer ") {
		assert.Contains(t, r.stdout, "interrupted: the figures cover the time that ran")
	}
}

func TestBadFlagsAreUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"bench", "--partitions", "0"}, []string{"--partitions 0"}},
		{[]string{"bench", "--store", "nosuch"}, []string{`--store "nosuch"`}},
		{[]string{"bench", "--workspaces", "0", "--duration", "0s", "--concurrency", "0"}, []string{"--workspaces 0", "--duration 0s", "--concurrency 0"}},
		{[]string{"bench", "--mode", "trust9"}, []string{"--mode", "trust9"}},
		{[]string{"bench", "--partitions", "4", "--workspaces", "3"}, []string{"one per partition"}},
		{[]string{"bench", "--store", "cql", "--keyspace", "bad-name", "--consistency", "SERIAL"}, []string{"--keyspace", "--consistency"}},
		{[]string{"bench", "--bogus"}, []string{"bogus"}},
		{[]string{"bench", "--store", "cql", "--tls-ca", "ca.pem", "--tls-insecure"}, []string{"--tls-ca and --tls-insecure are exclusive"}},
		{[]string{"verify", "--store", "cql", "--tls-ca", "ca.pem", "--tls-insecure"}, []string{"--tls-ca and --tls-insecure are exclusive"}},
		{[]string{"bench", "--partitions", "many"}, []string{"many"}},
		{[]string{"bench", "--max-unflushed", "2305843009213693952", "--duration", "1s"}, []string{"--max-unflushed 2305843009213693952: want 1..1048576"}},
		{[]string{"bench", "--max-unflushed", "1099511627776", "--duration", "1s"}, []string{"--max-unflushed 1099511627776: want 1..1048576"}},
		{[]string{"bench", "--flush-after-events", "0", "--duration", "1s"}, []string{"--flush-after-events 0: want 1..1048576"}},
		{[]string{"bench", "--flush-after-events", "1048577", "--duration", "1s"}, []string{"--flush-after-events 1048577: want 1..1048576"}},
		{[]string{"demo", "--duration", "-1s"}, []string{"--duration -1s"}},
		{[]string{"demo", "--memory", "--dir", "x"}, []string{"--memory excludes"}},
		{[]string{"demo", "extra"}, []string{"no arguments"}},
		{[]string{"nosuchcmd"}, []string{`unknown command "nosuchcmd"`}},
		{[]string{"nosuchcmd", "--help"}, []string{`unknown command "nosuchcmd"`}},
		{[]string{"--log-level", "info", "-h", "nosuchcmd"}, []string{`unknown command "nosuchcmd"`}},
		{[]string{}, []string{"no command"}},
		{[]string{"verify", "--partition", "70000", "--dir", "x"}, []string{"--partition 70000"}},
		{[]string{"verify", "--dir", "a", "--file", "b"}, []string{"exclusive"}},
		{[]string{"inspect", "--from", "0", "--ws", "0", "--dir", "x"}, []string{"--from 0", "--ws 0"}},
		{[]string{"inspect", "--ws", "abc", "--dir", "x"}, []string{`--ws "abc"`}},
		{[]string{"migrate", "--engine", "oracle"}, []string{"--engine"}},
		{[]string{"migrate", "--replication", "{'class': 'Nope'"}, []string{"schema"}},
		{[]string{"--log-level", "loud", "demo"}, []string{"--log-level"}},
		{[]string{"bench", "--clock-offset", "3s"}, []string{"need --store cql (--store bbolt)"}},
		{[]string{"bench", "--store", "bbolt", "--clock-step-back", "5s", "--clock-step-after", "5s"}, []string{"need --store cql"}},
		{[]string{"bench", "--store", "cql", "--clock-step-back", "5s"}, []string{"go together"}},
		{[]string{"bench", "--store", "cql", "--clock-step-back", "-5s", "--clock-step-after", "1s"}, []string{"--clock-step-back -5s"}},
	} {
		r := runCLI(t, tc.args...)
		if !assert.Equal(t, ExitUsage, r.code, "%q: stdout %q stderr %q", tc.args, r.stdout, r.stderr) {
			continue
		}
		line := requireOneLine(t, r)
		for _, w := range tc.want {
			assert.Contains(t, line, w, "%q", tc.args)
		}
		assert.Empty(t, r.stdout, "%q: no usage text on stdout", tc.args)
	}
}

// TestOneRuleForTheStore: in every command that opens a store, a CQL flag
// selects the CQL store unless --store says otherwise, and flags of the
// other store than --store's, or of both stores, are a usage error.
func TestOneRuleForTheStore(t *testing.T) {
	dir := t.TempDir()
	for _, cmd := range [][]string{
		{"bench", "--duration", "1s"},
		{"verify", "--partition", "0"},
		{"inspect", "--partition", "0"},
		{"actualize", "--app", "1", "--partition", "0"},
		{"alloc", "--ids", "10"},
		{"inspect", "galloc", "seq"},
	} {
		args := func(extra ...string) []string { return append(append([]string{}, cmd...), extra...) }
		for _, bad := range [][]string{
			{"--store", "bbolt", "--hosts", "127.0.0.1:1"},
			{"--store", "bbolt", "--keyspace", "ks"},
			{"--store", "cql", "--dir", dir},
			{"--hosts", "127.0.0.1:1", "--file", filepath.Join(dir, "x.db")},
		} {
			r := runCLI(t, args(bad...)...)
			assert.Equal(t, ExitUsage, r.code, "%q: stdout %q stderr %q", args(bad...), r.stdout, r.stderr)
			assert.Contains(t, requireOneLine(t, r), "--", "%q", args(bad...))
		}
		// --hosts alone: the CQL store, which does not answer there.
		r := runCLI(t, args("--hosts", "127.0.0.1:1", "--timeout", "1s")...)
		assert.Equal(t, ExitFailure, r.code, "%q: stdout %q stderr %q", args("--hosts"), r.stdout, r.stderr)
		line := requireOneLine(t, r)
		assert.Contains(t, line, "127.0.0.1:1", "%q", cmd)
		assert.NotContains(t, line, "--dir or --file", "%q: --hosts selects cql", cmd)
	}
	t.Setenv("CQLSEQ_CQL_HOSTS", "127.0.0.1:1")
	r := runCLI(t, "verify", "--partition", "0", "--timeout", "1s")
	assert.Equal(t, ExitFailure, r.code)
	assert.Contains(t, requireOneLine(t, r), "127.0.0.1:1", "CQLSEQ_CQL_HOSTS selects cql")
	r = runCLI(t, "verify", "--partition", "0", "--file", filepath.Join(dir, "nope.db"))
	assert.Equal(t, ExitFailure, r.code)
	assert.Contains(t, requireOneLine(t, r), "nope.db", "a bbolt flag wins over the environment")
	r = runCLI(t, "demo", "--duration", "200ms", "--dir", dir)
	assert.Equal(t, ExitOK, r.code, "the demo stays embedded: %s", r.stderr)
}

func TestUnreachableCluster(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "--store", "cql", "--hosts", "127.0.0.1:1", "--timeout", "2s"},
		{"verify", "--store", "cql", "--hosts", "127.0.0.1:1"},
		{"inspect", "--store", "cql", "--hosts", "127.0.0.1:1"},
		{"migrate", "--hosts", "127.0.0.1:1"},
	} {
		r := runCLI(t, args...)
		assert.Equal(t, ExitFailure, r.code, "%q: stdout %q stderr %q", args, r.stdout, r.stderr)
		line := requireOneLine(t, r)
		assert.Contains(t, line, "127.0.0.1:1", "%q", args)
		assert.Contains(t, line, "unavailable", "%q", args)
		assert.Less(t, r.took, 10*time.Second, "%q", args)
	}
}

func TestMissingBoltFile(t *testing.T) {
	for _, cmd := range []string{"verify", "inspect"} {
		r := runCLI(t, cmd, "--file", filepath.Join(t.TempDir(), "nope.db"))
		assert.Equal(t, ExitFailure, r.code)
		line := requireOneLine(t, r)
		assert.Contains(t, line, "nope.db")
		r = runCLI(t, cmd)
		assert.Equal(t, ExitFailure, r.code)
		assert.Contains(t, requireOneLine(t, r), "--dir or --file")
	}
}

func TestHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"bench", "--help"}, {"help", "verify"}} {
		r := runCLI(t, args...)
		assert.Equal(t, ExitOK, r.code, "%q", args)
		assert.Contains(t, r.stdout, "Usage:", "%q", args)
	}
}

// lineWatcher is a writer that reports each complete line it sees.
type lineWatcher struct {
	syncBuffer
	lines chan string
	part  []byte
}

func (w *lineWatcher) Write(p []byte) (int, error) {
	n, err := w.syncBuffer.Write(p)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.part = append(w.part, p...)
	for {
		i := bytes.IndexByte(w.part, '\n')
		if i < 0 {
			break
		}
		select {
		case w.lines <- string(w.part[:i]):
		default:
		}
		w.part = w.part[i+1:]
	}
	return n, err
}

func TestMetricsEndpoint(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &lineWatcher{lines: make(chan string, 16)}
	var stdout syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"bench", "--no-sync", "--duration", "1m", "--partitions", "1", "--workspaces", "5",
			"--metrics-addr", "127.0.0.1:0"}, &env{stdout: &stdout, stderr: stderr})
	}()
	var addr string
	select {
	case line := <-stderr.lines:
		require.True(t, strings.HasPrefix(line, "metrics: http://"), line)
		addr = strings.TrimPrefix(line, "metrics: ")
	case code := <-done:
		t.Fatalf("bench ended with %d before serving metrics: %s", code, stderr.String())
	}
	// The endpoint serves while the bench runs; the transactions counter
	// appears once a command has run.
	var body string
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(body, "cqlseq_sequencer_transactions_total") && time.Now().Before(deadline) {
		resp, err := http.Get(addr)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, resp.Body.Close())
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		body = string(b)
	}
	assert.Contains(t, body, `cqlseq_sequencer_transactions_total{app="1",partition="0"}`)
	assert.Contains(t, body, `cqlseq_partition_commands_total{app="1",partition="0",result="stored"}`)
	assert.Contains(t, body, "cqlseq_storage_call_seconds")
	cancel()
	assert.Equal(t, ExitInterrupted, <-done)
	_, err := http.Get(addr)
	assert.Error(t, err, "the server is stopped")
}

// TestBenchFencedVerifies: the fenced mode, with its baseline, and verify
// and inspect on what it wrote (numbers in per-epoch cells).
func TestBenchFencedVerifies(t *testing.T) {
	dir := t.TempDir()
	r := runCLI(t, "bench", "--dir", dir, "--no-sync", "--duration", "500ms", "--partitions", "2", "--workspaces", "100",
		"--concurrency", "4", "--mode", "fenced", "--baseline")
	require.Equal(t, ExitOK, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	assert.Contains(t, r.stdout, "mode fenced")
	assert.Contains(t, r.stdout, "ratio")
	// A second run takes the partitions over (a new epoch) and continues.
	r = runCLI(t, "bench", "--dir", dir, "--no-sync", "--duration", "300ms", "--partitions", "2", "--workspaces", "100",
		"--concurrency", "4", "--mode", "fenced")
	require.Equal(t, ExitOK, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)

	v := runCLI(t, "verify", "--dir", dir, "--partition", "0", "--partition", "1")
	require.Equal(t, ExitOK, v.code, "stdout:\n%s\nstderr:\n%s", v.stdout, v.stderr)
	in := runCLI(t, "inspect", "--dir", dir, "--partition", "1", "--ws", "2", "--limit", "1")
	require.Equal(t, ExitOK, in.code, "stdout:\n%s\nstderr:\n%s", in.stdout, in.stderr)
	// The partition's epoch line: the second run took it over. (Whether
	// workspace 2 got numbers in epoch 2 depends on how many commands a
	// busy machine ran in 300 ms.)
	assert.Regexp(t, `(?m)^epoch\s+2$`, in.stdout)
}

// TestModeChangesOnOneFile: the issue 14 reproduction, bench in fenced
// mode then demo in trust0 on the same file (the demo reported numbers
// going backwards), then trust2 and fenced again; verify finds nothing.
func TestModeChangesOnOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	common := []string{"--file", path, "--no-sync", "--partitions", "1", "--workspaces", "3", "--duration", "300ms"}
	for _, step := range [][]string{
		{"bench", "--mode", "fenced"},
		{"demo", "--mode", "trust0"},
		{"bench", "--mode", "trust2"},
		{"bench", "--mode", "fenced"},
		{"bench", "--mode", "trust1"},
	} {
		r := runCLI(t, append(step, common...)...)
		require.Equal(t, ExitOK, r.code, "%v\nstdout:\n%s\nstderr:\n%s", step, r.stdout, r.stderr)
	}
	v := runCLI(t, "verify", "--file", path)
	require.Equal(t, ExitOK, v.code, "stdout:\n%s\nstderr:\n%s", v.stdout, v.stderr)
	assert.Contains(t, v.stdout, "OK")
}

// TestBenchReportSaysWhichHedgesAreNormal is issue 28's item 8: a healthy
// node's report showed thousands of hedges and retries with no word on
// whether that is normal.
func TestBenchReportSaysWhichHedgesAreNormal(t *testing.T) {
	var b bytes.Buffer
	printBench(&b, &benchReport{Mode: "fenced", CQL: &cqlHostReport{Attempts: 12979, Hedges: 64, Retries: 34}})
	assert.Contains(t, b.String(), "12,979 attempts, 64 hedges, 34 retries")
	assert.Contains(t, b.String(), "normal on a healthy cluster: hedges near 1 % of attempts")

	b.Reset()
	printBench(&b, &benchReport{Mode: "fenced"})
	assert.NotContains(t, b.String(), "hedges", "no CQL session, no word on hedges")
}
