package plog

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/drivertest"
	"github.com/cqlseq/cqlseq/storage/faulty"
)

// eachStore runs f on mem and bbolt, each with its one-call path
// (storage.MultiApplier) and with the storage contract's calls.
func eachStore(t *testing.T, f func(t *testing.T, st storage.Storage)) {
	drivertest.EachPath(t, f)
}

// groupOf returns events at offsets from..from+n-1, event i with records
// 100*(from+i) and 100*(from+i)+1.
func groupOf(from isequencer.PLogOffset, n int) []*Event {
	g := make([]*Event, n)
	for i := range g {
		off := from + isequencer.PLogOffset(i)
		g[i] = testEvent(off, RecordID(100*off), RecordID(100*off+1))
	}
	return g
}

func TestWriteGroupStoresEachEvent(t *testing.T) {
	for _, mode := range []Mode{ModeTrust0, ModeTrust1, ModeTrust2} {
		t.Run(mode.String(), func(t *testing.T) {
			eachStore(t, func(t *testing.T, st storage.Storage) {
				w := newWriter(t, st, mode)
				// Across a block boundary.
				g := groupOf(4094, 5)
				errs := make([]error, len(g))
				copy(errs, eventErrs(w.WriteGroup(context.Background(), g), len(errs)))
				for i, e := range g {
					require.NoError(t, errs[i], "event %d", i)
					v, ok := getRow(t, st, EventPKey(4, e.Offset), EventCCols(e.Offset))
					require.True(t, ok)
					want, _ := AppendEncoded(nil, e)
					assert.Equal(t, want, v)
					for _, id := range e.Records {
						v, ok := getRow(t, st, RecordPKey(5, id), RecordCCols(id))
						require.True(t, ok, "record %d", id)
						assert.Equal(t, RecordValue(e.Offset), v)
					}
				}
			})
		})
	}
}

// TestWriteGroupPlantedEventConflict: an event already stored at one
// offset of the group: the events before it are stored, it is refused, the
// ones after it are not written; the writer is stopped.
func TestWriteGroupPlantedEventConflict(t *testing.T) {
	for _, mode := range []Mode{ModeTrust0, ModeTrust1} {
		t.Run(mode.String(), func(t *testing.T) {
			eachStore(t, func(t *testing.T, st storage.Storage) {
				ctx := context.Background()
				planted := []byte{0xEE}
				require.NoError(t, st.Put(ctx, EventPKey(4, 13), EventCCols(13), planted))
				w := newWriter(t, st, mode)
				g := groupOf(10, 6)
				errs := make([]error, len(g))
				copy(errs, eventErrs(w.WriteGroup(ctx, g), len(errs)))
				for i, e := range g {
					v, ok := getRow(t, st, EventPKey(4, e.Offset), EventCCols(e.Offset))
					_, rec := getRow(t, st, RecordPKey(5, e.Records[0]), RecordCCols(e.Records[0]))
					switch {
					case e.Offset < 13:
						require.NoError(t, errs[i], "offset %d", e.Offset)
						assert.True(t, ok && rec, "offset %d stored with its records", e.Offset)
					case e.Offset == 13:
						require.ErrorIs(t, errs[i], ErrConflict)
						assert.Contains(t, errs[i].Error(), "offset 13: an event is already stored")
						assert.Equal(t, planted, v, "not overwritten")
						assert.False(t, rec)
					default:
						require.ErrorIs(t, errs[i], ErrConflict, "offset %d", e.Offset)
						assert.Contains(t, errs[i].Error(), "not written")
						assert.False(t, ok || rec, "offset %d not written", e.Offset)
					}
				}
				require.ErrorIs(t, w.Stopped(), ErrConflict)
				copy(errs[:2], eventErrs(w.WriteGroup(ctx, groupOf(16, 2)), len(errs[:2])))
				assert.ErrorIs(t, errs[0], ErrConflict, "stopped")
			})
		})
	}
}

