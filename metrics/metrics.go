// Package metrics exports cqlseq's observations as Prometheus metrics: a
// partition's sequencer (isequencer.Metrics) and command flow
// (apppart.Metrics), labelled app and partition, and every storage call by
// operation through an instrumenting storage.Storage wrapper.
//
// All metric names start with "cqlseq_". Children are bound once per
// partition or operation, so an observation on the hot path is one atomic
// add.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cqlseq/cqlseq/apppart"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/storage"
)

// Collectors holds cqlseq's metric vectors, registered on one registry.
type Collectors struct {
	reg prometheus.Gatherer

	transactions   *prometheus.CounterVec
	busy           *prometheus.CounterVec
	unflushed      *prometheus.GaugeVec
	unflushedMax   *prometheus.GaugeVec
	flushBatch     *prometheus.HistogramVec
	flushLatency   *prometheus.HistogramVec
	actualizeTime  *prometheus.HistogramVec
	eventsReplayed *prometheus.CounterVec
	seqStorageErrs *prometheus.CounterVec

	storageCalls  *prometheus.HistogramVec
	storageErrors *prometheus.CounterVec

	leadership *prometheus.CounterVec

	commands    *prometheus.CounterVec
	commandTime *prometheus.HistogramVec
	stopped     *prometheus.GaugeVec
	epoch       *prometheus.GaugeVec
	durableNext *prometheus.GaugeVec
}

// New creates cqlseq's collectors and registers them on reg. Handler
// serves reg if it is also a prometheus.Gatherer (a *prometheus.Registry
// is both), else prometheus.DefaultGatherer.
func New(reg prometheus.Registerer) (*Collectors, error) {
	if reg == nil {
		return nil, errors.New("metrics: nil registerer")
	}
	g, ok := reg.(prometheus.Gatherer)
	if !ok {
		g = prometheus.DefaultGatherer
	}
	part := []string{"app", "partition"}
	c := &Collectors{
		reg: g,
		transactions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cqlseq_sequencer_transactions_total",
			Help: "Sequencing transactions started (Start returned ok).",
		}, part),
		busy: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cqlseq_sequencer_busy_total",
			Help: "Start calls refused as busy, by reason (actualizing, unflushed).",
		}, []string{"app", "partition", "reason"}),
		unflushed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cqlseq_sequencer_unflushed_values",
			Help: "Accepted values not yet durable in the sequence storage.",
		}, part),
		unflushedMax: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cqlseq_sequencer_unflushed_values_limit",
			Help: "The unflushed values at which Start turns busy (Params.MaxNumUnflushedValues).",
		}, part),
		flushBatch: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "cqlseq_sequencer_flush_batch_values",
			Help:    "Values per flush write.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 9),
		}, part),
		flushLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "cqlseq_sequencer_flush_seconds",
			Help:    "Duration of successful flush writes.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 9),
		}, part),
		actualizeTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "cqlseq_sequencer_actualization_seconds",
			Help:    "Duration of completed actualizations (stored state + PLog tail replay).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}, part),
		eventsReplayed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cqlseq_sequencer_events_replayed_total",
			Help: "PLog events replayed by actualizations.",
		}, part),
		seqStorageErrs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cqlseq_sequencer_storage_errors_total",
			Help: "Failed sequence-storage calls of the sequencer, by operation (ReadNumbers fails the Next that made it; the others are retried).",
		}, []string{"app", "partition", "op"}),
		storageCalls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "cqlseq_storage_call_seconds",
			Help:    "Duration of storage calls, by operation.",
			Buckets: prometheus.ExponentialBuckets(0.00005, 4, 10),
		}, []string{"op"}),
		storageErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cqlseq_storage_errors_total",
			Help: "Failed storage calls, by operation.",
		}, []string{"op"}),
		leadership: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cqlseq_leadership_events_total",
			Help: "Leadership (lease) events by kind: acquired, renewed, renew-failed, lost, released.",
		}, []string{"kind"}),
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cqlseq_partition_commands_total",
			Help: "Commands (apppart Do) by result: stored, not_stored, unknown (the event's outcome once an offset was taken), busy, invalid, stopped, not_leader, closed, canceled, error.",
		}, []string{"app", "partition", "result"}),
		commandTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "cqlseq_partition_command_seconds",
			Help:    "Duration of the commands that took an offset (stored, not_stored, unknown), from Do to its answer.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}, part),
		stopped: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cqlseq_partition_stopped",
			Help: "1 once the partition stopped, by reason (conflict: a write found its key taken; fenced: another owner fenced it off), until it is opened again in this process: it takes no command until then.",
		}, []string{"app", "partition", "reason"}),
		epoch: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cqlseq_partition_epoch",
			Help: "The partition's ownership epoch, taken at Open.",
		}, part),
		durableNext: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cqlseq_partition_durable_offset",
			Help: "The next PLog offset below which every event of the partition is durable, after its last group write.",
		}, part),
	}
	for _, col := range []prometheus.Collector{c.transactions, c.busy, c.unflushed, c.unflushedMax, c.flushBatch, c.flushLatency,
		c.actualizeTime, c.eventsReplayed, c.seqStorageErrs, c.storageCalls, c.storageErrors, c.leadership,
		c.commands, c.commandTime, c.stopped, c.epoch, c.durableNext} {
		if err := reg.Register(col); err != nil {
			return nil, fmt.Errorf("metrics: registering: %w", err)
		}
	}
	return c, nil
}

