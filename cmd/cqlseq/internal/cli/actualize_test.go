package cli

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/plog/plogcheck/plogchecktest"
	"github.com/cqlseq/cqlseq/plog/voedger"
	"github.com/cqlseq/cqlseq/plog/voedger/voedgertest"
	"github.com/cqlseq/cqlseq/storage/boltdb"
)

// voedgerFiles writes the golden Voedger PLog rows to a bbolt file (the
// application's store) and returns it with the path of a sequence-rows
// file that does not exist yet. plant, if given, adds rows first.
func voedgerFiles(t *testing.T, plant func(*boltdb.Store)) (*voedgertest.Golden, string, string) {
	t.Helper()
	g, err := voedgertest.Load()
	require.NoError(t, err)
	dir := t.TempDir()
	app := filepath.Join(dir, "app.db")
	st, err := boltdb.Open(app, boltdb.Options{NoSync: true})
	require.NoError(t, err)
	require.NoError(t, g.PutPLog(context.Background(), st))
	if plant != nil {
		plant(st)
	}
	require.NoError(t, st.Close())
	return g, app, filepath.Join(dir, "vvm.db")
}

// TestActualizeVoedger runs the command on the golden data (its output is
// logged: go test -run TestActualizeVoedger -v ./cmd/cqlseq/internal/cli/)
// and checks its JSON against what the golden data implies: per partition
// the events and Voedger's next offset, per workspace Voedger's numbers,
// or the corrected record-ID numbers.
func TestActualizeVoedger(t *testing.T) {
	g, app, vvm := voedgerFiles(t, nil)
	jf := filepath.Join(t.TempDir(), "a.json")
	args := []string{"actualize", "--plog-format", "voedger", "--file", app, "--seq-file", vvm, "--app", "3", "--partition", "1,2"}
	r := runCLI(t, append(args, "--json", jf)...)
	require.Equal(t, ExitOK, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	t.Logf("cqlseq %s\n%s", strings.Join(args, " "), r.stdout)
	assert.Contains(t, r.stdout, "nothing written")
	_, err := os.Stat(vvm)
	require.ErrorIs(t, err, os.ErrNotExist, "without --write the sequence file is not even created")

	var out actualizeJSON
	b, err := os.ReadFile(jf)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &out))
	require.Len(t, out.Partitions, 2)
	// Voedger's phase-A offsets and numbers (corrected), from the golden rows.
	wantNext := map[uint16]uint64{}
	wantLast := map[[2]uint64]uint64{}
	for _, row := range g.ExpectedRows() {
		p, _, v := row.Bytes()
		switch len(p) {
		case 10:
			wantNext[binary.BigEndian.Uint16(p[8:])] = binary.BigEndian.Uint64(v)
		case 16:
			_, c, _ := row.Bytes()
			wantLast[[2]uint64{binary.BigEndian.Uint64(p[8:]), uint64(binary.BigEndian.Uint16(c))}] = binary.BigEndian.Uint64(v)
		}
	}
	nums := 0
	for _, p := range out.Partitions {
		var events uint64
		for _, e := range g.Events {
			if e.Partition == p.Partition {
				events++
			}
		}
		assert.Equal(t, events, p.Events, "partition %d", p.Partition)
		assert.Equal(t, wantNext[p.Partition], p.NextPLogOffset, "partition %d", p.Partition)
		for _, n := range p.Numbers {
			nums++
			k := [2]uint64{n.WSID, uint64(n.SeqID)}
			last, ok := wantLast[k]
			if !ok { // no row: a record-ID sequence of singletons only
				require.Equal(t, voedger.SeqIDRecordID, isequencer.SeqID(n.SeqID))
				assert.Less(t, n.Last, uint64(voedger.FirstUserRecordID))
				assert.Equal(t, uint64(voedger.FirstUserRecordID), n.Next)
				continue
			}
			assert.Equal(t, last, n.Last, "WSID %d SeqID %d", n.WSID, n.SeqID)
			assert.Equal(t, last+1, n.Next, "WSID %d SeqID %d", n.WSID, n.SeqID)
		}
	}
	assert.Equal(t, 2*len(g.Workspaces), nums, "both sequences of every workspace")

	// --write, then again: nothing left to read, the stored numbers stand.
	r = runCLI(t, append(args, "--write")...)
	require.Equal(t, ExitOK, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	assert.Contains(t, r.stdout, "written:")
	r = runCLI(t, args...)
	require.Equal(t, ExitOK, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	assert.Contains(t, r.stdout, "partition 1: stored next offset 18, 0 events read, next PLog offset 18")
	assert.Contains(t, r.stdout, "partition 2: stored next offset 4103, 0 events read, next PLog offset 4103")
}

func TestVerifyVoedger(t *testing.T) {
	g, app, _ := voedgerFiles(t, nil)
	r := runCLI(t, "verify", "--plog-format", "voedger", "--file", app, "--partition", "1,2")
	require.Equal(t, ExitOK, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	// Record IDs: argument trees and creates, and the records of the
	// events sys.Corrupted overwrote.
	lost := g.CorruptedRecords()
	for _, p := range g.Partitions() {
		var events, ids uint64
		var first, last uint64
		ws := map[uint64]bool{}
		for _, e := range g.Events {
			if e.Partition != p {
				continue
			}
			if events == 0 {
				first = e.Offset
			}
			events, last = events+1, e.Offset
			ws[e.Expect.WSID] = true
			ids += uint64(len(e.Expect.ArgumentIDs) + len(e.Expect.CreatedIDs))
			if e.Expect.QNameID == voedger.QNameIDSysCorrupted {
				ids += uint64(len(lost[e.Expect.WSID]))
			}
		}
		assert.Contains(t, r.stdout, fmt.Sprintf("partition %d: %d events (offsets %d..%d), %d workspaces, %d record IDs created: OK", p, events, first, last, len(ws), ids))
	}
}

// TestVerifyVoedgerFindsDuplicates plants a copy of partition 1's event 6
// (it creates record 200002 in its workspace, WLog offset 2) at offset 18.
func TestVerifyVoedgerFindsDuplicates(t *testing.T) {
	_, app, _ := voedgerFiles(t, func(st *boltdb.Store) {
		v, ok, err := st.Get(context.Background(), voedger.EventPKey(1, 6), voedger.EventCCols(6))
		require.NoError(t, err)
		require.True(t, ok)
		binary.BigEndian.PutUint64(v[5:], 18)
		require.NoError(t, st.Put(context.Background(), voedger.EventPKey(1, 18), voedger.EventCCols(18), v))
	})
	jf := filepath.Join(t.TempDir(), "v.json")
	r := runCLI(t, "verify", "--plog-format", "voedger", "--file", app, "--partition", "1", "--json", jf)
	require.Equal(t, ExitFailure, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	assert.Contains(t, r.stdout, "FAILED, 2 problems")
	assert.Contains(t, r.stdout, "record ID 200002 created at offset 6 again at offset 18")
	assert.Contains(t, r.stdout, "WLog offset 2 at offset 18 after WLog offset 7 at offset 15 (wlog-offset-back)")
	var out verifyVoedgerJSON
	b, err := os.ReadFile(jf)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &out))
	assert.False(t, out.OK)
	require.Len(t, out.Partitions, 1)
	assert.Len(t, out.Partitions[0].Problems, 2)
}

func TestActualizeUsage(t *testing.T) {
	r := runCLI(t, "actualize", "--plog-format", "nope", "--seq-keyspace", "x", "--partition", "1")
	require.Equal(t, ExitUsage, r.code)
	msg := requireOneLine(t, r)
	assert.Contains(t, msg, `--plog-format "nope"`)
	assert.Contains(t, msg, "--app: required")
	assert.Contains(t, msg, "--seq-keyspace needs --store cql")
	assert.Contains(t, msg, "give --dir or --file")
}

// TestActualizeCQLSeqFormat: the same command over cqlseq's own PLog.
func TestActualizeCQLSeqFormat(t *testing.T) {
	path := writePlanted(t, plogchecktest.Planted{
		Events:     []plog.Event{ev(1, 7, 5, 1), ev(2, 8, 1, 1), ev(3, 7, 6, 2)},
		StoredNext: 3, // event 3 is the tail
		Stored:     []isequencer.SeqValue{val(7, 1, 5), val(7, 2, 1), val(8, 1, 1), val(8, 2, 1)},
	})
	r := runCLI(t, "actualize", "--file", path, "--app", "1", "--partition", "0")
	require.Equal(t, ExitOK, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	assert.Contains(t, r.stdout, "partition 0: stored next offset 3, 1 event read, next PLog offset 4\n  WSID 7  SeqID 1  last 6  next 7\n  WSID 7  SeqID 2  last 2  next 3\n")
}

// TestActualizeEmptyTailSaysSo: a partition flushed up to its last event
// replays nothing, and the report says so instead of "offset reached 0".
func TestActualizeEmptyTailSaysSo(t *testing.T) {
	path := writePlanted(t, plogchecktest.Planted{
		Events:     []plog.Event{ev(1, 7, 5, 1), ev(2, 8, 1, 1)},
		StoredNext: 3,
		Stored:     []isequencer.SeqValue{val(7, 1, 5), val(7, 2, 1), val(8, 1, 1), val(8, 2, 1)},
	})
	r := runCLI(t, "actualize", "--file", path, "--app", "1", "--partition", "0")
	require.Equal(t, ExitOK, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	assert.Contains(t, r.stdout, "partition 0: stored next offset 3, 0 events read, next PLog offset 3\n")
	assert.Regexp(t, `partition 0: replayed nothing: the PLog has no event at or after offset 3 \([0-9.]+ s\)\n`, r.stdout)
	assert.NotContains(t, r.stdout, "offset reached 0")
}

// TestActualizeProgress: on a terminal, actualize shows the events read,
// their rate and the offset reached while it replays, prints the same
// figures at the end, and --json carries them.
func TestActualizeProgress(t *testing.T) {
	const n = 3*4096 + 10
	events := make([]plog.Event, 0, n)
	for off := range n {
		events = append(events, ev(isequencer.PLogOffset(off+1), isequencer.WSID(1+off%50), isequencer.Number(off/50+1), 1))
	}
	path := writePlanted(t, plogchecktest.Planted{Events: events})
	jf := filepath.Join(t.TempDir(), "a.json")
	r := runEnv(context.Background(), true, "actualize", "--file", path, "--app", "1", "--partition", "0", "--json", jf)
	require.Equal(t, ExitOK, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	assert.Contains(t, r.stderr, "actualize partition 0: 4,096 events, ", "the first progress report")
	assert.Contains(t, r.stderr, " events/s, offset 4096")
	assert.Regexp(t, `partition 0: replayed 12,298 events in [0-9.]+ s \([0-9,]+ events/s\), offset reached 12298\n`, r.stdout)

	var out actualizeJSON
	b, err := os.ReadFile(jf)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &out))
	require.Len(t, out.Partitions, 1)
	p := out.Partitions[0]
	assert.Equal(t, uint64(n), p.Events)
	assert.Equal(t, uint64(n), p.OffsetReached)
	assert.Positive(t, p.ReadSeconds)
	assert.Positive(t, p.EventsPerSecond)

	r = runCLI(t, "actualize", "--file", path, "--app", "1", "--partition", "0")
	require.Equal(t, ExitOK, r.code)
	assert.NotContains(t, r.stderr, "actualize partition", "no progress off a terminal")
}