// TestWriteGroupPlantedRecordConflict: trust0, a record of one event of the
// group is already stored: that event alone fails (its event is stored,
// its records are not overwritten); its neighbours succeed.
func TestWriteGroupPlantedRecordConflict(t *testing.T) {
	eachStore(t, func(t *testing.T, st storage.Storage) {
		ctx := context.Background()
		planted := []byte{0xEE}
		require.NoError(t, st.Put(ctx, RecordPKey(5, 1201), RecordCCols(1201), planted))
		w := newWriter(t, st, ModeTrust0)
		g := groupOf(10, 5)
		errs := make([]error, len(g))
		copy(errs, eventErrs(w.WriteGroup(ctx, g), len(errs)))
		for i, e := range g {
			if e.Offset == 12 {
				require.ErrorIs(t, errs[i], ErrConflict)
				assert.Contains(t, errs[i].Error(), "records already stored [1201]")
				v, _ := getRow(t, st, RecordPKey(5, 1201), RecordCCols(1201))
				assert.Equal(t, planted, v, "not overwritten")
				continue
			}
			require.NoError(t, errs[i], "offset %d: a neighbour's conflict is not its own", e.Offset)
			_, rec := getRow(t, st, RecordPKey(5, e.Records[1]), RecordCCols(e.Records[1]))
			assert.True(t, rec)
		}
		require.ErrorIs(t, w.Stopped(), ErrConflict)
	})
}

// TestWriteGroupInvalid: an invalid group writes nothing.
func TestWriteGroupInvalid(t *testing.T) {
	st := newMem(t)
	w := newWriter(t, st, ModeTrust0)
	g := groupOf(10, 3)
	g[2].Offset = 20
	errs := make([]error, len(g))
	copy(errs, eventErrs(w.WriteGroup(context.Background(), g), len(errs)))
	for _, err := range errs {
		require.ErrorIs(t, err, storage.ErrInvalidArgument)
	}
	_, ok := getRow(t, st, EventPKey(4, 10), EventCCols(10))
	assert.False(t, ok)
	require.NoError(t, w.Stopped())
}

// TestWriteGroupStorageError: a failed event batch leaves the group's
// outcome unknown, without stopping the writer.
func TestWriteGroupStorageError(t *testing.T) {
	st, err := faulty.New(newMem(t), faulty.Options{Rules: []faulty.Rule{{Ops: []string{faulty.OpApplyBatchIf}, Action: faulty.Fail, Times: 1}}})
	require.NoError(t, err)
	w := newWriter(t, st, ModeTrust0)
	errs := make([]error, 2)
	copy(errs, eventErrs(w.WriteGroup(context.Background(), groupOf(10, 2)), len(errs)))
	for _, err := range errs {
		require.ErrorIs(t, err, storage.ErrUnavailable)
		require.False(t, errors.Is(err, ErrConflict))
	}
	require.NoError(t, w.Stopped())
	copy(errs, eventErrs(w.WriteGroup(context.Background(), groupOf(10, 2)), len(errs)))
	require.NoError(t, errors.Join(errs...))
}

// failingMulti is a storage.MultiApplier whose ApplyBatchesIf fails.
type failingMulti struct {
	storage.Storage
	err error
}

func (f failingMulti) ApplyBatchesIf(context.Context, []storage.CondBatch, []bool) error {
	return f.err
}

// TestWriteGroupApplyError: a failed ApplyBatchesIf fails every event of
// the group with its error (outcome unknown), without stopping the writer.
func TestWriteGroupApplyError(t *testing.T) {
	for _, mode := range []Mode{ModeTrust0, ModeTrust1} {
		t.Run(mode.String(), func(t *testing.T) {
			st := failingMulti{Storage: newMem(t), err: fmt.Errorf("boom: %w", storage.ErrUnknownOutcome)}
			w := newWriter(t, st, mode)
			errs := make([]error, 3)
			copy(errs, eventErrs(w.WriteGroup(context.Background(), groupOf(10, 3)), len(errs)))
			for i, err := range errs {
				require.ErrorIs(t, err, storage.ErrUnknownOutcome, "event %d", i)
				require.NotErrorIs(t, err, ErrConflict)
				assert.Contains(t, err.Error(), fmt.Sprintf("offset %d", 10+i))
			}
			require.NoError(t, w.Stopped())
		})
	}
}

// eventErrs returns the per-event errors of a group of n events written
// with error err (nil or a *GroupError, see GroupWriter); any other error
// is given to every event, so that the checks fail on it.
func eventErrs(err error, n int) []error {
	errs := make([]error, n)
	var ge *GroupError
	switch {
	case err == nil:
	case errors.As(err, &ge) && len(ge.Errs) == n:
		copy(errs, ge.Errs)
	default:
		for i := range errs {
			errs[i] = fmt.Errorf("not a *GroupError of %d events: %w", n, err)
		}
	}
	return errs
}
