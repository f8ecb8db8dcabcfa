package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/plog/plogcheck"
	"github.com/cqlseq/cqlseq/plog/plogcheck/plogchecktest"
	"github.com/cqlseq/cqlseq/storage/boltdb"
	"github.com/cqlseq/cqlseq/storage/mem"
)

// writePlanted writes p to a new bbolt file and returns its path.
func writePlanted(t *testing.T, p plogchecktest.Planted) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "planted.db")
	st, err := boltdb.Open(path, boltdb.Options{NoSync: true})
	require.NoError(t, err)
	defer func() { require.NoError(t, st.Close()) }()
	p.Write(t, st)
	return path
}

var (
	ev  = plogchecktest.Event // WSKind 1: wsKind
	val = plogchecktest.Value
)

func TestVerifyPassesAConsistentLog(t *testing.T) {
	path := writePlanted(t, plogchecktest.Consistent())
	r := runCLI(t, "verify", "--file", path)
	require.Equal(t, ExitOK, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	assert.Contains(t, r.stdout, "4 events (last offset 4), stored next offset 4 (1 event in the unflushed tail)")
	assert.Contains(t, r.stdout, "2 workspaces, 4 (WSID, SeqID) sequences, 8 numbers checked: OK")
}

func TestVerifyCatchesDuplicate(t *testing.T) {
	path := writePlanted(t, plogchecktest.Duplicate())
	jf := filepath.Join(t.TempDir(), "v.json")
	r := runCLI(t, "verify", "--file", path, "--json", jf)
	require.Equal(t, ExitFailure, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	line := requireOneLine(t, r)
	assert.Contains(t, line, "verification failed: 1 problems")
	assert.Contains(t, r.stdout, "FAILED, 1 problems")
	assert.Contains(t, r.stdout, "partition 0 duplicate: WSID 7 SeqID 1: number 5 at offset 2 was already issued at offset 1")
	assert.NotContains(t, r.stdout, "regression")

	var out verifyJSON
	b, err := os.ReadFile(jf)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &out))
	assert.False(t, out.OK)
	require.Len(t, out.Partitions, 1)
	assert.Equal(t, map[plogcheck.Kind]uint64{plogcheck.Duplicate: 1}, out.Partitions[0].ByKind)
}

func TestVerifyCatchesNumberGoingBack(t *testing.T) {
	path := writePlanted(t, plogchecktest.Backwards())
	r := runCLI(t, "verify", "--file", path)
	require.Equal(t, ExitFailure, r.code, "stdout:\n%s", r.stdout)
	assert.Contains(t, r.stdout, "backwards: WSID 7 SeqID 1: number 6 at offset 3 is below 9 at offset 2")
}

