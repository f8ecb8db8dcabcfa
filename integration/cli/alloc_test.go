package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/integration/itest"
)

// allocReport is the part of alloc's JSON report the test reads.
type allocReport struct {
	IDs        uint64 `json:"ids"`
	Spawned    bool   `json:"spawned"`
	Fetches    uint64 `json:"chunk_fetches"`
	Conflicts  uint64 `json:"conflicts"`
	Abandoned  uint64 `json:"abandoned"`
	LWTs       uint64 `json:"lwts"`
	Allocated  uint64 `json:"allocated"`
	Wasted     uint64 `json:"wasted"`
	Unique     bool   `json:"unique"`
	Monotonic  bool   `json:"monotonic_per_process"`
	Processes  []any  `json:"processes"`
	Duplicates uint64 `json:"duplicates"`
}

// TestAllocSpawnedProcesses: cqlseq alloc --spawn runs 4 child processes
// (own sessions) x 16 goroutines on one galloc sequence of the cluster;
// every ID is unique, and inspect galloc shows the record. The children's
// timelines, merged by the parent, hold every ID handed out.
func TestAllocSpawnedProcesses(t *testing.T) {
	itest.NoLeaks(t)
	js := filepath.Join(t.TempDir(), "alloc.json")
	tl := filepath.Join(t.TempDir(), "alloc.timeline.json")
	name := itest.UniqueName("alloc")
	r := itest.RunCLI(t, args([]string{"alloc", "--spawn", "--name", name, "--procs", "4", "--goroutines", "16",
		"--ids", "200000", "--chunk", "5000", "--json", js, "--timeline", tl, "--timeline-interval", "100ms"}, storeFlags(itest.Keyspace()))...)
	require.Equal(t, 0, r.Code, r.Stderr)
	b, err := os.ReadFile(js)
	require.NoError(t, err)
	var rep allocReport
	require.NoError(t, json.Unmarshal(b, &rep))
	assert.True(t, rep.Spawned)
	assert.Len(t, rep.Processes, 4)
	assert.Equal(t, uint64(200000), rep.IDs)
	assert.True(t, rep.Unique)
	assert.Zero(t, rep.Duplicates)
	assert.True(t, rep.Monotonic)
	assert.LessOrEqual(t, rep.Wasted, uint64(4*2*5000))
	assert.Equal(t, rep.Fetches+rep.Conflicts+rep.Abandoned+4, rep.LWTs, "one LWT per chunk (and per lost swap, per allocation cut short, the opening inserts)")

	b, err = os.ReadFile(tl)
	require.NoError(t, err)
	var timeline struct {
		Intervals []struct{ Acked, Failed uint64 } `json:"intervals"`
	}
	require.NoError(t, json.Unmarshal(b, &timeline))
	var acked, failed uint64
	for _, iv := range timeline.Intervals {
		acked, failed = acked+iv.Acked, failed+iv.Failed
	}
	assert.Equal(t, uint64(200000), acked, "the merged timeline holds every ID handed out")
	assert.Zero(t, failed)

	r = itest.RunCLI(t, args([]string{"inspect", "galloc", name}, storeFlags(itest.Keyspace()))...)
	require.Equal(t, 0, r.Code, r.Stderr)
	assert.Contains(t, r.Stdout, "chunk size        5,000")
}
