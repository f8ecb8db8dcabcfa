package cli

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/cqlseq/cqlseq/internal/procstat"
	"github.com/cqlseq/cqlseq/metrics"
	"github.com/cqlseq/cqlseq/storage/cql"
)

// costCounted says what bench's cost figures count.
const costCounted = "from just before the sequencer run's first command until its partitions were closed (their last flush and lease release included): " +
	"storage calls as the metrics wrapper records them (every call, failed ones included, by operation); " +
	"CQL statements as the CQL store sends them (a query, a page of a read, or a batch, UNLOGGED or conditional, is one; " +
	"a PutBatch is one per partition it writes, more if a partition's rows exceed the batch limits; retries and hedges are not statements but attempts), " +
	"conditional statements the lightweight transactions among them; " +
	"CPU: user+system time of this process and, with --node-pids, of the given node processes, from /proc/<pid>/stat; each divided by the commands acknowledged"

// costCounts is a snapshot of the counters bench's cost is computed from.
type costCounts struct {
	calls     map[string]uint64   // storage calls by operation
	cql       *cql.StatementStats // nil: not a CQL store
	clientCPU *time.Duration      // this process's user+system CPU; nil: not readable
	nodeCPU   *time.Duration      // the node processes' (--node-pids); nil: none given, or one not readable
}

// readCostCounts snapshots the storage calls recorded by mc, for a CQL
// store its statements, and the CPU time of this process and of the
// processes nodePIDs.
func readCostCounts(mc *metrics.Collectors, store *openedStore, nodePIDs []int) (costCounts, error) {
	calls, err := mc.StorageCalls()
	if err != nil {
		return costCounts{}, err
	}
	c := costCounts{calls: calls}
	if cs, ok := store.st.(*cql.Store); ok {
		s := cs.StatementStats()
		c.cql = &s
	}
	if d, err := procstat.Self(); err == nil {
		c.clientCPU = &d
	}
	if len(nodePIDs) > 0 {
		if sum, err := procstat.Sum(nodePIDs); err == nil {
			c.nodeCPU = &sum
		}
	}
	return c, nil
}

// checkNodePIDs returns an error naming the first of pids whose CPU time
// cannot be read.
func checkNodePIDs(pids []int) error {
	if _, err := procstat.Sum(pids); err != nil {
		return fmt.Errorf("--node-pids: %w", err)
	}
	return nil
}

// costReport is what the acknowledged commands cost the store: the counts
// made between two snapshots, each also divided by the commands.
type costReport struct {
	Commands        uint64             `json:"commands"`
	StorageCalls    map[string]uint64  `json:"storage_calls"`             // by operation
	CallsPerCommand map[string]float64 `json:"storage_calls_per_command"` // by operation
	// CQL only.
	CQLStatements            *uint64  `json:"cql_statements,omitempty"`
	CQLStatementsPerCommand  *float64 `json:"cql_statements_per_command,omitempty"`
	CQLConditional           *uint64  `json:"cql_conditional_statements,omitempty"`
	CQLConditionalPerCommand *float64 `json:"cql_conditional_statements_per_command,omitempty"`
	// CPU, user+system, in ms per command: this process's (on Linux), and
	// the node processes' given by --node-pids (all of them summed).
	ClientCPUMsPerCommand *float64 `json:"client_cpu_ms_per_command,omitempty"`
	NodeCPUMsPerCommand   *float64 `json:"node_cpu_ms_per_command,omitempty"`
	Counted               string   `json:"counted"`
}

// newCostReport returns the cost of commands acknowledged commands from
// the counts before and after them; nil when no command was acknowledged.
func newCostReport(before, after costCounts, commands uint64) *costReport {
	if commands == 0 {
		return nil
	}
	n := float64(commands)
	r := &costReport{Commands: commands, StorageCalls: map[string]uint64{}, CallsPerCommand: map[string]float64{}, Counted: costCounted}
	for op, a := range after.calls {
		if d := a - before.calls[op]; d > 0 {
			r.StorageCalls[op] = d
			r.CallsPerCommand[op] = float64(d) / n
		}
	}
	if before.cql != nil && after.cql != nil {
		st, cond := after.cql.Statements-before.cql.Statements, after.cql.Conditional-before.cql.Conditional
		stPer, condPer := float64(st)/n, float64(cond)/n
		r.CQLStatements, r.CQLStatementsPerCommand = &st, &stPer
		r.CQLConditional, r.CQLConditionalPerCommand = &cond, &condPer
	}
	perCommand := func(b, a *time.Duration) *float64 {
		if b == nil || a == nil {
			return nil
		}
		v := msf(*a-*b) / n
		return &v
	}
	r.ClientCPUMsPerCommand = perCommand(before.clientCPU, after.clientCPU)
	r.NodeCPUMsPerCommand = perCommand(before.nodeCPU, after.nodeCPU)
	return r
}

// printCost prints the cost line: `cost per command: 2.21 CQL statements
// (0.98 conditional), storage calls: PutBatch 1.10, ApplyBatchIf 0.98`,
// operations by calls, most first.
func printCost(w io.Writer, r *costReport) {
	if r == nil {
		fmt.Fprintln(w, "  cost per command: none (no command acknowledged)")
		return
	}
	ops := make([]string, 0, len(r.StorageCalls))
	for op := range r.StorageCalls {
		ops = append(ops, op)
	}
	slices.SortFunc(ops, func(a, b string) int {
		return cmp.Or(cmp.Compare(r.StorageCalls[b], r.StorageCalls[a]), strings.Compare(a, b))
	})
	parts := make([]string, len(ops))
	for i, op := range ops {
		parts[i] = fmt.Sprintf("%s %.2f", op, r.CallsPerCommand[op])
	}
	calls := "none"
	if len(parts) > 0 {
		calls = strings.Join(parts, ", ")
	}
	var stmts string
	if r.CQLStatementsPerCommand != nil {
		stmts = fmt.Sprintf("%.2f CQL statements (%.2f conditional), ", *r.CQLStatementsPerCommand, *r.CQLConditionalPerCommand)
	}
	fmt.Fprintf(w, "  cost per command: %sstorage calls: %s\n", stmts, calls)
	var cpu []string
	if r.NodeCPUMsPerCommand != nil {
		cpu = append(cpu, fmt.Sprintf("nodes %.3f ms", *r.NodeCPUMsPerCommand))
	}
	if r.ClientCPUMsPerCommand != nil {
		cpu = append(cpu, fmt.Sprintf("client %.3f ms", *r.ClientCPUMsPerCommand))
	}
	if len(cpu) > 0 {
		fmt.Fprintf(w, "  cpu per command: %s (user+system, from /proc)\n", strings.Join(cpu, ", "))
	}
}
