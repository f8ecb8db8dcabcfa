// Package plogchecktest plants PLogs, stored numbers and ack logs,
// bypassing the sequencer and the ack log writer, for the tests of
// plogcheck and of the tools that use it. It imports testing; production code must not import it.
package plogchecktest

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/vvmadapter"
)

// App is the application whose numbers Planted stores.
const App isequencer.ClusterAppID = 1

// Planted is a partition's PLog and the stored state beside it.
type Planted struct {
	Partition  isequencer.PartitionID
	Events     []plog.Event          // written with a trust2 writer, as they are
	StoredNext isequencer.PLogOffset // the stored next offset; 0: none stored
	Stored     []isequencer.SeqValue // App's stored numbers
}

// Write writes p to st: the events, then the stored numbers and offset
// (if any) as the owner of a new epoch of the partition writes them.
func (p Planted) Write(t testing.TB, st storage.Storage) {
	t.Helper()
	ctx := context.Background()
	w, err := plog.NewWriter(plog.WriterOptions{Storage: st, Partition: p.Partition, Mode: plog.ModeTrust2})
	require.NoError(t, err)
	for i := range p.Events {
		require.NoError(t, w.Write(ctx, &p.Events[i]))
	}
	if len(p.Stored) == 0 && p.StoredNext == 0 {
		return
	}
	// Written as an owner writes them (its epoch's versions).
	owner, err := vvmadapter.New(st, App).TakeOver(ctx, p.Partition)
	require.NoError(t, err)
	require.NoError(t, owner.PutNumbers(ctx, p.Stored))
	if p.StoredNext > 0 {
		require.NoError(t, owner.PutPLogOffset(ctx, p.StoredNext))
	}
}

// Event returns an event of ws (kind 1) at off whose numbers are nums[i]
// of SeqID i+1.
func Event(off isequencer.PLogOffset, ws isequencer.WSID, nums ...isequencer.Number) plog.Event {
	e := plog.Event{Offset: off, WSID: ws, WSKind: 1}
	for i, n := range nums {
		e.Numbers = append(e.Numbers, plog.SeqNumber{SeqID: isequencer.SeqID(i + 1), Number: n})
	}
	return e
}

// Value returns the stored number n of (ws, id).
func Value(ws isequencer.WSID, id isequencer.SeqID, n isequencer.Number) isequencer.SeqValue {
	return isequencer.SeqValue{Key: isequencer.NumberKey{WSID: ws, SeqID: id}, Value: n}
}

// The planted states below each hold exactly the defect their name says,
// in partition 0; Consistent holds none.

// Consistent: four events of WSIDs 7 and 8, the stored next offset 4
// (event 4 is the unflushed tail: its numbers are above the stored ones)
// and stored numbers that cover every flushed event.
func Consistent() Planted {
	return Planted{
		Events:     []plog.Event{Event(1, 7, 5, 1), Event(2, 8, 1, 1), Event(3, 7, 6, 2), Event(4, 7, 9, 3)},
		StoredNext: 4,
		Stored:     []isequencer.SeqValue{Value(7, 1, 6), Value(7, 2, 2), Value(8, 1, 1), Value(8, 2, 1)},
	}
}

// Duplicate: WSID 7 SeqID 1 gets number 5 twice, at offsets 1 and 2.
func Duplicate() Planted {
	return Planted{
		Events:     []plog.Event{Event(1, 7, 5), Event(2, 7, 5), Event(3, 7, 6)},
		StoredNext: 4,
		Stored:     []isequencer.SeqValue{Value(7, 1, 6)},
	}
}

// Backwards: WSID 7 SeqID 1 gets 6 at offset 3, after 9 at offset 2.
func Backwards() Planted {
	return Planted{
		Events:     []plog.Event{Event(1, 7, 5), Event(2, 7, 9), Event(3, 7, 6)},
		StoredNext: 4,
		Stored:     []isequencer.SeqValue{Value(7, 1, 9)},
	}
}

// Regression: the stored number of WSID 7 SeqID 2 (3) is below the 4 the
// flushed event at offset 2 carries; SeqID 1's is fine. The event at 3 is
// the tail: its 12 is not a regression.
func Regression() Planted {
	return Planted{
		Events:     []plog.Event{Event(1, 7, 5, 1), Event(2, 7, 9, 4), Event(3, 7, 12, 5)},
		StoredNext: 3,
		Stored:     []isequencer.SeqValue{Value(7, 1, 9), Value(7, 2, 3)},
	}
}

// MissingStored: a regression too: the flushed event at offset 1 carries
// number 5 of WSID 7 SeqID 1, and no number of it is stored.
func MissingStored() Planted {
	return Planted{Events: []plog.Event{Event(1, 7, 5)}, StoredNext: 2}
}

// OffsetBeyondLog: offset 2 is missing, so a reader stops at 1, and the
// stored next offset 4 claims events it cannot see.
func OffsetBeyondLog() Planted {
	return Planted{Events: []plog.Event{Event(1, 7, 5), Event(3, 7, 6)}, StoredNext: 4, Stored: []isequencer.SeqValue{Value(7, 1, 6)}}
}

// AppendAckLog appends text to the ack log at path (creating it) as it
// is, torn lines included.
func AppendAckLog(t testing.TB, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(t, err)
	_, err = f.WriteString(text)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}
