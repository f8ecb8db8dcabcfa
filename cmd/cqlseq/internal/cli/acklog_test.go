package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
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
