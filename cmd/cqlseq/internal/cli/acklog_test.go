package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage/boltdb"
	"github.com/cqlseq/cqlseq/storage/mem"
)

func TestAckLineFormatIsPinned(t *testing.T) {
	b := appendAck(nil, 3, 1234, 77, []isequencer.SeqID{1, 2}, []isequencer.Number{5, 9})
	require.Equal(t, "3 1234 77 1:5,2:9\n", string(b))
	a, err := parseAck(strings.TrimSuffix(string(b), "\n"))
	require.NoError(t, err)
	require.Equal(t, ackRecord{part: 3, off: 1234, ws: 77, numbers: []plog.SeqNumber{{SeqID: 1, Number: 5}, {SeqID: 2, Number: 9}}}, a)
}

func TestAckLogToleratesOnlyATornLastLine(t *testing.T) {
	f, err := parseAckLog("x", []byte("# header\n0 1 7 1:5,2:1\n0 2 7 1:6,2:2\n0 3 7 1:"))
	require.NoError(t, err)
	require.Len(t, f.acks, 2)
	require.Equal(t, len("0 3 7 1:"), f.torn)
	_, err = parseAckLog("x", []byte("0 1 7 1:5,2:1\n0 2 7 1:\n0 3 7 1:7,2:3\n"))
	require.ErrorContains(t, err, "line 2")
}

