package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/apppart"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/plog/plogcheck"
	"github.com/cqlseq/cqlseq/storage/mem"
)

// TestAdvanceAfterARestoredFile: bench, a copy of the file (the backup),
// bench again, the copy back (the restore), advance, bench again. Nothing
// acknowledged after the restore repeats or goes below what was
// acknowledged before it (plogcheck.Restored); verify finds the file
// sound, with the acks of the first and last runs in it. Without advance
// the last run repeats what the restore lost.
func TestAdvanceAfterARestoredFile(t *testing.T) {
	for _, mode := range []string{"trust0", "fenced"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			file, backup := filepath.Join(dir, "cqlseq.db"), filepath.Join(dir, "backup.db")
			bench := func(ackLog string) {
				r := runCLI(t, "bench", "--file", file, "--no-sync", "--duration", "300ms", "--partitions", "2", "--workspaces", "6",
					"--mode", mode, "--ack-log", filepath.Join(dir, ackLog))
				require.Equal(t, ExitOK, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
			}
			bench("before.log")
			copyFileTo(t, file, backup)
			bench("lost.log")
			copyFileTo(t, backup, file)

			jf := filepath.Join(dir, "advance.json")
			r := runCLI(t, "advance", "--file", file, "--app", "1", "--partition", "0,1", "--mode", mode,
				"--numbers", "1000000", "--offsets", "1000000", "--quiet", "0", "--json", jf)
			require.Equal(t, ExitOK, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
			t.Logf("%s", r.stdout)
			var out advanceJSON
			b, err := os.ReadFile(jf)
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(b, &out))
			require.Len(t, out.Partitions, 2)
			for _, p := range out.Partitions {
				assert.Equal(t, p.Gap+1_000_001, p.NextPLogOffset, "partition %d", p.Partition)
				assert.Len(t, p.Floors, 2, "partition %d: both sequences", p.Partition)
				assert.Contains(t, r.stdout, "gap marker at")
			}

			bench("after.log")
			lost, after := readAcks(t, dir, "lost.log"), readAcks(t, dir, "after.log")
			require.NotEmpty(t, lost)
			require.NotEmpty(t, after)
			f := plogcheck.Restored(lost, after)
			assert.True(t, f.OK(), "acknowledged again after the restore: %+v", f.Listed)

			joined := filepath.Join(dir, "kept.log")
			require.NoError(t, os.WriteFile(joined, append(readFile(t, dir, "before.log"), readFile(t, dir, "after.log")...), 0o644))
			v := runCLI(t, "verify", "--file", file, "--partition", "0,1", "--acks", joined)
			require.Equal(t, ExitOK, v.code, "stdout:\n%s\nstderr:\n%s", v.stdout, v.stderr)
			// advance's marker, and the void marker with which the next
			// owner sealed the block it replayed to (advance writes its
			// marker with a versioned put: apppart's sealZone).
			assert.Contains(t, v.stdout, "2 gap markers among them")
			in := runCLI(t, "inspect", "--file", file, "--partition", "0", "--from", "1", "--limit", "1000000")
			require.Equal(t, ExitOK, in.code, "stdout:\n%s\nstderr:\n%s", in.stdout, in.stderr)
			assert.Contains(t, in.stdout, "gap marker: offsets")
			assert.Contains(t, in.stdout, "void marker: offsets")

			// The same restore without advance: the run after it hands out
			// again what the restore lost.
			copyFileTo(t, backup, file)
			bench("unadvanced.log")
			f = plogcheck.Restored(lost, readAcks(t, dir, "unadvanced.log"))
			assert.False(t, f.OK(), "without advance numbers repeat")
		})
	}
}

func copyFileTo(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, b, 0o644))
}

func readFile(t *testing.T, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	require.NoError(t, err)
	return b
}

func readAcks(t *testing.T, dir, name string) []plogcheck.Ack {
	t.Helper()
	l, err := plogcheck.ReadAckLog(filepath.Join(dir, name))
	require.NoError(t, err)
	return l.Acks
}

func TestAdvanceUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--file", "x.db", "--partition", "0", "--mode", "trust0", "--numbers", "1", "--offsets", "1"}, "--app: required"},
		{[]string{"--file", "x.db", "--app", "1", "--partition", "0", "--numbers", "1", "--offsets", "1"}, `--mode ""`},
		{[]string{"--file", "x.db", "--app", "1", "--partition", "0", "--mode", "trust0", "--offsets", "1"}, "--numbers: required"},
		{[]string{"--file", "x.db", "--app", "1", "--partition", "0", "--mode", "trust0", "--numbers", "1"}, "--offsets 0"},
		{[]string{"--file", "x.db", "--app", "1", "--partition", "0", "--mode", "trust0", "--numbers", "1", "--offsets", "1", "--seq", "1"}, `--seq "1"`},
		{[]string{"--store", "cql", "--hosts", "127.0.0.1", "--app", "1", "--partition", "0", "--mode", "fenced", "--numbers", "1", "--offsets", "1", "--quiet", "100ms"}, "at least 1s on cql"},
	} {
		r := runCLI(t, append([]string{"advance"}, tc.args...)...)
		assert.Equal(t, ExitUsage, r.code, "%v: stdout:\n%s\nstderr:\n%s", tc.args, r.stdout, r.stderr)
		assert.Contains(t, r.stderr, tc.want, "%v", tc.args)
	}
}

// TestAdvanceWatchSeesAnOwnerAtWork: an owner running commands moves the
// PLog's end within --quiet: watch refuses, naming the partition; with
// the owner closed it lets advance go on.
func TestAdvanceWatchSeesAnOwnerAtWork(t *testing.T) {
	st := mem.New(mem.Options{})
	defer st.Close()
	ctx := context.Background()
	p, err := apppart.Open(ctx, apppart.OpenOptions{Storage: st, App: 1, Partition: 1, Mode: plog.ModeFenced, SeqTypes: seqTypes(),
		RecordSeqs: []isequencer.SeqID{seqRecords}, WLogOffsetSeq: seqWLog, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			_, _ = p.Do(ctx, apppart.Command{WSKind: wsKind, WSID: 2, Seqs: commandSeqs})
		}
	})
	var out bytes.Buffer
	f := &advanceFlags{app: 1, partitions: []uint{0, 1}, quiet: 300 * time.Millisecond}
	err = f.watch(ctx, &env{stdout: &out}, st)
	close(stop)
	wg.Wait()
	require.NoError(t, p.Close())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "an owner is at work on partition 1 (")
	assert.NotContains(t, err.Error(), "partition 0 (", "partition 0 had no owner")
	assert.Contains(t, err.Error(), "nothing written")

	out.Reset()
	require.NoError(t, f.watch(ctx, &env{stdout: &out}, st), "no owner at work")
	assert.True(t, strings.HasPrefix(out.String(), "watching 2 partitions for 300ms"), out.String())
}
