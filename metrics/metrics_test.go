package metrics

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/apppart"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/mem"
)

// value returns the value of the counter or gauge name with the given
// labels (name=value pairs), or the sample count of a histogram; -1 if absent.
func value(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if got[labels[i]] != labels[i+1] {
					continue next
				}
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				return m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				return m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return -1
}

func TestSequencerMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	c, err := New(reg)
	require.NoError(t, err)
	m := c.Partition(3, 7)
	m.Transaction()
	m.Transaction()
	m.Busy(isequencer.BusyActualizing)
	m.Busy(isequencer.BusyUnflushed)
	m.Busy(isequencer.BusyUnflushed)
	m.Unflushed(42)
	m.Flushed(10, 2*time.Millisecond)
	m.Actualized(123, time.Second)
	m.StorageError("ReadNumbers")

	p := []string{"app", "3", "partition", "7"}
	lbl := func(kv ...string) []string { return append(append([]string(nil), p...), kv...) }
	assert.Equal(t, 2.0, value(t, reg, "cqlseq_sequencer_transactions_total", p...))
	assert.Equal(t, 1.0, value(t, reg, "cqlseq_sequencer_busy_total", lbl("reason", "actualizing")...))
	assert.Equal(t, 2.0, value(t, reg, "cqlseq_sequencer_busy_total", lbl("reason", "unflushed")...))
	assert.Equal(t, 42.0, value(t, reg, "cqlseq_sequencer_unflushed_values", p...))
	assert.Equal(t, 123.0, value(t, reg, "cqlseq_sequencer_events_replayed_total", p...))
	assert.Equal(t, 1.0, value(t, reg, "cqlseq_sequencer_storage_errors_total", lbl("op", "ReadNumbers")...))
	assert.Equal(t, 1.0, value(t, reg, "cqlseq_sequencer_flush_batch_values", p...))

	rec := httptest.NewRecorder()
	c.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, name := range []string{"cqlseq_sequencer_transactions_total", "cqlseq_sequencer_flush_batch_values_bucket",
		"cqlseq_sequencer_actualization_seconds_count", `app="3",partition="7"`} {
		assert.True(t, strings.Contains(string(body), name), "exposition lacks %s", name)
	}
}

// TestPartitionMetrics: a partition's command flow: its epoch, each
// result counted (every result has a series from the start), the latency
// of the commands that took an offset, the durable offset, and the stop
// with its reason.
func TestPartitionMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	c, err := New(reg)
	require.NoError(t, err)
	m := c.Partition(3, 7)
	p := []string{"app", "3", "partition", "7"}
	lbl := func(kv ...string) []string { return append(append([]string(nil), p...), kv...) }
	for r := range apppart.NumCommandResults {
		assert.Equal(t, 0.0, value(t, reg, "cqlseq_partition_commands_total", lbl("result", r.String())...), r.String())
	}
	m.Opened(12)
	m.Command(apppart.ResultStored, time.Millisecond)
	m.Command(apppart.ResultStored, time.Millisecond)
	m.Command(apppart.ResultUnknown, time.Second)
	m.Command(apppart.ResultBusy, 0)
	m.Command(apppart.NumCommandResults+3, 0) // out of range: counted as an error
	m.Durable(99)
	assert.Equal(t, -1.0, value(t, reg, "cqlseq_partition_stopped", lbl("reason", "conflict")...), "no series before a stop")
	m.Stopped(apppart.StopConflict)

	assert.Equal(t, 12.0, value(t, reg, "cqlseq_partition_epoch", p...))
	assert.Equal(t, 2.0, value(t, reg, "cqlseq_partition_commands_total", lbl("result", "stored")...))
	assert.Equal(t, 1.0, value(t, reg, "cqlseq_partition_commands_total", lbl("result", "unknown")...))
	assert.Equal(t, 1.0, value(t, reg, "cqlseq_partition_commands_total", lbl("result", "busy")...))
	assert.Equal(t, 1.0, value(t, reg, "cqlseq_partition_commands_total", lbl("result", "error")...))
	assert.Equal(t, 3.0, value(t, reg, "cqlseq_partition_command_seconds", p...), "busy answers are not timed")
	assert.Equal(t, 99.0, value(t, reg, "cqlseq_partition_durable_offset", p...))
	assert.Equal(t, 1.0, value(t, reg, "cqlseq_partition_stopped", lbl("reason", "conflict")...))

	// Opened again (the operator's reopening): no longer stopped; another
	// partition's stop stays.
	other := c.Partition(3, 8)
	other.Stopped(apppart.StopFenced)
	m2 := c.Partition(3, 7)
	m2.Opened(13)
	assert.Equal(t, -1.0, value(t, reg, "cqlseq_partition_stopped", lbl("reason", "conflict")...), "the reopened partition's stop is gone")
	assert.Equal(t, 13.0, value(t, reg, "cqlseq_partition_epoch", p...))
	assert.Equal(t, 1.0, value(t, reg, "cqlseq_partition_stopped", "app", "3", "partition", "8", "reason", "fenced"))
}

