package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/plog/plogcheck"
	"github.com/cqlseq/cqlseq/storage/boltdb"
)

// TestVerifyAcks runs bench with an ack log on one bbolt file, then plants
// each defect verify --acks must catch: a lost acknowledged event, a number
// acknowledged twice, a number going back, numbers that differ from the
// PLog's.
func TestVerifyAcks(t *testing.T) {
	dir := t.TempDir()
	acks := filepath.Join(dir, "acks.log")
	r := runCLI(t, "bench", "--dir", dir, "--no-sync", "--duration", "300ms", "--partitions", "2", "--workspaces", "20",
		"--concurrency", "4", "--mode", "trust2", "--ack-log", acks)
	require.Equal(t, ExitOK, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	// A torn line, as a process killed mid-write leaves it.
	fh, err := os.OpenFile(acks, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = fh.WriteString("1 99999 3 1:")
	require.NoError(t, err)
	require.NoError(t, fh.Close())

	v := runCLI(t, "verify", "--dir", dir, "--partition", "0,1", "--acks", acks)
	require.Equal(t, ExitOK, v.code, "stdout:\n%s\nstderr:\n%s", v.stdout, v.stderr)
	require.Contains(t, v.stdout, "OK, 0 lost, 0 duplicates, 0 regressions")
	require.Contains(t, v.stdout, "a torn last line of 12 bytes ignored")
	require.NotContains(t, v.stdout, " 0 record rows checked", "bench's commands create records")

	// Issue 20 item 7: the record row of the first acknowledged command is
	// lost (its event is not).
	first0, err := plogcheck.ReadAckLog(acks)
	require.NoError(t, err)
	a0 := first0.Acks[0]
	require.Equal(t, seqRecords, a0.Numbers[0].SeqID)
	rec := plog.RecordID(a0.Numbers[0].Number)
	db, err := boltdb.Open(filepath.Join(dir, "cqlseq.db"), boltdb.Options{})
	require.NoError(t, err)
	deleted, err := db.CompareAndDelete(context.Background(), plog.RecordPKey(a0.WSID, rec), plog.RecordCCols(rec), plog.RecordValue(a0.Offset))
	require.NoError(t, err)
	require.NoError(t, db.Close())
	require.True(t, deleted)
	v = runCLI(t, "verify", "--dir", dir, "--partition", "0,1", "--acks", acks)
	require.Equal(t, ExitFailure, v.code, "stdout:\n%s\nstderr:\n%s", v.stdout, v.stderr)
	require.Contains(t, v.stdout, "FAILED, 0 lost, 0 duplicates, 0 regressions, 1 lost records")
	require.Contains(t, v.stdout, fmt.Sprintf("record %d of WSID %d is not stored", rec, a0.WSID))
	db, err = boltdb.Open(filepath.Join(dir, "cqlseq.db"), boltdb.Options{})
	require.NoError(t, err)
	require.NoError(t, db.Put(context.Background(), plog.RecordPKey(a0.WSID, rec), plog.RecordCCols(rec), plog.RecordValue(a0.Offset)))
	require.NoError(t, db.Close())

	good, err := os.ReadFile(acks)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(good[:strings.LastIndexByte(string(good), '\n')+1])), "\n")
	var data []string
	for _, l := range lines {
		if !strings.HasPrefix(l, "#") {
			data = append(data, l)
		}
	}
	require.Greater(t, len(data), 10)
	first, err := plogcheck.ParseAck(data[0])
	require.NoError(t, err)
	last, err := plogcheck.ParseAck(data[len(data)-1])
	require.NoError(t, err)

	for _, tt := range []struct {
		name  string
		extra string // a line appended to the good log
		want  string
	}{
		{"lost", "0 999999 999 1:1,2:1", "1 lost, 0 duplicates, 0 regressions"},
		{"other numbers", strings.Join([]string{u(first.Partition), u(first.Offset), u(first.WSID), "1:999999,2:999999"}, " "), "1 lost"},
		{"duplicate", strings.Join([]string{u(first.Partition), u(first.Offset + 1000000), u(first.WSID), "1:" + u(first.Numbers[0].Number) + ",2:999999"}, " "), "1 duplicates"},
		{"regression", strings.Join([]string{u(last.Partition), u(last.Offset + 1000000), u(last.WSID), "1:" + u(last.Numbers[0].Number-1) + ",2:999999"}, " "), "1 regressions"},
		// Issue 20 item 2: the same offset with the same numbers again.
		{"offset acknowledged twice", data[0], "0 lost, 1 duplicates, 0 regressions, 0 lost records"},
		// Issue 20 item 1: a number of the first ack's workspace
		// acknowledged again in the other partition.
		{"duplicate in another partition", strings.Join([]string{u(1 - first.Partition), u(first.Offset + 1000000), u(first.WSID), "1:999999,2:" + u(first.Numbers[1].Number)}, " "), "1 lost, 1 duplicates"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			bad := filepath.Join(t.TempDir(), "acks")
			require.NoError(t, os.WriteFile(bad, []byte(strings.Join(lines, "\n")+"\n"+tt.extra+"\n"), 0o644))
			v := runCLI(t, "verify", "--dir", dir, "--partition", "0,1", "--acks", bad)
			require.Equal(t, ExitFailure, v.code, "stdout:\n%s\nstderr:\n%s", v.stdout, v.stderr)
			require.Contains(t, v.stdout, tt.want)
		})
	}
}

func u[T ~uint16 | ~uint64](v T) string { return strconv.FormatUint(uint64(v), 10) }

// TestBenchRefusesAnotherPartitionCount: issue 20 item 1's flow defect.
// bench --partitions 4 then --partitions 2 on one store moved workspaces
// (WSID 3 from partition 2 to 0) and gave them numbers they already had
// (acknowledged twice). The second bench is now refused with one line,
// before any command; the same count still runs.
func TestBenchRefusesAnotherPartitionCount(t *testing.T) {
	dir := t.TempDir()
	acks := filepath.Join(dir, "acks.log")
	bench := func(parts string, extra ...string) result {
		return runCLI(t, append([]string{"bench", "--dir", dir, "--no-sync", "--duration", "200ms", "--partitions", parts, "--workspaces", "8",
			"--concurrency", "2", "--mode", "trust2", "--ack-log", acks}, extra...)...)
	}
	r := bench("4")
	require.Equal(t, ExitOK, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	before, err := plogcheck.ReadAckLog(acks)
	require.NoError(t, err)

	r = bench("2")
	require.Equal(t, ExitFailure, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	line := requireOneLine(t, r)
	assert.Contains(t, line, "app 1 was run with 4 partitions, not 2")
	assert.Contains(t, line, "use the same --partitions")
	after, err := plogcheck.ReadAckLog(acks)
	require.NoError(t, err)
	assert.Equal(t, len(before.Acks), len(after.Acks), "no command ran")

	r = bench("4")
	require.Equal(t, ExitOK, r.code, "the same count runs: stderr %q", r.stderr)
	v := runCLI(t, "verify", "--dir", dir, "--partition", "0,1,2,3", "--acks", acks)
	require.Equal(t, ExitOK, v.code, "stdout:\n%s\nstderr:\n%s", v.stdout, v.stderr)
	require.Contains(t, v.stdout, "OK, 0 lost, 0 duplicates, 0 regressions")
}
