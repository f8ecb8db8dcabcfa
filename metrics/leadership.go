package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cqlseq/cqlseq/elections"
)

// leadershipKinds are the elections.EventKind values counted, bound once.
var leadershipKinds = []elections.EventKind{
	elections.EventAcquired, elections.EventRenewed, elections.EventRenewFailed, elections.EventLost, elections.EventReleased,
}

// Leadership returns an elections.Options.OnEvent (or
// orchestration.Config.OnEvent) that counts leadership events by kind in
// cqlseq_leadership_events_total{kind}: acquired, renewed, renew-failed,
// lost, released. It never blocks. Chain it with another handler by
// calling both.
func (c *Collectors) Leadership() func(elections.Event) {
	children := make(map[elections.EventKind]prometheus.Counter, len(leadershipKinds))
	for _, k := range leadershipKinds {
		children[k] = c.leadership.WithLabelValues(k.String())
	}
	return func(ev elections.Event) {
		if ch, ok := children[ev.Kind]; ok {
			ch.Inc()
		}
	}
}