// TestNewTakesARegisterer: a Registerer that is not a Gatherer (labels
// wrapped around a registry) is accepted; the metrics land in the registry
// with those labels.
func TestNewTakesARegisterer(t *testing.T) {
	reg := prometheus.NewRegistry()
	c, err := New(prometheus.WrapRegistererWith(prometheus.Labels{"vvm": "a"}, reg))
	require.NoError(t, err)
	c.Partition(1, 2).Opened(5)
	assert.Equal(t, 5.0, value(t, reg, "cqlseq_partition_epoch", "app", "1", "partition", "2", "vvm", "a"))
}

func TestNewRejectsNilAndDoubleRegistration(t *testing.T) {
	_, err := New(nil)
	require.Error(t, err)
	reg := prometheus.NewRegistry()
	_, err = New(reg)
	require.NoError(t, err)
	_, err = New(reg)
	require.Error(t, err, "registering twice on one registry")
}

func TestStorageWrapperCountsCallsAndErrors(t *testing.T) {
	reg := prometheus.NewRegistry()
	c, err := New(reg)
	require.NoError(t, err)
	inner := mem.New(mem.Options{})
	st := c.Storage(inner)
	ctx := context.Background()

	require.NoError(t, st.Put(ctx, []byte("p"), []byte("c"), []byte("v")))
	v, ok, err := st.Get(ctx, []byte("p"), []byte("c"))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, []byte("v"), v)
	_, ok, err = st.Get(ctx, []byte("p"), []byte("missing"))
	require.NoError(t, err)
	assert.False(t, ok, "not found is no error")
	applied, err := st.InsertIfNotExists(ctx, []byte("p"), []byte("c"), []byte("x"), 0)
	require.NoError(t, err)
	assert.False(t, applied, "not applied is no error")

	require.NoError(t, st.Close())
	_, _, err = st.Get(ctx, []byte("p"), []byte("c"))
	require.True(t, errors.Is(err, storage.ErrClosed))

	assert.Equal(t, 0.0, value(t, reg, "cqlseq_storage_errors_total", "op", "Put"))
	assert.Equal(t, 1.0, value(t, reg, "cqlseq_storage_errors_total", "op", "Get"))
	assert.Equal(t, 0.0, value(t, reg, "cqlseq_storage_errors_total", "op", "InsertIfNotExists"))
	assert.Equal(t, 3.0, value(t, reg, "cqlseq_storage_call_seconds", "op", "Get"))
	assert.Equal(t, 1.0, value(t, reg, "cqlseq_storage_call_seconds", "op", "Put"))
	assert.Equal(t, 0.0, value(t, reg, "cqlseq_storage_call_seconds", "op", "Read"), "every operation has a series from the start")
}

// TestStorageWrapperKeepsMultiApplier: the wrapper of a
// storage.MultiApplier is one, so that its callers keep their one-request
// path (plog's group writes on bbolt), and counts the calls; the wrapper of
// another store is not.
func TestStorageWrapperKeepsMultiApplier(t *testing.T) {
	reg := prometheus.NewRegistry()
	c, err := New(reg)
	require.NoError(t, err)
	st := c.Storage(mem.New(mem.Options{}))
	ma, ok := storage.AsMultiApplier(st)
	require.True(t, ok)
	applied := make([]bool, 1)
	require.NoError(t, ma.ApplyBatchesIf(context.Background(), []storage.CondBatch{{PKey: []byte("p"), Rows: []storage.Row{{PKey: []byte("p"), CCols: []byte("c")}}}}, applied))
	assert.Equal(t, []bool{true}, applied)
	assert.Equal(t, 1.0, value(t, reg, "cqlseq_storage_call_seconds", "op", "ApplyBatchesIf"))
	assert.Error(t, ma.ApplyBatchesIf(context.Background(), nil, applied))
	assert.Equal(t, 1.0, value(t, reg, "cqlseq_storage_errors_total", "op", "ApplyBatchesIf"))

	_, ok = storage.AsMultiApplier(c.Storage(struct{ storage.Storage }{mem.New(mem.Options{})}))
	assert.False(t, ok)
}
