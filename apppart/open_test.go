package apppart

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/mem"
	"github.com/cqlseq/cqlseq/vvmadapter"
)

const (
	testApp  isequencer.ClusterAppID = 1
	testPart isequencer.PartitionID  = 2

	seqWLogOff isequencer.SeqID = 1
	seqRecID   isequencer.SeqID = 2

	firstRecordID isequencer.Number = 322685000131072
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func openOptions(st storage.Storage, mode plog.Mode) OpenOptions {
	return OpenOptions{
		Storage: st, App: testApp, Partition: testPart, Mode: mode,
		SeqTypes:      map[isequencer.WSKind]map[isequencer.SeqID]isequencer.Number{kind: {seqWLogOff: 1, seqRecID: firstRecordID}},
		RecordSeqs:    []isequencer.SeqID{seqRecID},
		WLogOffsetSeq: seqWLogOff,
		Sequencer:     isequencer.Params{RetryDelay: time.Millisecond, MaxRetryDelay: 20 * time.Millisecond, MaxNumUnflushedValues: 10_000},
		Logger:        quiet(),
	}
}

func open(t testing.TB, o OpenOptions) *Partition {
	t.Helper()
	p, err := Open(context.Background(), o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func cmdFor(ws isequencer.WSID) Command {
	return Command{WSKind: kind, WSID: ws, Seqs: []isequencer.SeqID{seqWLogOff, seqRecID}, Payload: []byte("cmd")}
}

func storedOffset(t testing.TB, st storage.Storage) isequencer.PLogOffset {
	t.Helper()
	off, _, err := vvmadapter.New(st, testApp).GetPLogOffset(context.Background(), testPart)
	require.NoError(t, err)
	return off
}

// nopSeqStorage is a non-nil ISeqStorage for option checks; never called.
type nopSeqStorage struct{ isequencer.ISeqStorage }

func TestOpenValidates(t *testing.T) {
	_, err := Open(context.Background(), OpenOptions{
		Mode: 9,
		Sequencer: isequencer.Params{
			SeqStorage: nopSeqStorage{}, SeqTypes: map[isequencer.WSKind]map[isequencer.SeqID]isequencer.Number{},
			GroupCommit: true,
		},
		StorageTimeout: -1,
		WriteTimeout:   -1,
	})
	require.ErrorIs(t, err, ErrInvalidOptions)
	for _, s := range []string{"Storage is nil", "unknown mode", "Sequencer.SeqStorage", "Sequencer.SeqTypes", "StorageTimeout", "WriteTimeout", "GroupCommit"} {
		assert.Contains(t, err.Error(), s)
	}

	st := mem.New(mem.Options{})
	defer st.Close()
	_, err = Open(context.Background(), OpenOptions{Storage: st})
	require.ErrorIs(t, err, ErrInvalidOptions)
	assert.Contains(t, err.Error(), "SeqTypes is empty", "New's validation")

	require.NoError(t, st.Close())
	_, err = Open(context.Background(), openOptions(st, plog.ModeTrust0))
	require.ErrorIs(t, err, storage.ErrClosed, "Open reads the storage once")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = Open(ctx, openOptions(mem.New(mem.Options{}), plog.ModeTrust0))
	require.True(t, errors.Is(err, context.Canceled), "%v", err)
}

// TestOpenAppStorage: the PLog and records go to AppStorage, the
// sequencer's state to Storage.
func TestOpenAppStorage(t *testing.T) {
	vvm, appSt := mem.New(mem.Options{}), mem.New(mem.Options{})
	defer vvm.Close()
	defer appSt.Close()
	o := openOptions(vvm, plog.ModeTrust0)
	o.AppStorage = appSt
	o.Sequencer.FlushAfterEvents = 1 // the state stored after each group
	p := open(t, o)
	r, err := do(t, p, cmdFor(3))
	require.NoError(t, err)
	require.NoError(t, p.Close())
	_, ok, _ := appSt.Get(context.Background(), plog.EventPKey(testPart, r.Offset), plog.EventCCols(r.Offset))
	assert.True(t, ok, "event in AppStorage")
	_, ok, _ = vvm.Get(context.Background(), plog.EventPKey(testPart, r.Offset), plog.EventCCols(r.Offset))
	assert.False(t, ok, "no event in Storage")
	assert.Equal(t, r.Offset+1, storedOffset(t, vvm), "the sequencer's state in Storage")
}

// TestOpenEventShape: the stored event carries the largest number per
// SeqID, every record ID in order, and the first WLog offset number.
func TestOpenEventShape(t *testing.T) {
	st := mem.New(mem.Options{})
	defer st.Close()
	p := open(t, openOptions(st, plog.ModeTrust0))
	cmd := Command{WSKind: kind, WSID: 9, Seqs: []isequencer.SeqID{seqRecID, seqWLogOff, seqRecID, seqWLogOff}, Payload: []byte("pay")}
	r, err := do(t, p, cmd)
	require.NoError(t, err)
	require.Equal(t, []isequencer.Number{firstRecordID, 1, firstRecordID + 1, 2}, r.Numbers)
	v, ok, err := st.Get(context.Background(), plog.EventPKey(testPart, r.Offset), plog.EventCCols(r.Offset))
	require.NoError(t, err)
	require.True(t, ok)
	var e plog.Event
	require.NoError(t, plog.Decode(testPart, r.Offset, v, &e))
	assert.Equal(t, plog.Event{
		Partition: testPart, Offset: r.Offset, WSID: 9, WSKind: kind, WLogOffset: 1,
		Numbers: []plog.SeqNumber{{SeqID: seqRecID, Number: firstRecordID + 1}, {SeqID: seqWLogOff, Number: 2}},
		Records: []plog.RecordID{plog.RecordID(firstRecordID), plog.RecordID(firstRecordID + 1)},
		Payload: []byte("pay"),
	}, e)
	for _, id := range e.Records {
		v, ok, err := st.Get(context.Background(), plog.RecordPKey(9, id), plog.RecordCCols(id))
		require.NoError(t, err)
		require.True(t, ok, "record %d", id)
		assert.Equal(t, plog.RecordValue(r.Offset), v)
	}
	assert.Equal(t, plog.ModeTrust0, p.flow.cfg.log.(writerLog).w.(*plog.Writer).Mode())
}

// TestEpochInEveryMode is issue 50's item 6: Epoch returned 0 outside
// fenced mode, although every open takes an epoch.
func TestEpochInEveryMode(t *testing.T) {
	for _, mode := range []plog.Mode{plog.ModeTrust0, plog.ModeTrust1, plog.ModeTrust2, plog.ModeFenced} {
		t.Run(mode.String(), func(t *testing.T) {
			st := mem.New(mem.Options{})
			a, err := Open(context.Background(), openOptions(st, mode))
			require.NoError(t, err)
			ea := a.Epoch()
			require.NoError(t, a.Close())
			b := open(t, openOptions(st, mode))
			assert.Positive(t, ea)
			assert.Greater(t, b.Epoch(), ea, "each open takes a higher epoch")
		})
	}
}
