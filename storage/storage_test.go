package storage_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/mem"
)

// passThrough is a wrapper that passes MultiApplier through.
type passThrough struct{ storage.Storage }

func (w passThrough) Unwrap() storage.Storage { return w.Storage }
func (w passThrough) ApplyBatchesIf(ctx context.Context, b []storage.CondBatch, applied []bool) error {
	return w.Storage.(storage.MultiApplier).ApplyBatchesIf(ctx, b, applied)
}

// opaque is a wrapper that does not pass MultiApplier through.
type opaque struct{ storage.Storage }

func (w opaque) Unwrap() storage.Storage { return w.Storage }

// committer is a store that commits in groups.
type committer struct{ storage.Storage }

func (committer) GroupCommits() (uint64, uint64) { return 1, 2 }

func TestAsMultiApplierWalksWrappers(t *testing.T) {
	m := mem.New(mem.Options{})
	for _, tc := range []struct {
		name string
		st   storage.Storage
		want bool
	}{
		{"driver", m, true},
		{"passing wrapper", passThrough{m}, true},
		{"two passing wrappers", passThrough{passThrough{m}}, true},
		{"opaque wrapper", opaque{m}, false},
		{"passing over opaque", passThrough{opaque{m}}, false},
		{"hidden", struct{ storage.Storage }{m}, false},
	} {
		ma, ok := storage.AsMultiApplier(tc.st)
		assert.Equal(t, tc.want, ok, tc.name)
		if ok {
			assert.Equal(t, tc.st, ma, "%s: the outermost wrapper, whose faults and metrics apply", tc.name)
		}
	}
}

func TestAsGroupCommitterWalksWrappers(t *testing.T) {
	m := mem.New(mem.Options{})
	_, ok := storage.AsGroupCommitter(m)
	assert.False(t, ok)
	for _, st := range []storage.Storage{committer{m}, opaque{committer{m}}, passThrough{opaque{committer{m}}}} {
		gc, ok := storage.AsGroupCommitter(st)
		assert.True(t, ok)
		c, w := gc.GroupCommits()
		assert.Equal(t, [2]uint64{1, 2}, [2]uint64{c, w})
	}
	_, ok = storage.AsGroupCommitter(struct{ storage.Storage }{committer{m}})
	assert.False(t, ok, "a wrapper without Unwrap hides what is under it")
}

func TestDistinctReadKeys(t *testing.T) {
	a, b, c := []byte("a"), []byte("b"), []byte("c")
	keys := [][]byte{a, b, c}
	got, err := storage.DistinctReadKeys(keys)
	assert.NoError(t, err)
	assert.Same(t, &keys[0], &got[0], "no repeats: the keys themselves")
	got, err = storage.DistinctReadKeys([][]byte{a, b, []byte("a"), c, b, c})
	assert.NoError(t, err)
	assert.Equal(t, keys, got, "repeats dropped, order kept")
	got, err = storage.DistinctReadKeys(nil)
	assert.NoError(t, err)
	assert.Empty(t, got)
	_, err = storage.DistinctReadKeys([][]byte{a, {}})
	assert.ErrorIs(t, err, storage.ErrInvalidArgument, "an empty key")
	_, err = storage.DistinctReadKeys(make([][]byte, storage.MaxReadPartitions+1))
	assert.ErrorIs(t, err, storage.ErrInvalidArgument, "too many keys")
}