// Handler serves the registry in the Prometheus exposition format.
func (c *Collectors) Handler() http.Handler {
	return promhttp.HandlerFor(c.reg, promhttp.HandlerOpts{})
}

// Partition returns the metrics of one application partition: its
// sequencer's (isequencer.Metrics, for apppart.OpenOptions.Sequencer) and
// its command flow's (apppart.Metrics, for apppart.OpenOptions.Metrics),
// labelled app and partition.
func (c *Collectors) Partition(app isequencer.ClusterAppID, p isequencer.PartitionID) *Partition {
	a, l := strconv.FormatUint(uint64(app), 10), strconv.FormatUint(uint64(p), 10)
	m := &Partition{
		seqMetrics: seqMetrics{
			c:              c,
			app:            a,
			partition:      l,
			transactions:   c.transactions.WithLabelValues(a, l),
			busyActualize:  c.busy.WithLabelValues(a, l, isequencer.BusyActualizing.String()),
			busyUnflushed:  c.busy.WithLabelValues(a, l, isequencer.BusyUnflushed.String()),
			unflushed:      c.unflushed.WithLabelValues(a, l),
			unflushedMax:   c.unflushedMax.WithLabelValues(a, l),
			flushBatch:     c.flushBatch.WithLabelValues(a, l),
			flushLatency:   c.flushLatency.WithLabelValues(a, l),
			actualizeTime:  c.actualizeTime.WithLabelValues(a, l),
			eventsReplayed: c.eventsReplayed.WithLabelValues(a, l),
		},
		commandTime: c.commandTime.WithLabelValues(a, l),
		epoch:       c.epoch.WithLabelValues(a, l),
		durableNext: c.durableNext.WithLabelValues(a, l),
	}
	for r := range apppart.NumCommandResults {
		m.commands[r] = c.commands.WithLabelValues(a, l, r.String())
	}
	return m
}

// Partition is one partition's metrics; see Collectors.Partition.
type Partition struct {
	seqMetrics
	commands    [apppart.NumCommandResults]prometheus.Counter
	commandTime prometheus.Observer
	epoch       prometheus.Gauge
	durableNext prometheus.Gauge
}

var (
	_ isequencer.Metrics       = (*Partition)(nil)
	_ isequencer.LimitReporter = (*Partition)(nil)
	_ apppart.Metrics          = (*Partition)(nil)
)

// Opened implements apppart.Metrics. A partition opened again in this
// process is no longer stopped: its cqlseq_partition_stopped series are
// removed.
func (m *Partition) Opened(epoch uint64) {
	m.epoch.Set(float64(epoch))
	m.c.stopped.DeletePartialMatch(prometheus.Labels{"app": m.app, "partition": m.partition})
}