func TestVerifyCatchesRegression(t *testing.T) {
	path := writePlanted(t, plogchecktest.Regression())
	r := runCLI(t, "verify", "--file", path)
	require.Equal(t, ExitFailure, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	requireOneLine(t, r)
	assert.Contains(t, r.stdout, "regression: WSID 7 SeqID 2: stored number 3 is below 4 at offset 2")
	assert.Equal(t, 1, strings.Count(r.stdout, "regression:"), r.stdout)
}

func TestVerifyCatchesMissingStoredNumber(t *testing.T) {
	path := writePlanted(t, plogchecktest.MissingStored())
	r := runCLI(t, "verify", "--file", path)
	require.Equal(t, ExitFailure, r.code, "stdout:\n%s", r.stdout)
	assert.Contains(t, r.stdout, "regression: WSID 7 SeqID 1: stored number 0 is below 5 at offset 1")
}

func TestVerifyCatchesOffsetBeyondLog(t *testing.T) {
	path := writePlanted(t, plogchecktest.OffsetBeyondLog())
	r := runCLI(t, "verify", "--file", path)
	require.Equal(t, ExitFailure, r.code, "stdout:\n%s", r.stdout)
	assert.Contains(t, r.stdout, "offset: stored next PLog offset 4 is beyond the log's end (last event at offset 1)")
}

func TestVerifyListsAtMostMaxListed(t *testing.T) {
	var events []plog.Event
	for i := range 2*plogcheck.MaxListed + 1 {
		events = append(events, ev(isequencer.PLogOffset(i+1), 7, 5))
	}
	path := writePlanted(t, plogchecktest.Planted{Events: events})
	r := runCLI(t, "verify", "--file", path)
	require.Equal(t, ExitFailure, r.code)
	assert.Equal(t, plogcheck.MaxListed, strings.Count(r.stdout, "duplicate:"))
	assert.Contains(t, r.stdout, "partition 0: 20 more not listed")
}

func TestInspectPlanted(t *testing.T) {
	e := ev(1, 7, 5, 1)
	e.Records, e.WLogOffset, e.Payload = []plog.RecordID{5}, 1, []byte("abc")
	path := writePlanted(t, plogchecktest.Planted{
		Events:     []plog.Event{e, ev(2, 7, 6, 2)},
		StoredNext: 2,
		Stored:     []isequencer.SeqValue{val(7, 1, 5), val(7, 2, 1)},
	})
	r := runCLI(t, "inspect", "--file", path, "--ws", "7,8")
	require.Equal(t, ExitOK, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	for _, want := range []string{
		"next PLog offset  2 (stored",
		"epoch             1", // the planted numbers' owner's
		"workspace 7       SeqID 1 = 5, SeqID 2 = 1",
		"workspace 8       no numbers stored",
		"offset 1: WSID 7 kind 1 wlog 1 numbers [1:5 2:1] records [5] payload 3 bytes",
		"offset 2: WSID 7 kind 1 numbers [1:6 2:2] payload 0 bytes",
		"(the log ends after offset 2)",
	} {
		assert.Contains(t, r.stdout, want)
	}
	unowned := writePlanted(t, plogchecktest.Planted{Events: []plog.Event{ev(1, 7, 6, 2)}})
	r = runCLI(t, "inspect", "--file", unowned, "--ws", "7")
	require.Equal(t, ExitOK, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	assert.Contains(t, r.stdout, "epoch             none stored", "a partition no owner ever took")
	r = runCLI(t, "inspect", "--file", path, "--from", "2", "--to", "2")
	require.Equal(t, ExitOK, r.code)
	assert.NotContains(t, r.stdout, "offset 1:")
	assert.Contains(t, r.stdout, "offset 2:")
	r = runCLI(t, "inspect", "--file", path, "--from", "9")
	require.Equal(t, ExitOK, r.code)
	assert.Contains(t, r.stdout, "none: the log has no event at offset 9")
}

func TestDemoVerifyFailsOnPlantedDuplicate(t *testing.T) {
	ctx := context.Background()
	st := mem.New(mem.Options{})
	defer st.Close()
	for part := range isequencer.PartitionID(2) {
		w, err := plog.NewWriter(plog.WriterOptions{Storage: st, Partition: part, Mode: plog.ModeTrust2})
		require.NoError(t, err)
		for i := range 2 {
			e := ev(isequencer.PLogOffset(i+1), isequencer.WSID(part+1), 3) // partition 1 repeats number 3 too
			require.NoError(t, w.Write(ctx, &e))
		}
	}
	var out syncBuffer
	f := &demoFlags{load: loadFlags{app: 1, partitions: 2}}
	err := demoVerify(ctx, &env{stdout: &out, stderr: &out}, st, f)
	require.ErrorIs(t, err, errVerifyFailed)
	assert.Contains(t, err.Error(), "2 problems")
	assert.Contains(t, out.String(), "5. verify   4 PLog events")
	assert.Contains(t, out.String(), "FAILED")
	assert.Contains(t, out.String(), "partition 1 duplicate: WSID 2 SeqID 1: number 3 at offset 2 was already issued at offset 1")
}
