package metrics_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/metrics"
	"github.com/cqlseq/cqlseq/storage/mem"
)

func TestLWTCalls(t *testing.T) {
	mc, err := metrics.New(prometheus.NewRegistry())
	require.NoError(t, err)
	st := mc.Storage(mem.New(mem.Options{}))
	ctx := context.Background()
	p, c := []byte("p"), []byte("c")
	_, err = st.InsertIfNotExists(ctx, p, c, []byte("1"), 0)
	require.NoError(t, err)
	_, err = st.CompareAndSwap(ctx, p, c, []byte("1"), []byte("2"), 0)
	require.NoError(t, err)
	_, err = st.CompareAndSwap(ctx, p, c, []byte("1"), []byte("3"), 0) // not applied: still an LWT
	require.NoError(t, err)
	_, _, err = st.Get(ctx, p, c)
	require.NoError(t, err)
	n, err := mc.LWTCalls()
	require.NoError(t, err)
	assert.Equal(t, uint64(3), n)
	calls, err := mc.StorageCalls()
	require.NoError(t, err)
	assert.Equal(t, uint64(1), calls["Get"])
	assert.Equal(t, uint64(2), calls["CompareAndSwap"])
}
