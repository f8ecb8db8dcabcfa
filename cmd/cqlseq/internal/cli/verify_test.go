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
	"github.com/cqlseq/cqlseq/storage/boltdb"
	"github.com/cqlseq/cqlseq/storage/mem"
	"github.com/cqlseq/cqlseq/vvmadapter"
)

// planted describes a PLog and stored state written straight to a bbolt
// file, bypassing the sequencer.
type planted struct {
	events     []plog.Event // in partition 0 of app 1
	storedNext isequencer.PLogOffset
	stored     []isequencer.SeqValue
}

func (p planted) write(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "planted.db")
	st, err := boltdb.Open(path, boltdb.Options{NoSync: true})
	require.NoError(t, err)
	defer func() { require.NoError(t, st.Close()) }()
	ctx := context.Background()
	w, err := plog.NewWriter(plog.WriterOptions{Storage: st, Mode: plog.ModeTrust2})
	require.NoError(t, err)
	for i := range p.events {
		require.NoError(t, w.Write(ctx, &p.events[i]))
	}
	ad := vvmadapter.New(st, 1)
	require.NoError(t, ad.PutNumbers(ctx, p.stored))
	if p.storedNext > 0 {
		require.NoError(t, ad.PutPLogOffset(ctx, 0, p.storedNext))
	}
	return path
}

func ev(off isequencer.PLogOffset, ws isequencer.WSID, nums ...isequencer.Number) plog.Event {
	e := plog.Event{Offset: off, WSID: ws, WSKind: wsKind}
	for i, n := range nums {
		e.Numbers = append(e.Numbers, plog.SeqNumber{SeqID: isequencer.SeqID(i + 1), Number: n})
	}
	return e
}

func val(ws isequencer.WSID, id isequencer.SeqID, n isequencer.Number) isequencer.SeqValue {
	return isequencer.SeqValue{Key: isequencer.NumberKey{WSID: ws, SeqID: id}, Value: n}
}

func TestVerifyPassesAConsistentLog(t *testing.T) {
	path := planted{
		events:     []plog.Event{ev(1, 7, 5, 1), ev(2, 8, 1, 1), ev(3, 7, 6, 2), ev(4, 7, 9, 3)},
		storedNext: 4, // event 4 is the unflushed tail: its numbers are above the stored ones
		stored:     []isequencer.SeqValue{val(7, 1, 6), val(7, 2, 2), val(8, 1, 1), val(8, 2, 1)},
	}.write(t)
	r := runCLI(t, "verify", "--file", path)
	require.Equal(t, ExitOK, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	assert.Contains(t, r.stdout, "4 events (last offset 4), stored next offset 4 (1 event in the unflushed tail)")
	assert.Contains(t, r.stdout, "2 workspaces, 4 (WSID, SeqID) sequences, 8 numbers checked: OK")
}

func TestVerifyCatchesDuplicate(t *testing.T) {
	path := planted{
		// WSID 7 SeqID 1 gets number 5 twice: offsets 1 and 2.
		events:     []plog.Event{ev(1, 7, 5), ev(2, 7, 5), ev(3, 7, 6)},
		storedNext: 4,
		stored:     []isequencer.SeqValue{val(7, 1, 6)},
	}.write(t)
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
	assert.Equal(t, map[string]uint64{findDuplicate: 1}, out.Partitions[0].ByKind)
}

func TestVerifyCatchesNumberGoingBack(t *testing.T) {
	path := planted{
		events:     []plog.Event{ev(1, 7, 5), ev(2, 7, 9), ev(3, 7, 6)},
		storedNext: 4,
		stored:     []isequencer.SeqValue{val(7, 1, 9)},
	}.write(t)
	r := runCLI(t, "verify", "--file", path)
	require.Equal(t, ExitFailure, r.code, "stdout:\n%s", r.stdout)
	assert.Contains(t, r.stdout, "backwards: WSID 7 SeqID 1: number 6 at offset 3 is below 9 at offset 2")
}

func TestVerifyCatchesRegression(t *testing.T) {
	path := planted{
		// The stored number of WSID 7 SeqID 2 (3) is below the 4 the
		// flushed event at offset 2 carries; SeqID 1's is fine. The
		// event at 3 is the tail: its 12 is not a regression.
		events:     []plog.Event{ev(1, 7, 5, 1), ev(2, 7, 9, 4), ev(3, 7, 12, 5)},
		storedNext: 3,
		stored:     []isequencer.SeqValue{val(7, 1, 9), val(7, 2, 3)},
	}.write(t)
	r := runCLI(t, "verify", "--file", path)
	require.Equal(t, ExitFailure, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	requireOneLine(t, r)
	assert.Contains(t, r.stdout, "regression: WSID 7 SeqID 2: stored number 3 is below 4 at offset 2")
	assert.Equal(t, 1, strings.Count(r.stdout, "regression:"), r.stdout)
}

func TestVerifyCatchesMissingStoredNumber(t *testing.T) {
	path := planted{events: []plog.Event{ev(1, 7, 5)}, storedNext: 2}.write(t)
	r := runCLI(t, "verify", "--file", path)
	require.Equal(t, ExitFailure, r.code, "stdout:\n%s", r.stdout)
	assert.Contains(t, r.stdout, "regression: WSID 7 SeqID 1: stored number 0 is below 5 at offset 1")
}

func TestVerifyCatchesOffsetBeyondLog(t *testing.T) {
	// Offset 2 is missing: the reader stops at 1, and the stored next
	// offset 4 claims events it cannot see.
	path := planted{events: []plog.Event{ev(1, 7, 5), ev(3, 7, 6)}, storedNext: 4, stored: []isequencer.SeqValue{val(7, 1, 6)}}.write(t)
	r := runCLI(t, "verify", "--file", path)
	require.Equal(t, ExitFailure, r.code, "stdout:\n%s", r.stdout)
	assert.Contains(t, r.stdout, "offset: stored next PLog offset 4 is beyond the log's end (last event at offset 1)")
}

func TestVerifyListsAtMostMaxListed(t *testing.T) {
	var events []plog.Event
	for i := range 2*maxListed + 1 {
		events = append(events, ev(isequencer.PLogOffset(i+1), 7, 5))
	}
	path := planted{events: events}.write(t)
	r := runCLI(t, "verify", "--file", path)
	require.Equal(t, ExitFailure, r.code)
	assert.Equal(t, maxListed, strings.Count(r.stdout, "duplicate:"))
	assert.Contains(t, r.stdout, "partition 0: 20 more not listed")
}

func TestInspectPlanted(t *testing.T) {
	e := ev(1, 7, 5, 1)
	e.Records, e.WLogOffset, e.Payload = []plog.RecordID{5}, 1, []byte("abc")
	path := planted{
		events:     []plog.Event{e, ev(2, 7, 6, 2)},
		storedNext: 2,
		stored:     []isequencer.SeqValue{val(7, 1, 5), val(7, 2, 1)},
	}.write(t)
	r := runCLI(t, "inspect", "--file", path, "--ws", "7,8")
	require.Equal(t, ExitOK, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	for _, want := range []string{
		"next PLog offset  2 (stored",
		"epoch             none stored",
		"workspace 7       SeqID 1 = 5, SeqID 2 = 1",
		"workspace 8       no numbers stored",
		"offset 1: WSID 7 kind 1 wlog 1 numbers [1:5 2:1] records [5] payload 3 bytes",
		"offset 2: WSID 7 kind 1 numbers [1:6 2:2] payload 0 bytes",
		"(the log ends after offset 2)",
	} {
		assert.Contains(t, r.stdout, want)
	}
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
