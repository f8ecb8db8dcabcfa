package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/cqlseq/cqlseq/internal/procstat"
)

// nodeCPU is the cluster nodes' CPU time at an instant: the node
// processes and their user+system time summed.
type nodeCPU struct {
	pids []int
	used time.Duration
	err  error // not readable (no cluster, a node down)
}

// nodeCPUNow reads the CPU time of the cluster's node processes.
func (t *tort) nodeCPUNow() nodeCPU {
	if t.cluster == nil || len(t.cluster.Nodes) == 0 {
		return nodeCPU{err: errors.New("no cluster")}
	}
	var n nodeCPU
	for _, node := range t.cluster.Nodes {
		n.pids = append(n.pids, node.PID)
	}
	n.used, n.err = procstat.Sum(n.pids)
	return n
}

// phaseCost is what a phase's acknowledged commands cost: the nodes' CPU
// time over the whole phase and the CQL statements of the children that
// wrote a report.
type phaseCost struct {
	acked uint64 // the phase's acknowledged commands (its children's ack logs)
	// nodeCPU is the nodes' CPU time from the phase's start to its end;
	// nodeErr says why it was not measured (a node restarted, ...).
	nodeCPU time.Duration
	nodeErr string
	// statements and conditional are summed over the children that wrote
	// a report, reported the commands of those children.
	statements, conditional, reported uint64
}

// measureNodes sets the nodes' CPU time between begin and end.
func (c *phaseCost) measureNodes(begin, end nodeCPU) {
	switch {
	case begin.err != nil:
		c.nodeErr = begin.err.Error()
	case end.err != nil:
		c.nodeErr = end.err.Error()
	case !slices.Equal(begin.pids, end.pids):
		c.nodeErr = "a node was restarted during the phase (its CPU time before the restart is lost)"
	default:
		c.nodeCPU = end.used - begin.used
	}
}

// childCost is the part of a child bench's JSON report the cost reads.
type childCost struct {
	Cost *struct {
		Commands    uint64  `json:"commands"`
		Statements  *uint64 `json:"cql_statements"`
		Conditional *uint64 `json:"cql_conditional_statements"`
	} `json:"cost"`
}

// addReport adds the CQL statements of a child's JSON report at path, if
// it wrote one with them (a SIGKILLed child writes none).
func (c *phaseCost) addReport(path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	var r childCost
	if json.Unmarshal(b, &r) != nil || r.Cost == nil || r.Cost.Statements == nil || r.Cost.Conditional == nil {
		return
	}
	c.statements += *r.Cost.Statements
	c.conditional += *r.Cost.Conditional
	c.reported += r.Cost.Commands
}

// String is the cost as the report says it.
func (c phaseCost) String() string {
	var s string
	switch {
	case c.acked == 0:
		s = "no command acknowledged: no cost per command."
	case c.nodeErr != "":
		s = fmt.Sprintf("the nodes' CPU time per command not measured: %s.", c.nodeErr)
	default:
		s = fmt.Sprintf("the nodes used %.2f core-ms per acknowledged command (%.1f s of CPU over the phase for %d commands; "+
			"everything they did in it counts: the commands, takeovers, actualizations, tools, compaction, restarts' recovery).",
			float64(c.nodeCPU)/1e6/float64(c.acked), c.nodeCPU.Seconds(), c.acked)
	}
	if c.reported > 0 {
		s += fmt.Sprintf(" %.2f CQL statements per command (%.2f conditional), over the %d commands of the children that wrote a report.",
			float64(c.statements)/float64(c.reported), float64(c.conditional)/float64(c.reported), c.reported)
	}
	return s
}
