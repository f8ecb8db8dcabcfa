package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRegisterHostHealthReadsAtEveryScrape(t *testing.T) {
	reg := prometheus.NewRegistry()
	c, err := New(reg)
	require.NoError(t, err)
	h := HostHealth{Attempts: 10, Hedges: 2, Retries: 1, Probes: 3, Suspicions: 1, Suspected: 1}
	require.NoError(t, c.RegisterHostHealth(func() HostHealth { return h }))

	mfs, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch {
			case m.Counter != nil:
				got[mf.GetName()] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				got[mf.GetName()] = m.GetGauge().GetValue()
			}
		}
	}
	assert.InDelta(t, 10, got["cqlseq_cql_attempts_total"], 0)
	assert.InDelta(t, 2, got["cqlseq_cql_hedges_total"], 0)
	assert.InDelta(t, 1, got["cqlseq_cql_suspected_hosts"], 0)

	h.Suspected, h.Attempts = 0, 12
	mfs, err = reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "cqlseq_cql_suspected_hosts" {
			assert.InDelta(t, 0, mf.GetMetric()[0].GetGauge().GetValue(), 0, "read again at the next scrape")
		}
	}
	assert.Error(t, c.RegisterHostHealth(func() HostHealth { return h }), "twice on one registry")
}
