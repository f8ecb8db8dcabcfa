package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/mem"
	"github.com/cqlseq/cqlseq/vvmadapter"
)

// killRecorder stands in for the process's SIGKILL.
type killRecorder struct{ kills int }

func (k *killRecorder) kill() { k.kills++ }

func offsetRow(app isequencer.ClusterAppID, part isequencer.PartitionID, off uint64) storage.Row {
	return storage.Row{PKey: vvmadapter.PartKey(app, part), CCols: vvmadapter.PartCCols(vvmadapter.PLogOffsetCC), Value: vvmadapter.EncodeU64(off)}
}

func numberRow(app isequencer.ClusterAppID, ws isequencer.WSID, seq isequencer.SeqID, n uint64) storage.Row {
	return storage.Row{PKey: vvmadapter.WSKey(app, ws), CCols: vvmadapter.SeqCCols(seq), Value: vvmadapter.EncodeU64(n)}
}

// A number row passes; the offset row of the application's partition kills
// before it is written (and is then not written); another application's
// offset row and the partition's epoch row pass.
func TestKillPointOnlyBeforeTheOffsetWrite(t *testing.T) {
	ctx := context.Background()
	st := mem.New(mem.Options{})
	defer st.Close()
	var log bytes.Buffer
	var k killRecorder
	kp := newKillPoint(st, 7, 1, &log, k.kill)

	require.NoError(t, kp.PutBatch(ctx, []storage.Row{numberRow(7, 3, 1, 10), numberRow(7, 3, 2, 11)}))
	require.NoError(t, kp.Put(ctx, vvmadapter.WSKey(7, 5), vvmadapter.SeqCCols(1), vvmadapter.EncodeU64(4)))
	require.NoError(t, kp.PutBatch(ctx, []storage.Row{offsetRow(8, 1, 9)}), "another application's offset")
	require.NoError(t, kp.PutBatch(ctx, []storage.Row{{PKey: vvmadapter.PartKey(7, 1), CCols: vvmadapter.PartCCols(vvmadapter.EpochCC), Value: vvmadapter.EncodeU64(2)}}), "the epoch row")
	require.Zero(t, k.kills)
	require.Empty(t, log.String())
	v, ok, err := st.Get(ctx, vvmadapter.WSKey(7, 3), vvmadapter.SeqCCols(2))
	require.NoError(t, err)
	require.True(t, ok, "the numbers were written")
	require.Equal(t, vvmadapter.EncodeU64(11), v)

	err = kp.PutBatch(ctx, []storage.Row{offsetRow(7, 1, 42)})
	require.ErrorIs(t, err, errKilled)
	require.Equal(t, 1, k.kills)
	require.Equal(t, "killpoint: SIGKILL before the next-offset write of partition 1\n", log.String())
	_, ok, err = st.Get(ctx, vvmadapter.PartKey(7, 1), vvmadapter.PartCCols(vvmadapter.PLogOffsetCC))
	require.NoError(t, err)
	require.False(t, ok, "the offset is not written")

	// A batch that carries the offset among other rows, and a Put of it.
	require.ErrorIs(t, kp.PutBatch(ctx, []storage.Row{numberRow(7, 9, 1, 1), offsetRow(7, 4095, 1)}), errKilled)
	require.ErrorIs(t, kp.Put(ctx, vvmadapter.PartKey(7, 0), vvmadapter.PartCCols(vvmadapter.PLogOffsetCC), vvmadapter.EncodeU64(3)), errKilled)
	require.Equal(t, 3, k.kills)
	assert.Contains(t, log.String(), "partition 4095\n")
	assert.Equal(t, 3, strings.Count(log.String(), "killpoint: SIGKILL"))
}

// P = 0 never kills (and the flag's default does not wrap at all); a P
// between kills some offset writes and not others.
func TestKillPointProbability(t *testing.T) {
	ctx := context.Background()
	st := mem.New(mem.Options{})
	defer st.Close()
	var k killRecorder
	var log bytes.Buffer
	never := newKillPoint(st, 1, 0, &log, k.kill)
	for i := range 1000 {
		require.NoError(t, never.PutBatch(ctx, []storage.Row{offsetRow(1, 0, uint64(i+1))}))
	}
	require.Zero(t, k.kills)
	require.Same(t, storage.Storage(st), (&killPointFlags{}).wrap(st, 1, &log), "P = 0: the store itself")

	half := newKillPoint(st, 1, 0.5, &log, k.kill)
	draws := []float64{0.7, 0.2, 0.5, 0.49}
	half.rnd = func() float64 { d := draws[0]; draws = draws[1:]; return d }
	var got []bool
	for range 4 {
		got = append(got, half.PutBatch(ctx, []storage.Row{offsetRow(1, 0, 1)}) != nil)
	}
	require.Equal(t, []bool{false, true, false, true}, got)
	require.Equal(t, 2, k.kills)
}

// The wrapper keeps the store's capabilities (its callers take the same
// paths with it as without).
func TestKillPointPassesMultiApplierThrough(t *testing.T) {
	st := mem.New(mem.Options{})
	defer st.Close()
	kp := newKillPoint(st, 1, 1, &bytes.Buffer{}, func() {})
	_, ok := storage.AsMultiApplier(kp)
	require.True(t, ok)
	require.Same(t, storage.Storage(st), kp.Unwrap())
}

func TestKillPointFlagIsHiddenAndValidated(t *testing.T) {
	r := runCLI(t, "bench", "--help")
	require.Equal(t, ExitOK, r.code)
	assert.NotContains(t, r.stdout, "kill-before-offset-write")
	for _, p := range []string{"1.5", "-0.1", "NaN"} {
		r := runCLI(t, "bench", "--store", "bbolt", "--dir", t.TempDir(), "--kill-before-offset-write", p)
		require.Equal(t, ExitUsage, r.code, "P %s: %s", p, r.stderr)
		assert.Contains(t, r.stderr, "--kill-before-offset-write")
	}
}
