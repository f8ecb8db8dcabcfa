package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestParseProfiles(t *testing.T) {
	got, err := parseProfiles("0;0.5ms;0,500us,5ms", 3)
	if err != nil {
		t.Fatal(err)
	}
	ms := time.Millisecond
	want := [][]time.Duration{{0, 0, 0}, {ms / 2, ms / 2, ms / 2}, {0, ms / 2, 5 * ms}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		for j := range want[i] {
			if got[i][j] != want[i][j] {
				t.Fatalf("got %v, want %v", got, want)
			}
		}
	}
	for _, bad := range []string{"1ms,2ms", "x", "-1ms"} {
		if _, err := parseProfiles(bad, 3); err == nil {
			t.Errorf("parseProfiles(%q): no error", bad)
		}
	}
}

// TestTableNodesCPUPerCommand: the table's cost column is the median of
// the runs that measured it, n/a when none did; the log line says why a
// run measured none.
func TestTableNodesCPUPerCommand(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	all := []result{
		{Profile: "0", Mode: "trust2", Partitions: 4, PerSecond: 300, NodeCPUMs: f(2.5)},
		{Profile: "0", Mode: "trust2", Partitions: 4, PerSecond: 320, NodeCPUMs: f(2.1)},
		{Profile: "0", Mode: "trust2", Partitions: 4, PerSecond: 310, NodeCPUMs: f(9.9)},
		{Profile: "0", Mode: "fenced", Partitions: 4, PerSecond: 150, CPUError: "node 2: stats: no CPU usage reported"},
	}
	var b strings.Builder
	printTable(&b, config{clients: 16, workspaces: 100, repeat: 3}, all, nil)
	assert.Contains(t, b.String(), "| 0 | 4 | trust2 | 310 | 0.0 | 0.0 | 1.00x | 2.50 |")
	assert.Contains(t, b.String(), "| 0 | 4 | fenced | 150 | 0.0 | 0.0 | 2.07x | n/a |")
	assert.Equal(t, "nodes 2.10 core-ms per command, 2.20 CQL statements per command", result{NodeCPUMs: f(2.1), Statements: f(2.2)}.cost())
	assert.Equal(t, "nodes' CPU not measured: node 2: stats: no CPU usage reported", all[3].cost())
}
