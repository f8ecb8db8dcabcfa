package storage_test

import (
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/metrics"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/boltdb"
	"github.com/cqlseq/cqlseq/storage/faulty"
	"github.com/cqlseq/cqlseq/storage/mem"
)

func TestProbeThroughWrappers(t *testing.T) {
	c, err := metrics.New(prometheus.NewRegistry())
	require.NoError(t, err)
	fault := func(st storage.Storage) storage.Storage {
		f, err := faulty.New(st, faulty.Options{})
		require.NoError(t, err)
		return f
	}
	m := mem.New(mem.Options{})
	b, err := boltdb.Open(filepath.Join(t.TempDir(), "b.db"), boltdb.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	for _, tc := range []struct {
		name                     string
		st                       storage.Storage
		wMulti, wOneTx, wGroupCo bool
	}{
		{"mem", m, true, true, false},
		{"metrics over faulty over mem", c.Storage(fault(m)), true, true, false},
		{"faulty over metrics over mem", fault(c.Storage(m)), true, true, false},
		{"boltdb", b, true, true, true},
		{"metrics over faulty over boltdb", c.Storage(fault(b)), true, true, true},
		{"opaque wrapper over mem", opaque{m}, false, false, false},
		{"metrics over opaque over mem", c.Storage(opaque{m}), false, false, false},
		{"a non-wrapper over boltdb", struct{ storage.Storage }{b}, false, false, false},
		{"metrics over a non-wrapper over boltdb", c.Storage(struct{ storage.Storage }{b}), false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := storage.Probe(tc.st)
			assert.Equal(t, tc.wMulti, got.MultiApplier != nil, "MultiApplier")
			if got.MultiApplier != nil {
				assert.Equal(t, tc.st, got.MultiApplier, "the outermost wrapper, whose faults and metrics apply")
			}
			assert.Equal(t, tc.wOneTx, got.PutBatchOneTransaction(), "PutBatchOneTransaction")
			assert.Equal(t, tc.wGroupCo, got.GroupCommitter != nil, "GroupCommitter")
		})
	}
	assert.Equal(t, storage.Capabilities{}, storage.Probe(passThrough{opaque{m}}), "a capability hidden anywhere on the way is not found")
}