// Command implements apppart.Metrics.
func (m *Partition) Command(r apppart.CommandResult, took time.Duration) {
	if r >= apppart.NumCommandResults {
		r = apppart.ResultError
	}
	m.commands[r].Inc()
	switch r {
	case apppart.ResultStored, apppart.ResultNotStored, apppart.ResultUnknown:
		m.commandTime.Observe(took.Seconds())
	}
}

// Durable implements apppart.Metrics.
func (m *Partition) Durable(next isequencer.PLogOffset) { m.durableNext.Set(float64(next)) }

// Stopped implements apppart.Metrics.
func (m *Partition) Stopped(reason apppart.StopReason) {
	m.c.stopped.WithLabelValues(m.app, m.partition, string(reason)).Set(1)
}

type seqMetrics struct {
	c              *Collectors
	app, partition string
	transactions   prometheus.Counter
	busyActualize  prometheus.Counter
	busyUnflushed  prometheus.Counter
	unflushed      prometheus.Gauge
	unflushedMax   prometheus.Gauge
	flushBatch     prometheus.Observer
	flushLatency   prometheus.Observer
	actualizeTime  prometheus.Observer
	eventsReplayed prometheus.Counter
}

func (m *seqMetrics) Transaction() { m.transactions.Inc() }

func (m *seqMetrics) Busy(r isequencer.BusyReason) {
	switch r {
	case isequencer.BusyActualizing:
		m.busyActualize.Inc()
	case isequencer.BusyUnflushed:
		m.busyUnflushed.Inc()
	}
}

func (m *seqMetrics) Unflushed(n int) { m.unflushed.Set(float64(n)) }

// UnflushedLimit implements isequencer.LimitReporter.
func (m *seqMetrics) UnflushedLimit(n int) { m.unflushedMax.Set(float64(n)) }

func (m *seqMetrics) Flushed(values int, took time.Duration) {
	m.flushBatch.Observe(float64(values))
	m.flushLatency.Observe(took.Seconds())
}

func (m *seqMetrics) Actualized(events int, took time.Duration) {
	m.actualizeTime.Observe(took.Seconds())
	m.eventsReplayed.Add(float64(events))
}

func (m *seqMetrics) StorageError(op string) {
	m.c.seqStorageErrs.WithLabelValues(m.app, m.partition, op).Inc()
}

// Storage returns st instrumented: every call's duration and failure is
// recorded by operation name ("Get", "PutBatch", ...). A not-found is not a
// failure; a conditional write that is not applied is not a failure. The
// result is a storage.Wrapper and passes storage.MultiApplier through (see
// storage.AsMultiApplier), recorded as "ApplyBatchesIf".
func (c *Collectors) Storage(st storage.Storage) storage.Storage {
	s := &instrumented{inner: st}
	for i, op := range storageOps {
		s.calls[i] = c.storageCalls.WithLabelValues(op)
		s.errs[i] = c.storageErrors.WithLabelValues(op)
	}
	return s
}

var (
	_ storage.Wrapper      = (*instrumented)(nil)
	_ storage.MultiApplier = (*instrumented)(nil)
)

// ApplyBatchesIf implements storage.MultiApplier over a wrapped
// MultiApplier; over any other storage it refuses the call
// (storage.ErrNotMultiApplier).
func (s *instrumented) ApplyBatchesIf(ctx context.Context, batches []storage.CondBatch, applied []bool) error {
	ma, ok := s.inner.(storage.MultiApplier)
	if !ok {
		return fmt.Errorf("metrics: %w", storage.ErrNotMultiApplier)
	}
	began := time.Now()
	err := ma.ApplyBatchesIf(ctx, batches, applied)
	s.done(opApplyBatchesIf, began, err)
	return err
}

// Unwrap implements storage.Wrapper.
func (s *instrumented) Unwrap() storage.Storage { return s.inner }

const (
	opGet = iota
	opGetBatch
	opPut
	opPutBatch
	opRead
	opReadPartitions
	opInsertIfNotExists
	opCompareAndSwap
	opCompareAndDelete
	opApplyBatchIf
	opQueryTTL
	opApplyBatchesIf
	numOps
)

