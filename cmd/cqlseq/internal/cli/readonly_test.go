package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/storage/boltdb"
)

// benchFile writes a small bbolt file with bench and returns its path.
func benchFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "x.db")
	r := runCLI(t, "bench", "--file", path, "--no-sync", "--duration", "200ms", "--partitions", "1", "--workspaces", "3")
	require.Equal(t, ExitOK, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	return path
}

// TestTruncatedFileIsOneLine: a truncated bbolt file (it crashed verify
// and inspect with SIGSEGV in bbolt) is refused with one line and exit 1
// by every command that opens it.
func TestTruncatedFileIsOneLine(t *testing.T) {
	path := benchFile(t)
	require.NoError(t, os.Truncate(path, 20000))
	for _, args := range [][]string{
		{"verify", "--file", path},
		{"inspect", "--file", path},
		{"bench", "--file", path, "--no-sync", "--duration", "100ms", "--partitions", "1", "--workspaces", "3"},
	} {
		r := runCLI(t, args...)
		assert.Equal(t, ExitFailure, r.code, "%v", args)
		line := requireOneLine(t, r)
		assert.Contains(t, line, "corrupt file "+path)
		assert.Contains(t, line, "truncated?")
	}
}

// TestInspectAndVerifyDoNotWrite: inspect and verify open the file
// read-only: a valid file keeps every byte, an empty one is an error and
// stays empty (inspect grew it to 32 KiB and reported an empty store).
func TestInspectAndVerifyDoNotWrite(t *testing.T) {
	path := benchFile(t)
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, cmd := range []string{"inspect", "verify"} {
		r := runCLI(t, cmd, "--file", path)
		require.Equal(t, ExitOK, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(before, after), "not a byte changed")

	empty := filepath.Join(t.TempDir(), "empty.db")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	for _, cmd := range []string{"inspect", "verify"} {
		r := runCLI(t, cmd, "--file", empty)
		assert.Equal(t, ExitFailure, r.code)
		assert.Contains(t, requireOneLine(t, r), "empty.db is empty (0 bytes)")
		fi, err := os.Stat(empty)
		require.NoError(t, err)
		assert.Zero(t, fi.Size(), "%s left the file empty", cmd)
	}
}

// TestVerifyJSONPathCheckedFirst: a --json path that cannot be written
// fails before the scan, and a failed run leaves no file it created.
func TestVerifyJSONPathCheckedFirst(t *testing.T) {
	path := benchFile(t)
	bad := filepath.Join(t.TempDir(), "no-such-dir", "out.json")
	r := runCLI(t, "verify", "--file", path, "--json", bad)
	assert.Equal(t, ExitFailure, r.code)
	assert.Contains(t, requireOneLine(t, r), "--json: open "+bad)
	assert.Empty(t, r.stdout, "no scan started")

	out := filepath.Join(t.TempDir(), "out.json")
	r = runCLI(t, "verify", "--file", filepath.Join(t.TempDir(), "missing.db"), "--json", out)
	assert.Equal(t, ExitFailure, r.code)
	assert.Contains(t, requireOneLine(t, r), "missing.db")
	assert.NoFileExists(t, out, "created for the run, removed when it failed")

	require.NoError(t, os.WriteFile(out, []byte("old"), 0o644))
	r = runCLI(t, "verify", "--file", filepath.Join(t.TempDir(), "missing.db"), "--json", out)
	assert.Equal(t, ExitFailure, r.code)
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Equal(t, "old", string(b), "an existing file is replaced only by a result")

	r = runCLI(t, "verify", "--file", path, "--json", out)
	require.Equal(t, ExitOK, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	b, err = os.ReadFile(out)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"ok": true`)
}

// TestVerifyOnAFileInUseSaysWhen is issue 28's item 6: verify on a bbolt
// file that a bench holds failed after 1 s with bbolt's lock message only,
// while its help called it safe on a store in use.
func TestVerifyOnAFileInUseSaysWhen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "held.db")
	held, err := boltdb.Open(path, boltdb.Options{NoSync: true})
	require.NoError(t, err)
	defer held.Close()
	for _, cmd := range []string{"verify", "inspect"} {
		r := runCLI(t, cmd, "--file", path)
		assert.Equal(t, ExitFailure, r.code, "%s: stdout:\n%s\nstderr:\n%s", cmd, r.stdout, r.stderr)
		msg := requireOneLine(t, r)
		assert.Contains(t, msg, "locked", cmd)
		assert.Contains(t, msg, "once the process that has it open (a bench, a demo) has ended", cmd)
	}
}
