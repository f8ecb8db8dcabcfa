package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/metrics"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/cql"
	"github.com/cqlseq/cqlseq/storage/mem"
)

// The cost is the calls made between the snapshots divided by the
// commands: calls made before the first snapshot are not counted.
func TestCostCountsCallsOfMemStore(t *testing.T) {
	mc, err := metrics.New(prometheus.NewRegistry())
	require.NoError(t, err)
	inner := mem.New(mem.Options{})
	st := mc.Storage(inner)
	defer st.Close()
	store := &openedStore{st: inner}
	ctx := context.Background()
	pk, ck := []byte("p"), []byte("c")

	require.NoError(t, st.Put(ctx, pk, ck, []byte("before"))) // not counted
	before, err := readCostCounts(mc, store, nil)
	require.NoError(t, err)
	assert.Nil(t, before.cql, "not a CQL store")
	for range 3 {
		require.NoError(t, st.PutBatch(ctx, []storage.Row{{PKey: pk, CCols: ck, Value: []byte("v")}}))
	}
	_, _, err = st.Get(ctx, pk, ck)
	require.NoError(t, err)
	_, err = st.ApplyBatchIf(ctx, pk, []storage.Condition{{CCols: []byte("x")}}, []storage.Row{{PKey: pk, CCols: []byte("x"), Value: []byte("v")}})
	require.NoError(t, err)
	after, err := readCostCounts(mc, store, nil)
	require.NoError(t, err)

	r := newCostReport(before, after, 2)
	require.NotNil(t, r)
	assert.Equal(t, uint64(2), r.Commands)
	assert.Equal(t, map[string]uint64{"PutBatch": 3, "Get": 1, "ApplyBatchIf": 1}, r.StorageCalls)
	assert.Equal(t, map[string]float64{"PutBatch": 1.5, "Get": 0.5, "ApplyBatchIf": 0.5}, r.CallsPerCommand)
	assert.Nil(t, r.CQLStatementsPerCommand, "no CQL figures for another store")

	require.NotNil(t, r.ClientCPUMsPerCommand, "this process's CPU, from /proc/self/stat")
	assert.GreaterOrEqual(t, *r.ClientCPUMsPerCommand, 0.0)
	assert.Nil(t, r.NodeCPUMsPerCommand, "no --node-pids")

	var b bytes.Buffer
	printCost(&b, r)
	assert.Contains(t, b.String(), "  cost per command: storage calls: PutBatch 1.50, ApplyBatchIf 0.50, Get 0.50\n")
	assert.Contains(t, b.String(), "  cpu per command: client ")
}

// --node-pids: the CPU time of the given processes (here this one) over
// the commands; a process that cannot be read is refused before the run.
func TestCostNodeCPU(t *testing.T) {
	mc, err := metrics.New(prometheus.NewRegistry())
	require.NoError(t, err)
	store := &openedStore{st: mem.New(mem.Options{})}
	pids := []int{os.Getpid()}
	require.NoError(t, checkNodePIDs(pids))
	before, err := readCostCounts(mc, store, pids)
	require.NoError(t, err)
	require.NotNil(t, before.nodeCPU)
	after, err := readCostCounts(mc, store, pids)
	require.NoError(t, err)
	r := newCostReport(before, after, 10)
	require.NotNil(t, r.NodeCPUMsPerCommand)
	assert.InDelta(t, msf(*after.nodeCPU-*before.nodeCPU)/10, *r.NodeCPUMsPerCommand, 1e-9)
	var b bytes.Buffer
	printCost(&b, r)
	assert.Contains(t, b.String(), "  cpu per command: nodes ")

	assert.ErrorContains(t, checkNodePIDs([]int{os.Getpid(), 1 << 30}), "--node-pids")
}

func TestCostCQLStatements(t *testing.T) {
	before := costCounts{calls: map[string]uint64{"PutBatch": 10}, cql: &cql.StatementStats{Statements: 5, Conditional: 1}}
	after := costCounts{calls: map[string]uint64{"PutBatch": 14, "ApplyBatchIf": 4}, cql: &cql.StatementStats{Statements: 15, Conditional: 5}}
	r := newCostReport(before, after, 4)
	require.NotNil(t, r)
	require.NotNil(t, r.CQLStatementsPerCommand)
	assert.Equal(t, uint64(10), *r.CQLStatements)
	assert.Equal(t, 2.5, *r.CQLStatementsPerCommand)
	assert.Equal(t, uint64(4), *r.CQLConditional)
	assert.Equal(t, 1.0, *r.CQLConditionalPerCommand)
	var b bytes.Buffer
	printCost(&b, r)
	assert.Equal(t, "  cost per command: 2.50 CQL statements (1.00 conditional), storage calls: ApplyBatchIf 1.00, PutBatch 1.00\n", b.String())

	js, err := json.Marshal(r)
	require.NoError(t, err)
	for _, k := range []string{`"storage_calls_per_command"`, `"cql_statements_per_command":2.5`, `"cql_conditional_statements_per_command":1`, `"counted"`} {
		assert.Contains(t, string(js), k)
	}
}

func TestCostNoCommands(t *testing.T) {
	c := costCounts{calls: map[string]uint64{"Get": 3}, cql: &cql.StatementStats{Statements: 3}}
	assert.Nil(t, newCostReport(costCounts{calls: map[string]uint64{}}, c, 0), "no cost without commands, no division by zero")
	var b bytes.Buffer
	printCost(&b, nil)
	assert.Equal(t, "  cost per command: none (no command acknowledged)\n", b.String())
	js, err := json.Marshal(&benchReport{})
	require.NoError(t, err)
	assert.NotContains(t, string(js), `"cost"`)
}

// A bench run reports its cost, in text and JSON: the storage calls of the
// sequencer run divided by its commands.
func TestCostBenchBoltJSON(t *testing.T) {
	dir := t.TempDir()
	jf := filepath.Join(dir, "report.json")
	r := runCLI(t, "bench", "--dir", dir, "--no-sync", "--duration", "300ms", "--partitions", "2", "--workspaces", "10",
		"--concurrency", "2", "--mode", "fenced", "--json", jf)
	require.Equal(t, ExitOK, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	assert.Contains(t, r.stdout, "cost per command: storage calls: ")
	assert.NotContains(t, r.stdout, "CQL statements", "bbolt has none")
	b, err := os.ReadFile(jf)
	require.NoError(t, err)
	var rep benchReport
	require.NoError(t, json.Unmarshal(b, &rep))
	require.NotNil(t, rep.Cost)
	assert.Equal(t, rep.Sequencer.Commands, rep.Cost.Commands)
	require.NotEmpty(t, rep.Cost.StorageCalls)
	for op, n := range rep.Cost.StorageCalls {
		assert.InDelta(t, float64(n)/float64(rep.Cost.Commands), rep.Cost.CallsPerCommand[op], 1e-9, op)
	}
	assert.Greater(t, rep.Cost.StorageCalls["ApplyBatchIf"]+rep.Cost.StorageCalls["ApplyBatchesIf"], uint64(0), "fenced writes are conditional")
	assert.Nil(t, rep.Cost.CQLStatements)
}
