package appparttest

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/apppart"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/vvmadapter"
)

// ErrOwnerCrashed is what an OwnerCrashStore's refused writes return.
var ErrOwnerCrashed = errors.New("appparttest: the owner crashed (staged)")

// OwnerCrashStore stands for the store of an owner of App's partition Part
// whose process stops writing its sequencer state between a numbers write
// and its next-offset write (a crash between the two): the first write of
// the partition's next PLog offset fails, and from then on every write of
// a number or of the offset fails too, while the PLog's events and records
// are still written (commands go on being acknowledged until the crash).
type OwnerCrashStore struct {
	storage.Storage
	Part    isequencer.PartitionID
	crashed atomic.Bool
}

// Crashed reports whether the next-offset write was reached.
func (s *OwnerCrashStore) Crashed() bool { return s.crashed.Load() }

// PutBatch implements storage.Storage.
func (s *OwnerCrashStore) PutBatch(ctx context.Context, rows []storage.Row) error {
	offKey, offCC := vvmadapter.PartKey(App, s.Part), vvmadapter.PartCCols(vvmadapter.PLogOffsetCC)
	numbers := vvmadapter.WSKey(App, 0)[:8] // the prefix of App's number rows
	for _, r := range rows {
		offset := bytes.Equal(r.PKey, offKey) && bytes.Equal(r.CCols, offCC)
		if offset {
			s.crashed.Store(true)
		}
		if offset || bytes.HasPrefix(r.PKey, numbers) && s.crashed.Load() {
			return ErrOwnerCrashed
		}
	}
	return s.Storage.PutBatch(ctx, rows)
}

// CrashBetweenNumbersAndOffset stages issue 36's first finding on st: an
// owner of partition part in mode takes n commands in workspace WS(part,
// 0) and crashes between its numbers write and its first next-offset
// write: the first command's numbers are stored, no offset, and the PLog
// holds the n events. It returns the last command's result (WLog offset
// and record ID n-th of their sequences).
func CrashBetweenNumbersAndOffset(t testing.TB, st storage.Storage, part isequencer.PartitionID, mode plog.Mode, n int) apppart.Result {
	t.Helper()
	cs := &OwnerCrashStore{Storage: st, Part: part}
	o := Options(cs, part, mode)
	o.Sequencer.FlushAfterEvents = 1 // the first command's numbers are flushed at once
	p := Open(t, o)
	var last apppart.Result
	for i := range n {
		r, err := Do(t, p, Cmd(WS(part, 0)))
		require.NoError(t, err, "command %d", i+1)
		last = r
		if i == 0 {
			require.Eventually(t, cs.Crashed, 30*time.Second, time.Millisecond, "no next-offset write")
		}
	}
	_ = p.Close() // its flush fails: the owner is gone
	return last
}
