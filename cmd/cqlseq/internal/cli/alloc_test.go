package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAllocBoltJSONAndInspect(t *testing.T) {
	dir := t.TempDir()
	js := filepath.Join(dir, "alloc.json")
	r := runCLI(t, "alloc", "--dir", dir, "--name", "orders", "--ids", "30000", "--chunk", "1000",
		"--procs", "3", "--goroutines", "4", "--json", js)
	require.Equal(t, ExitOK, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, r.stdout, "all unique")
	b, err := os.ReadFile(js)
	require.NoError(t, err)
	var rep allocReport
	require.NoError(t, json.Unmarshal(b, &rep))
	assert.Equal(t, uint64(30000), rep.IDs)
	assert.True(t, rep.Unique)
	assert.True(t, rep.Monotonic)
	assert.Len(t, rep.Processes, 3)
	assert.LessOrEqual(t, rep.Wasted, uint64(3*2*1000))
	assert.GreaterOrEqual(t, rep.Allocated/1000, rep.Fetches, "an allocation cut short by Close may have been applied")
	assert.Equal(t, rep.Fetches+rep.Conflicts+rep.Abandoned+3, rep.LWTs, "one LWT per chunk, per lost swap, per allocation cut short, one insert per process")

	r = runCLI(t, "inspect", "galloc", "orders", "--dir", dir, "--json")
	require.Equal(t, ExitOK, r.code, "stderr: %s", r.stderr)
	var rec gallocRecord
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rec))
	assert.Equal(t, rep.Allocated, rec.Allocated)
	assert.Equal(t, rep.Fetches, rec.Allocations)
	require.NotNil(t, rec.AllocatedUpTo)
	assert.Equal(t, int64(rec.Allocated)+1, *rec.AllocatedUpTo)
	assert.NotEmpty(t, rec.Process)

	// A second run continues the sequence.
	r = runCLI(t, "alloc", "--dir", dir, "--name", "orders", "--ids", "1000", "--chunk", "1000", "--procs", "1", "--goroutines", "1")
	require.Equal(t, ExitOK, r.code, "stderr: %s", r.stderr)
}

func TestAllocBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"alloc", "--chunk", "-1"},
		{"alloc", "--chunk", "0"},
		{"alloc", "--type", "smallint", "--start", "40000"},
		{"alloc", "--type", "tinyint"},
		{"alloc", "--procs", "0"},
		{"alloc", "--spawn"},
	} {
		r := runCLI(t, args...)
		assert.Equal(t, ExitUsage, r.code, "%v: %s", args, r.stderr)
		requireOneLine(t, r)
	}
	r := runCLI(t, "alloc", "--dir", t.TempDir(), "--type", "smallint", "--start", "32000", "--chunk", "100", "--ids", "1000", "--procs", "1")
	assert.Equal(t, ExitFailure, r.code)
	assert.Contains(t, requireOneLine(t, r), "exhausted")
	r = runCLI(t, "inspect", "galloc", "--dir", t.TempDir())
	assert.Equal(t, ExitUsage, r.code)
}

// TestInterruptStopsAlloc is issue 28's item 8: alloc --ids 1000000000
// took 7-15 s to stop after Ctrl-C (and grew to gigabytes). Interrupted,
// it exits 130 and reports nothing. The bound here catches a hang, not
// a speed (a SIGINT on the built binary stops it in about 50 ms here:
// docs/benchmarks.md).
func TestInterruptStopsAlloc(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const after = 500 * time.Millisecond
	stop := time.AfterFunc(after, cancel)
	defer stop.Stop()
	r := runEnv(ctx, false, "alloc", "--dir", t.TempDir(), "--procs", "4", "--goroutines", "16", "--ids", "1000000000")
	assert.Equal(t, ExitInterrupted, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	assert.Less(t, r.took, after+10*time.Second, "alloc stops soon after the interrupt")
	t.Logf("stopped %v after the interrupt", r.took-after)
	assert.NotContains(t, r.stdout, "all unique", "an interrupted run checks nothing")
	requireOneLine(t, r)
}
