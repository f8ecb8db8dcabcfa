package idservice

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// serviceMetrics are the service's Prometheus metrics: the request
// counters and latencies, and a collector that reads the sequences' and
// generators' counters at every scrape.
type serviceMetrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	// counters and observers keep the children of requests (by
	// routeCode) and latency (by route) once looked up: the routes and
	// the status codes answered are few, and a lookup by labels hashes
	// them under a lock on every request.
	counters  sync.Map // routeCode -> prometheus.Counter
	observers sync.Map // route name -> prometheus.Observer
}

// routeCode is a request counter's labels.
type routeCode struct {
	route string
	code  int
}

func newServiceMetrics(s *Service, reg *prometheus.Registry) (*serviceMetrics, error) {
	m := &serviceMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cqlseq_service_requests_total",
			Help: "HTTP requests by route and status code.",
		}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "cqlseq_service_request_duration_seconds",
			Help:    "HTTP request latency by route.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.latency, &stateCollector{s: s}} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *serviceMetrics) observe(route string, status int, took time.Duration) {
	k := routeCode{route, status}
	c, ok := m.counters.Load(k)
	if !ok {
		c, _ = m.counters.LoadOrStore(k, m.requests.WithLabelValues(route, strconv.Itoa(status)))
	}
	c.(prometheus.Counter).Inc()
	o, ok := m.observers.Load(route)
	if !ok {
		o, _ = m.observers.LoadOrStore(route, m.latency.WithLabelValues(route))
	}
	o.(prometheus.Observer).Observe(took.Seconds())
}

var (
	descFetches = prometheus.NewDesc("cqlseq_service_chunk_fetches_total",
		"Chunks this instance allocated, by sequence.", []string{"sequence"}, nil)
	descWaits = prometheus.NewDesc("cqlseq_service_chunk_waits_total",
		"Requests that waited for a chunk, by sequence.", []string{"sequence"}, nil)
	descConflicts = prometheus.NewDesc("cqlseq_service_chunk_conflicts_total",
		"Chunk allocations lost to other instances (compare-and-swap conflicts), by sequence.", []string{"sequence"}, nil)
	descIssued = prometheus.NewDesc("cqlseq_service_sequence_issued_total",
		"Values handed out by this instance, by sequence.", []string{"sequence"}, nil)
	descHeld = prometheus.NewDesc("cqlseq_service_sequence_held",
		"Values allocated to this instance and not handed out yet (what a crash would waste), by sequence.", []string{"sequence"}, nil)
	descLease = prometheus.NewDesc("cqlseq_service_node_lease_held",
		"1 while this instance holds a node lease of the timeshard layout (serves it); 0 while it waits for one (the layout's IDs are answered 503 no_node_lease).", []string{"layout"}, nil)
	descLeaseAttempts = prometheus.NewDesc("cqlseq_service_node_lease_attempts_total",
		"Attempts to lease a node ID of the timeshard layout, by result: taken, no_free_node (every node ID leased: the layout waits, answered 503), failed (the store).", []string{"layout", "result"}, nil)
	descNode = prometheus.NewDesc("cqlseq_service_node",
		"The node ID this instance holds of the timeshard layout (absent without a lease).", []string{"layout"}, nil)
	descCounterWaits = prometheus.NewDesc("cqlseq_service_timeshard_counter_waits_total",
		"Waits of timeshard requests for the next millisecond, by layout (current lease; a batch may wait several times).", []string{"layout"}, nil)
	descRetired = prometheus.NewDesc("cqlseq_service_sequence_retired_requests_total",
		"Requests for values of a retired sequence (answered 410 sequence_retired, gRPC FailedPrecondition, Leaf id=-2), by sequence: callers still using it.", []string{"sequence"}, nil)
	descStoreUp = prometheus.NewDesc("cqlseq_service_store_up",
		"1 when the store answered the last probe.", nil, nil)
	descReady = prometheus.NewDesc("cqlseq_service_ready",
		"1 when the instance is ready (/readyz answers 200).", nil, nil)
)

// stateCollector reads the service's state at scrape time.
type stateCollector struct{ s *Service }

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descFetches, descWaits, descConflicts, descIssued, descHeld, descLease, descLeaseAttempts, descNode, descCounterWaits, descRetired, descStoreUp, descReady} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	for name, q := range c.s.sequences() {
		st := q.Stats()
		ch <- prometheus.MustNewConstMetric(descFetches, prometheus.CounterValue, float64(st.Fetches), name)
		ch <- prometheus.MustNewConstMetric(descWaits, prometheus.CounterValue, float64(st.Waits), name)
		ch <- prometheus.MustNewConstMetric(descConflicts, prometheus.CounterValue, float64(st.Conflicts), name)
		ch <- prometheus.MustNewConstMetric(descIssued, prometheus.CounterValue, float64(st.Issued), name)
		ch <- prometheus.MustNewConstMetric(descHeld, prometheus.GaugeValue, float64(st.Held), name)
	}
	for _, name := range layoutNames {
		slot := c.s.layouts[name]
		g := slot.cur.Load()
		held := g != nil && !g.lost.Load()
		ch <- prometheus.MustNewConstMetric(descLease, prometheus.GaugeValue, b2f(held), name)
		for r := range numLeaseResults {
			ch <- prometheus.MustNewConstMetric(descLeaseAttempts, prometheus.CounterValue, float64(slot.attempts[r].Load()), name, r.String())
		}
		if held {
			ch <- prometheus.MustNewConstMetric(descNode, prometheus.GaugeValue, float64(g.g.Node()), name)
			ch <- prometheus.MustNewConstMetric(descCounterWaits, prometheus.CounterValue, float64(g.g.Stats().CounterWaits), name)
		}
	}
	for name, n := range c.s.retiredRequests() {
		ch <- prometheus.MustNewConstMetric(descRetired, prometheus.CounterValue, float64(n), name)
	}
	ch <- prometheus.MustNewConstMetric(descStoreUp, prometheus.GaugeValue, b2f(c.s.storeUp.Load()))
	ch <- prometheus.MustNewConstMetric(descReady, prometheus.GaugeValue, b2f(c.s.Ready()))
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
