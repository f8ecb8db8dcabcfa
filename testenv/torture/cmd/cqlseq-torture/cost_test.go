package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/internal/procstat"
	"github.com/cqlseq/cqlseq/testenv/cassandra"
)

// TestPhaseCostNodesCPUPerCommand: the nodes' CPU time over the phase is
// divided by the commands the ack logs hold; the statements come from
// the children that wrote a report (a SIGKILLed one wrote none).
func TestPhaseCostNodesCPUPerCommand(t *testing.T) {
	dir := t.TempDir()
	report := filepath.Join(dir, "a.json")
	require.NoError(t, os.WriteFile(report, []byte(`{"sequencer": {}, "cost": {"commands": 400, "cql_statements": 880, "cql_conditional_statements": 10}}`), 0o644))
	c := phaseCost{acked: 1000}
	c.addReport(report)
	c.addReport(filepath.Join(dir, "killed.json"))
	c.measureNodes(nodeCPU{pids: []int{7, 8, 9}, used: 10 * time.Second}, nodeCPU{pids: []int{7, 8, 9}, used: 13 * time.Second})
	assert.Equal(t, 3*time.Second, c.nodeCPU)
	assert.Equal(t, "the nodes used 3.00 core-ms per acknowledged command (3.0 s of CPU over the phase for 1000 commands; "+
		"everything they did in it counts: the commands, takeovers, actualizations, tools, compaction, restarts' recovery). "+
		"2.20 CQL statements per command (0.03 conditional), over the 400 commands of the children that wrote a report.", c.String())
}

// TestPhaseCostNotMeasured: a node restarted in the phase (its pid
// changed), a node not readable, or no command: the report says so
// instead of a figure.
func TestPhaseCostNotMeasured(t *testing.T) {
	c := phaseCost{acked: 10}
	c.measureNodes(nodeCPU{pids: []int{7, 8, 9}, used: time.Second}, nodeCPU{pids: []int{7, 18, 9}, used: time.Second / 2})
	assert.Zero(t, c.nodeCPU)
	assert.Contains(t, c.String(), "not measured: a node was restarted during the phase")

	c = phaseCost{acked: 10}
	c.measureNodes(nodeCPU{pids: []int{7}}, nodeCPU{err: errors.New("procstat: open /proc/7/stat: no such file")})
	assert.Contains(t, c.String(), "not measured: procstat: open /proc/7/stat")

	assert.Equal(t, "no command acknowledged: no cost per command.", phaseCost{}.String())
}

// TestNodeCPUNowReadsTheClusterNodes: the cluster's node processes are
// read (here this test's own process stands for a node).
func TestNodeCPUNowReadsTheClusterNodes(t *testing.T) {
	tt := &tort{}
	assert.Error(t, tt.nodeCPUNow().err, "no cluster")
	tt.cluster = &cassandra.Cluster{Nodes: []*cassandra.Instance{{PID: os.Getpid()}, {PID: os.Getpid()}}}
	self, err := procstat.Self()
	require.NoError(t, err)
	n := tt.nodeCPUNow()
	require.NoError(t, n.err)
	assert.Equal(t, []int{os.Getpid(), os.Getpid()}, n.pids)
	assert.GreaterOrEqual(t, n.used, 2*self, "both nodes' time, summed")
	tt.cluster.Nodes = append(tt.cluster.Nodes, &cassandra.Instance{PID: 1 << 30})
	assert.ErrorContains(t, tt.nodeCPUNow().err, "1073741824", "a node not running")
}
