// Package appparttest holds apppart's scenario tests and flow benchmarks
// over any storage.Storage: apppart's unit tests run them on the embedded
// drivers, the integration module on a real cluster. It imports testing;
// production code must not import it.
//
// Scenarios sharing one storage must use different partition IDs: the
// workspaces they use are derived from the partition (WS), so that neither
// their PLog rows nor their record rows meet.
package appparttest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
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

// The application, workspace kind and sequences of every scenario.
const (
	App  isequencer.ClusterAppID = 1
	Kind isequencer.WSKind       = 1

	SeqWLogOffset isequencer.SeqID = 1
	SeqRecordID   isequencer.SeqID = 2

	FirstRecordID isequencer.Number = 322685000131072
)

// Options returns OpenOptions for partition part of App over st: one
// WSKind with a WLog offset sequence and a record ID sequence (record
// rows), a quiet logger, short retry delays.
func Options(st storage.Storage, part isequencer.PartitionID, mode plog.Mode) apppart.OpenOptions {
	return apppart.OpenOptions{
		Storage: st, App: App, Partition: part, Mode: mode,
		SeqTypes:       map[isequencer.WSKind]map[isequencer.SeqID]isequencer.Number{Kind: {SeqWLogOffset: 1, SeqRecordID: FirstRecordID}},
		RecordSeqs:     []isequencer.SeqID{SeqRecordID},
		WLogOffsetSeq:  SeqWLogOffset,
		Sequencer:      isequencer.Params{RetryDelay: time.Millisecond, MaxRetryDelay: 20 * time.Millisecond, MaxNumUnflushedValues: 10_000},
		StorageTimeout: 10 * time.Second,
		WriteTimeout:   10 * time.Second,
		Logger:         Quiet(),
	}
}

// Quiet returns a logger that discards everything.
func Quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// Open opens a partition, closed at the test's cleanup.
func Open(t testing.TB, o apppart.OpenOptions) *apppart.Partition {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := apppart.Open(ctx, o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// WS returns workspace i (from 1) of partition part: distinct partitions
// never share a workspace.
func WS(part isequencer.PartitionID, i int) isequencer.WSID {
	return isequencer.WSID(uint64(part)<<32 | uint64(i))
}

// Cmd is a command in ws taking one WLog offset and one record ID.
func Cmd(ws isequencer.WSID) apppart.Command {
	return apppart.Command{WSKind: Kind, WSID: ws, Seqs: []isequencer.SeqID{SeqWLogOffset, SeqRecordID}, Payload: []byte("cmd")}
}

// Do runs cmd, retrying while the partition is busy (at most a minute).
func Do(t testing.TB, p *apppart.Partition, cmd apppart.Command) (apppart.Result, error) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		r, err := p.Do(context.Background(), cmd)
		if !errors.Is(err, apppart.ErrBusy) || time.Now().After(deadline) {
			return r, err
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// StoredOffset reads the partition's stored next PLog offset.
func StoredOffset(t testing.TB, st storage.Storage, part isequencer.PartitionID) isequencer.PLogOffset {
	t.Helper()
	off, _, err := vvmadapter.New(st, App).GetPLogOffset(context.Background(), part)
	require.NoError(t, err)
	return off
}

// RewindOffset stores off as the partition's next PLog offset as an owner
// would, to stage a replay from it: it takes a new epoch and writes with
// its versions (an unversioned write never replaces an owner's offset).
func RewindOffset(t testing.TB, st storage.Storage, part isequencer.PartitionID, off isequencer.PLogOffset) {
	t.Helper()
	ctx := context.Background()
	owner, err := vvmadapter.New(st, App).TakeOver(ctx, part)
	require.NoError(t, err)
	require.NoError(t, owner.PutPLogOffset(ctx, off))
	require.Equal(t, off, StoredOffset(t, st, part))
}

// Maxes tracks the largest number handed out per (WSID, SeqID).
type Maxes map[isequencer.NumberKey]isequencer.Number

// Add records r's numbers.
func (m Maxes) Add(cmd apppart.Command, r apppart.Result) {
	for i, id := range cmd.Seqs {
		k := isequencer.NumberKey{WSID: cmd.WSID, SeqID: id}
		m[k] = max(m[k], r.Numbers[i])
	}
}

// RequireAbove fails unless every number of r is above every number
// recorded before for its (WSID, SeqID).
func (m Maxes) RequireAbove(t testing.TB, cmd apppart.Command, r apppart.Result) {
	t.Helper()
	for i, id := range cmd.Seqs {
		k := isequencer.NumberKey{WSID: cmd.WSID, SeqID: id}
		require.Greater(t, r.Numbers[i], m[k], "WSID %d SeqID %d", cmd.WSID, id)
	}
}

// LogCapture is a slog.Handler that keeps the text of every record.
type LogCapture struct {
	mu   sync.Mutex
	recs []string
	sig  chan struct{}
}

// NewLogCapture returns an empty LogCapture.
func NewLogCapture() *LogCapture { return &LogCapture{sig: make(chan struct{}, 1)} }

// Enabled implements slog.Handler.
func (h *LogCapture) Enabled(context.Context, slog.Level) bool { return true }

// WithAttrs implements slog.Handler.
func (h *LogCapture) WithAttrs([]slog.Attr) slog.Handler { return h }

// WithGroup implements slog.Handler.
func (h *LogCapture) WithGroup(string) slog.Handler { return h }

// Handle implements slog.Handler.
func (h *LogCapture) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
	h.mu.Lock()
	h.recs = append(h.recs, b.String())
	h.mu.Unlock()
	select {
	case h.sig <- struct{}{}:
	default:
	}
	return nil
}

// WaitFor waits (at most a minute) until n records contain every one of
// subs and returns the n-th.
func (h *LogCapture) WaitFor(t testing.TB, n int, subs ...string) string {
	t.Helper()
	timeout := time.NewTimer(time.Minute)
	defer timeout.Stop()
	for {
		h.mu.Lock()
		var hits []string
		for _, r := range h.recs {
			all := true
			for _, s := range subs {
				all = all && strings.Contains(r, s)
			}
			if all {
				hits = append(hits, r)
			}
		}
		h.mu.Unlock()
		if len(hits) >= n {
			return hits[n-1]
		}
		select {
		case <-h.sig:
		case <-timeout.C:
			t.Fatalf("no %d log records with %q", n, subs)
		}
	}
}

// Replays is an isequencer.Metrics that counts the PLog events the
// sequencer's actualizations replayed (Options.Sequencer.Metrics).
type Replays struct{ events atomic.Int64 }

// Events returns the events replayed so far.
func (r *Replays) Events() int64 { return r.events.Load() }

// Actualized implements isequencer.Metrics.
func (r *Replays) Actualized(events int, _ time.Duration) { r.events.Add(int64(events)) }

// Transaction implements isequencer.Metrics.
func (*Replays) Transaction() {}

// Busy implements isequencer.Metrics.
func (*Replays) Busy(isequencer.BusyReason) {}

// Unflushed implements isequencer.Metrics.
func (*Replays) Unflushed(int) {}

// Flushed implements isequencer.Metrics.
func (*Replays) Flushed(int, time.Duration) {}

// StorageError implements isequencer.Metrics.
func (*Replays) StorageError(string) {}
