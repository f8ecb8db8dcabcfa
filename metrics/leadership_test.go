package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/elections"
)

func TestLeadershipCountsEventsByKind(t *testing.T) {
	reg := prometheus.NewRegistry()
	c, err := New(reg)
	require.NoError(t, err)
	on := c.Leadership()
	on(elections.Event{Kind: elections.EventAcquired})
	on(elections.Event{Kind: elections.EventRenewed})
	on(elections.Event{Kind: elections.EventRenewed})
	on(elections.Event{Kind: elections.EventLost})
	on(elections.Event{Kind: elections.EventKind(99)}) // unknown kinds are not counted
	assert.Equal(t, 1.0, value(t, reg, "cqlseq_leadership_events_total", "kind", "acquired"))
	assert.Equal(t, 2.0, value(t, reg, "cqlseq_leadership_events_total", "kind", "renewed"))
	assert.Equal(t, 1.0, value(t, reg, "cqlseq_leadership_events_total", "kind", "lost"))
	assert.Equal(t, 0.0, value(t, reg, "cqlseq_leadership_events_total", "kind", "released"), "bound at zero")
}
