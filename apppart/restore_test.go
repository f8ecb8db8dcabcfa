package apppart_test

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/apppart/appparttest"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/boltdb"
)

// TestRestoreAndAdvance: the procedure of docs/operations.md "Backup and
// restore" on a bbolt file, in each mode; the backup is a copy of the
// closed file, the restore copies it back.
func TestRestoreAndAdvance(t *testing.T) {
	for _, mode := range []plog.Mode{plog.ModeTrust0, plog.ModeTrust1, plog.ModeTrust2, plog.ModeFenced} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			path, saved := filepath.Join(dir, "cqlseq.db"), filepath.Join(dir, "backup.db")
			var st *boltdb.Store
			reopen := func(t testing.TB) {
				var err error
				st, err = boltdb.Open(path, boltdb.Options{})
				require.NoError(t, err)
			}
			reopen(t)
			t.Cleanup(func() { _ = st.Close() })
			copyClosed := func(t testing.TB, from, to string) {
				require.NoError(t, st.Close())
				copyFile(t, from, to)
				reopen(t)
			}
			r := appparttest.RestoreAndAdvance(t, appparttest.RestoreEnv{
				Store:   func(testing.TB) storage.Storage { return st },
				Backup:  func(t testing.TB) { copyClosed(t, path, saved) },
				Restore: func(t testing.TB) { copyClosed(t, saved, path) },
			}, 5, mode)
			t.Logf("%d commands before the backup, %d lost with the restore, %d after advancing (gap at %d, next offset %d)",
				r.Before, r.Lost, r.After, r.Gap, r.Next)
		})
	}
}

func copyFile(t testing.TB, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	require.NoError(t, err)
	defer in.Close()
	out, err := os.Create(to)
	require.NoError(t, err)
	_, err = io.Copy(out, in)
	require.NoError(t, err)
	require.NoError(t, out.Close())
}