func TestAckLogGroupsFsyncsAndCutsATornLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acks")
	require.NoError(t, os.WriteFile(path, []byte("0 1 7 1:5,2:1\n0 2 7 1:6"), 0o644))
	l, cut, err := openAckLog(path, "test")
	require.NoError(t, err)
	require.Equal(t, int64(len("0 2 7 1:6")), cut)
	const writers, each = 16, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				off := isequencer.PLogOffset(10 + w*each + i)
				assert.NoError(t, l.Ack(1, off, 9, commandSeqs, []isequencer.Number{isequencer.Number(off), 1}))
			}
		}()
	}
	wg.Wait()
	require.NoError(t, l.Close())
	require.Less(t, l.syncs, uint64(writers*each), "fsyncs are shared by concurrent acks")
	f, err := readAckLog(path)
	require.NoError(t, err)
	require.Zero(t, f.torn)
	require.Len(t, f.acks, 1+writers*each, "the torn line was cut; every ack is a whole line")
}

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
	first0, err := readAckLog(acks)
	require.NoError(t, err)
	a0 := first0.acks[0]
	require.Equal(t, seqRecords, a0.numbers[0].SeqID)
	rec := plog.RecordID(a0.numbers[0].Number)
	db, err := boltdb.Open(filepath.Join(dir, "cqlseq.db"), boltdb.Options{})
	require.NoError(t, err)
	deleted, err := db.CompareAndDelete(context.Background(), plog.RecordPKey(a0.ws, rec), plog.RecordCCols(rec), plog.RecordValue(a0.off))
	require.NoError(t, err)
	require.NoError(t, db.Close())
	require.True(t, deleted)
	v = runCLI(t, "verify", "--dir", dir, "--partition", "0,1", "--acks", acks)
	require.Equal(t, ExitFailure, v.code, "stdout:\n%s\nstderr:\n%s", v.stdout, v.stderr)
	require.Contains(t, v.stdout, "FAILED, 0 lost, 0 duplicates, 0 regressions, 1 lost records")
	require.Contains(t, v.stdout, fmt.Sprintf("record %d of WSID %d is not stored", rec, a0.ws))
	db, err = boltdb.Open(filepath.Join(dir, "cqlseq.db"), boltdb.Options{})
	require.NoError(t, err)
	require.NoError(t, db.Put(context.Background(), plog.RecordPKey(a0.ws, rec), plog.RecordCCols(rec), plog.RecordValue(a0.off)))
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
	first, err := parseAck(data[0])
	require.NoError(t, err)
	last, err := parseAck(data[len(data)-1])
	require.NoError(t, err)

	for _, tt := range []struct {
		name  string
		extra string // a line appended to the good log
		want  string
	}{
		{"lost", "0 999999 999 1:1,2:1", "1 lost, 0 duplicates, 0 regressions"},
		{"other numbers", strings.Join([]string{u(first.part), u(first.off), u(first.ws), "1:999999,2:999999"}, " "), "1 lost"},
		{"duplicate", strings.Join([]string{u(first.part), u(first.off + 1000000), u(first.ws), "1:" + u(first.numbers[0].Number) + ",2:999999"}, " "), "1 duplicates"},
		{"regression", strings.Join([]string{u(last.part), u(last.off + 1000000), u(last.ws), "1:" + u(last.numbers[0].Number-1) + ",2:999999"}, " "), "1 regressions"},
		// Issue 20 item 2: the same offset with the same numbers again.
		{"offset acknowledged twice", data[0], "0 lost, 1 duplicates, 0 regressions, 0 lost records"},
		// Issue 20 item 1: a number of the first ack's workspace
		// acknowledged again in the other partition.
		{"duplicate in another partition", strings.Join([]string{u(1 - first.part), u(first.off + 1000000), u(first.ws), "1:999999,2:" + u(first.numbers[1].Number)}, " "), "1 lost, 1 duplicates"},
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

// TestCheckAcksFindsEveryDuplicateAndLostRecord plants, in a PLog whose
// events are all stored as acknowledged, the defects of issue 20 items 1,
// 2 and 7: one number of (WSID 3, SeqID 1) acknowledged in two partitions,
// one offset acknowledged twice with the same numbers, and record rows
// lost or overwritten by another event's.
func TestCheckAcksFindsEveryDuplicateAndLostRecord(t *testing.T) {
	ctx := context.Background()
	st := mem.New(mem.Options{})
	defer st.Close()
	write := func(part isequencer.PartitionID, off isequencer.PLogOffset, ws isequencer.WSID, rec, wlog isequencer.Number) ackRecord {
		w, err := plog.NewWriter(plog.WriterOptions{Storage: st, Partition: part, Mode: plog.ModeTrust2})
		require.NoError(t, err)
		nums := []plog.SeqNumber{{SeqID: seqRecords, Number: rec}, {SeqID: seqWLog, Number: wlog}}
		require.NoError(t, w.Write(ctx, &plog.Event{Offset: off, WSID: ws, WSKind: wsKind, Numbers: nums, Records: []plog.RecordID{plog.RecordID(rec)}}))
		return ackRecord{part: part, off: off, ws: ws, numbers: nums}
	}
	var clean []ackRecord
	for off := isequencer.PLogOffset(1); off <= 3; off++ {
		clean = append(clean, write(0, off, 3, isequencer.Number(off), isequencer.Number(off)))
		clean = append(clean, write(2, off, 5, isequencer.Number(off), isequencer.Number(off)))
	}
	check := func(acks []ackRecord) *ackResult {
		t.Helper()
		for i := range acks {
			acks[i].line = i + 1
		}
		r, err := checkAcks(ctx, st, &ackFile{acks: acks}, []isequencer.SeqID{seqRecords})
		require.NoError(t, err)
		return r
	}
	r := check(slices.Clone(clean))
	require.Zero(t, r.Problems, "%v", r.Listed)
	assert.Equal(t, 6, r.Records)
	assert.Equal(t, 2, r.Partitions)

	// Item 1: WSID 3 moved to partition 2 and was given number 2 of SeqID
	// 2 again (its event and record are stored as acknowledged).
	moved := write(2, 4, 3, 9, 2)
	r = check(append(slices.Clone(clean), moved))
	assert.Equal(t, map[string]uint64{findDuplicate: 1}, r.ByKind, "%v", r.Listed)
	assert.Contains(t, r.Listed[0].Text, "WSID 3 SeqID 2: number 2 acknowledged at partition 0 offset 2 (line 3) and at partition 2 offset 4 (line 7)")

	// Item 2: one offset acknowledged twice, with the same numbers.
	r = check(append(slices.Clone(clean), clean[2]))
	assert.Equal(t, map[string]uint64{findDuplicate: 1}, r.ByKind, "%v", r.Listed)
	assert.Contains(t, r.Listed[0].Text, "partition 0 offset 2: acknowledged twice (ack log lines 3 and 7)")

	// Item 7: record 3 of WSID 5 lost, record 1 of WSID 3 overwritten by
	// an event at another offset.
	pk, cc := plog.RecordPKey(5, 3), plog.RecordCCols(3)
	ok, err := st.CompareAndDelete(ctx, pk, cc, plog.RecordValue(3))
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, st.Put(ctx, plog.RecordPKey(3, 1), plog.RecordCCols(1), plog.RecordValue(77)))
	r = check(slices.Clone(clean))
	assert.Equal(t, map[string]uint64{findLostRecord: 2}, r.ByKind, "%v", r.Listed)
	var texts []string
	for _, f := range r.Listed {
		texts = append(texts, f.Text)
	}
	assert.Contains(t, texts, "partition 2 offset 3 (ack log line 6): record 3 of WSID 5 is not stored")
	assert.Contains(t, texts, "partition 0 offset 1 (ack log line 1): record 1 of WSID 3 names offset 77")
}

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
	before, err := readAckLog(acks)
	require.NoError(t, err)

	r = bench("2")
	require.Equal(t, ExitFailure, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	line := requireOneLine(t, r)
	assert.Contains(t, line, "app 1 was run with 4 partitions, not 2")
	assert.Contains(t, line, "use the same --partitions")
	after, err := readAckLog(acks)
	require.NoError(t, err)
	assert.Equal(t, len(before.acks), len(after.acks), "no command ran")

	r = bench("4")
	require.Equal(t, ExitOK, r.code, "the same count runs: stderr %q", r.stderr)
	v := runCLI(t, "verify", "--dir", dir, "--partition", "0,1,2,3", "--acks", acks)
	require.Equal(t, ExitOK, v.code, "stdout:\n%s\nstderr:\n%s", v.stdout, v.stderr)
	require.Contains(t, v.stdout, "OK, 0 lost, 0 duplicates, 0 regressions")
}
