package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// HostHealth is a CQL session's host-health snapshot (storage/cql's
// HealthStats, without the dependency on the driver).
type HostHealth struct {
	Attempts, Hedges, Retries, Probes, Suspicions uint64
	Suspected                                     int
}

// RegisterHostHealth exports what read returns, read at every scrape:
// cqlseq_cql_attempts_total, cqlseq_cql_hedges_total,
// cqlseq_cql_retries_total, cqlseq_cql_probes_total,
// cqlseq_cql_suspicions_total and the gauge cqlseq_cql_suspected_hosts.
// read must be safe for concurrent use. Register once per registry.
func (c *Collectors) RegisterHostHealth(read func() HostHealth) error {
	reg, ok := c.reg.(prometheus.Registerer)
	if !ok {
		return fmt.Errorf("metrics: the registry does not take collectors")
	}
	counter := func(name, help string, v func(HostHealth) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(v(read())) })
	}
	cols := []prometheus.Collector{
		counter("cqlseq_cql_attempts_total", "Statement attempts sent to a CQL host (first attempts, retries and hedges).",
			func(h HostHealth) uint64 { return h.Attempts }),
		counter("cqlseq_cql_hedges_total", "Speculative attempts: a second host tried while the first attempt was outstanding.",
			func(h HostHealth) uint64 { return h.Hedges }),
		counter("cqlseq_cql_retries_total", "Attempts after an earlier attempt of the same statement failed.",
			func(h HostHealth) uint64 { return h.Retries }),
		counter("cqlseq_cql_probes_total", "Attempts sent to a suspected host to learn whether it answers again.",
			func(h HostHealth) uint64 { return h.Probes }),
		counter("cqlseq_cql_suspicions_total", "Times a CQL host became suspected (slow or silent while its peers answered).",
			func(h HostHealth) uint64 { return h.Suspicions }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cqlseq_cql_suspected_hosts", Help: "CQL hosts suspected now: they go last in every query plan."},
			func() float64 { return float64(read().Suspected) }),
	}
	for _, col := range cols {
		if err := reg.Register(col); err != nil {
			return fmt.Errorf("metrics: registering: %w", err)
		}
	}
	return nil
}