var storageOps = [numOps]string{"Get", "GetBatch", "Put", "PutBatch", "Read", "ReadPartitions", "InsertIfNotExists",
	"CompareAndSwap", "CompareAndDelete", "ApplyBatchIf", "QueryTTL", "ApplyBatchesIf"}

type instrumented struct {
	inner storage.Storage
	calls [numOps]prometheus.Observer
	errs  [numOps]prometheus.Counter
}

var _ storage.Storage = (*instrumented)(nil)

func (s *instrumented) done(op int, began time.Time, err error) {
	s.calls[op].Observe(time.Since(began).Seconds())
	if err != nil {
		s.errs[op].Inc()
	}
}

func (s *instrumented) Get(ctx context.Context, pKey, cCols []byte) ([]byte, bool, error) {
	began := time.Now()
	v, ok, err := s.inner.Get(ctx, pKey, cCols)
	s.done(opGet, began, err)
	return v, ok, err
}

func (s *instrumented) GetBatch(ctx context.Context, pKey []byte, items []storage.GetItem) error {
	began := time.Now()
	err := s.inner.GetBatch(ctx, pKey, items)
	s.done(opGetBatch, began, err)
	return err
}

func (s *instrumented) Put(ctx context.Context, pKey, cCols, value []byte) error {
	began := time.Now()
	err := s.inner.Put(ctx, pKey, cCols, value)
	s.done(opPut, began, err)
	return err
}

func (s *instrumented) PutBatch(ctx context.Context, rows []storage.Row) error {
	began := time.Now()
	err := s.inner.PutBatch(ctx, rows)
	s.done(opPutBatch, began, err)
	return err
}

func (s *instrumented) Read(ctx context.Context, pKey, from, to []byte, cb func(cCols, value []byte) error) error {
	began := time.Now()
	err := s.inner.Read(ctx, pKey, from, to, cb)
	s.done(opRead, began, err)
	return err
}

func (s *instrumented) ReadPartitions(ctx context.Context, pKeys [][]byte, from, to []byte, cb func(pKey, cCols, value []byte) error) error {
	began := time.Now()
	err := s.inner.ReadPartitions(ctx, pKeys, from, to, cb)
	s.done(opReadPartitions, began, err)
	return err
}

func (s *instrumented) InsertIfNotExists(ctx context.Context, pKey, cCols, value []byte, ttl time.Duration) (bool, error) {
	began := time.Now()
	ok, err := s.inner.InsertIfNotExists(ctx, pKey, cCols, value, ttl)
	s.done(opInsertIfNotExists, began, err)
	return ok, err
}

func (s *instrumented) CompareAndSwap(ctx context.Context, pKey, cCols, oldValue, newValue []byte, ttl time.Duration) (bool, error) {
	began := time.Now()
	ok, err := s.inner.CompareAndSwap(ctx, pKey, cCols, oldValue, newValue, ttl)
	s.done(opCompareAndSwap, began, err)
	return ok, err
}

func (s *instrumented) CompareAndDelete(ctx context.Context, pKey, cCols, expected []byte) (bool, error) {
	began := time.Now()
	ok, err := s.inner.CompareAndDelete(ctx, pKey, cCols, expected)
	s.done(opCompareAndDelete, began, err)
	return ok, err
}

func (s *instrumented) ApplyBatchIf(ctx context.Context, pKey []byte, conds []storage.Condition, rows []storage.Row) (bool, error) {
	began := time.Now()
	ok, err := s.inner.ApplyBatchIf(ctx, pKey, conds, rows)
	s.done(opApplyBatchIf, began, err)
	return ok, err
}

func (s *instrumented) QueryTTL(ctx context.Context, pKey, cCols []byte) (time.Duration, bool, error) {
	began := time.Now()
	ttl, ok, err := s.inner.QueryTTL(ctx, pKey, cCols)
	s.done(opQueryTTL, began, err)
	return ttl, ok, err
}

// Close closes the wrapped store.
func (s *instrumented) Close() error { return s.inner.Close() }
