package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/apppart/appparttest"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage/boltdb"
	"github.com/cqlseq/cqlseq/vvmadapter"
)

const ownerPart isequencer.PartitionID = 3

// TestActualizeWriteAfterAnOwnerCrashedBetweenNumbersAndOffset is issue
// 36's first finding, through the cqlseq binary on a bbolt file, in every
// mode: an owner takes 6 commands in one workspace and crashes between
// its numbers write and its first next-offset write (the first command's
// numbers stored, no offset); `cqlseq actualize --write` then replays the
// 6 events and stores the numbers and next offset 7. The next owner must
// hand out numbers above the 6 commands'. At c6e8a0d the tool wrote
// without versions: its numbers never replaced the owner's versioned
// cells while its offset landed where none was, and the next owner handed
// out the second command's numbers again (trust1, trust2: WLog offset 2),
// or stopped on the record ID taken (trust0).
func TestActualizeWriteAfterAnOwnerCrashedBetweenNumbersAndOffset(t *testing.T) {
	for _, mode := range []plog.Mode{plog.ModeTrust0, plog.ModeTrust1, plog.ModeTrust2, plog.ModeFenced} {
		t.Run(mode.String(), func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "owner.db")
			bolt, err := boltdb.Open(file, boltdb.Options{})
			require.NoError(t, err)
			last := appparttest.CrashBetweenNumbersAndOffset(t, bolt, ownerPart, mode, 6)
			require.Equal(t, isequencer.Number(6), last.Numbers[0], "the 6th WLog offset")
			require.NoError(t, bolt.Close())

			out, err := child("actualize", "--store", "bbolt", "--file", file, "--app", fmt.Sprint(appparttest.App),
				"--partition", fmt.Sprint(ownerPart), "--write", "--json", file+".json").CombinedOutput()
			require.NoError(t, err, "%s", out)
			var report struct {
				Written    bool `json:"written"`
				Partitions []struct {
					Epoch          uint64 `json:"epoch"`
					NextPLogOffset uint64 `json:"next_plog_offset"`
				} `json:"partitions"`
			}
			b, err := os.ReadFile(file + ".json")
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(b, &report))
			require.Len(t, report.Partitions, 1)
			assert.True(t, report.Written)
			assert.Equal(t, uint64(2), report.Partitions[0].Epoch, "the epoch the tool took")
			assert.Equal(t, uint64(7), report.Partitions[0].NextPLogOffset)
			t.Logf("cqlseq actualize --write:\n%s", out)
			assert.Contains(t, string(out), fmt.Sprintf("took over partition %d: epoch 2, stored next offset none stored, 2 PLog blocks fenced", ownerPart), "the block of the 6 events and the first empty one")
			assert.Contains(t, string(out), "6 events read, next PLog offset 7")

			bolt, err = boltdb.Open(file, boltdb.Options{})
			require.NoError(t, err)
			defer func() { require.NoError(t, bolt.Close()) }()
			next := appparttest.Open(t, appparttest.Options(bolt, ownerPart, mode))
			r, err := appparttest.Do(t, next, appparttest.Cmd(appparttest.WS(ownerPart, 0)))
			require.NoError(t, err, "the next owner's command")
			want := isequencer.PLogOffset(7)
			if mode == plog.ModeTrust2 {
				want = plog.ZoneMarker(ownerPart, 7).NextOffset() // a trust2 owner seals the block it replayed to
			}
			assert.Equal(t, want, r.Offset)
			assert.Equal(t, []isequencer.Number{7, last.Numbers[1] + 1}, r.Numbers, "the next owner handed out numbers already acknowledged")
			require.NoError(t, next.Close())
		})
	}
}

// TestActualizeWriteRefusedWritesNothing: a bbolt file another process
// holds (a live owner) cannot be taken over: actualize --write exits 1
// with one line saying why, and writes nothing (no epoch taken).
func TestActualizeWriteRefusedWritesNothing(t *testing.T) {
	file := filepath.Join(t.TempDir(), "owner.db")
	bolt, err := boltdb.Open(file, boltdb.Options{})
	require.NoError(t, err)
	p := appparttest.Open(t, appparttest.Options(bolt, ownerPart, plog.ModeTrust2))
	_, err = appparttest.Do(t, p, appparttest.Cmd(appparttest.WS(ownerPart, 0)))
	require.NoError(t, err)

	cmd := child("actualize", "--store", "bbolt", "--file", file, "--app", fmt.Sprint(appparttest.App),
		"--partition", fmt.Sprint(ownerPart), "--write")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var exit interface{ ExitCode() int }
	require.ErrorAs(t, err, &exit, "stdout %s stderr %s", &stdout, &stderr)
	assert.Equal(t, 1, exit.ExitCode())
	assert.Equal(t, 1, bytes.Count(stderr.Bytes(), []byte("\n")), "%s", &stderr)
	assert.NotContains(t, stdout.String(), "written:")
	t.Logf("stderr: %s", &stderr)

	require.NoError(t, p.Close())
	e, err := vvmadapter.New(bolt, appparttest.App).GetEpoch(context.Background(), ownerPart)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), e, "the refused tool took an epoch")
	require.NoError(t, bolt.Close())
}
