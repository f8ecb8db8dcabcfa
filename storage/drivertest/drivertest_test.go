package drivertest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/faulty"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestEachRunsEveryDriverFresh(t *testing.T) {
	var ran []string
	Each(t, func(t *testing.T, st storage.Storage) {
		ran = append(ran, t.Name())
		_, ok, err := st.Get(context.Background(), []byte("p"), []byte("c"))
		require.NoError(t, err)
		assert.False(t, ok, "empty")
		require.NoError(t, st.Put(context.Background(), []byte("p"), []byte("c"), []byte("v")))
	})
	assert.Equal(t, []string{t.Name() + "/mem", t.Name() + "/bbolt"}, ran)
}

func TestCountingCountsEachOperation(t *testing.T) {
	Each(t, func(t *testing.T, inner storage.Storage) {
		c := NewCounting(inner)
		ctx := context.Background()
		p, cc, v := []byte("p"), []byte("c"), []byte("v")
		require.NoError(t, c.Put(ctx, p, cc, v))
		require.NoError(t, c.PutBatch(ctx, []storage.Row{{PKey: p, CCols: []byte("d"), Value: v}}))
		_, _, err := c.Get(ctx, p, cc)
		require.NoError(t, err)
		require.NoError(t, c.GetBatch(ctx, p, []storage.GetItem{{CCols: cc}}))
		require.NoError(t, c.Read(ctx, p, nil, nil, func(_, _ []byte) error { return nil }))
		require.NoError(t, c.Read(ctx, p, nil, nil, func(_, _ []byte) error { return nil }))
		require.NoError(t, c.ReadPartitions(ctx, [][]byte{p}, nil, nil, func(_, _, _ []byte) error { return nil }))
		_, err = c.InsertIfNotExists(ctx, p, []byte("e"), v, 0)
		require.NoError(t, err)
		_, err = c.CompareAndSwap(ctx, p, cc, v, v, 0)
		require.NoError(t, err)
		_, err = c.CompareAndDelete(ctx, p, cc, v)
		require.NoError(t, err)
		_, err = c.ApplyBatchIf(ctx, p, nil, []storage.Row{{PKey: p, CCols: cc, Value: v}})
		require.NoError(t, err)
		_, _, err = c.QueryTTL(ctx, p, cc)
		require.NoError(t, err)
		for _, op := range faulty.AllOps() {
			want := int64(1)
			if op == faulty.OpRead {
				want = 2
			}
			assert.Equal(t, want, c.Calls(op), op)
		}
		c.Reset()
		assert.Zero(t, c.Calls(faulty.OpRead))
		assert.Panics(t, func() { c.Calls("Gett") })
	})
}
