package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestVerdictReadsVerifyOutput(t *testing.T) {
	ok := "partition 0: 5 events ...: OK\nacks f: 5 acknowledged commands in 1 partition: OK, 0 lost, 0 duplicates, 0 regressions\n"
	lost, dups, regs, good := verdict(ok)
	require.True(t, good)
	require.Zero(t, lost+dups+regs)

	bad := "partition 0: ...: FAILED, 1 problems\n  duplicate: WSID 1 SeqID 1: number 5 ...\n" +
		"acks f: 5 acknowledged commands in 1 partition: FAILED, 2 lost, 1 duplicates, 3 regressions\n  lost: ...\n"
	lost, dups, regs, good = verdict(bad)
	require.False(t, good)
	require.Equal(t, []uint64{2, 2, 3}, []uint64{lost, dups, regs})
}

func TestPartitionRulesTouchOnlyTheStoragePortOfNode3(t *testing.T) {
	rs := partitionRules(7001)
	require.Len(t, rs, 4)
	for _, r := range rs {
		s := strings.Join(r, " ")
		require.Contains(t, s, "--dport 7001")
		require.Contains(t, s, "127.0.0.3")
		require.Contains(t, s, "-j DROP")
		require.Contains(t, s, "--comment cqlseq-torture")
	}
}

func TestBusyFailedFromBenchJSON(t *testing.T) {
	b := []byte(`{"sequencer": {"commands": 10, "errors": 4,` + "\n" + `"first_error": "x"}, "busy": {"rejections": 7, "actualizing": 1}}`)
	require.Equal(t, "7/4", busyFailed(b))
}

func TestConcatAcksDropsTornTails(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	require.NoError(t, os.WriteFile(a, []byte("# x\n0 1 1 1:1,2:1\n0 2 1 1:"), 0o644))
	require.NoError(t, os.WriteFile(b, []byte("0 3 1 1:3,2:3\n"), 0o644))
	out := filepath.Join(dir, "all")
	require.NoError(t, concatAcks(out, []string{a, b}))
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	require.Equal(t, "# x\n0 1 1 1:1,2:1\n0 3 1 1:3,2:3\n", string(got))
	require.Equal(t, 2, countAcks(out))
}
