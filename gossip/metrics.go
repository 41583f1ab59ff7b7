package gossip

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are always counted; they are exported only when Config.Registerer is set.
type metrics struct {
	membersAlive  prometheus.Gauge
	suspectEvents prometheus.Counter
	malformedMeta prometheus.Counter
	conflicts     prometheus.Counter
	joinFailures  prometheus.Counter
}

func newMetrics() *metrics {
	return &metrics{
		membersAlive: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "weir_gossip_members_alive",
			Help: "Brokers in this broker's live gossip view, itself included (alive or suspect).",
		}),
		suspectEvents: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_gossip_suspect_events_total",
			Help: "Peers gossip declared dead or that left (each fires OnLeave, a suspect report).",
		}),
		malformedMeta: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_gossip_malformed_meta_total",
			Help: "Peers ignored because their node metadata could not be decoded (counted once per distinct metadata).",
		}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_gossip_name_conflicts_total",
			Help: "Alive messages ignored because another live member at a different address claims the same broker id.",
		}),
		joinFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_gossip_join_failures_total",
			Help: "Attempts to join the seeds that reached no live peer.",
		}),
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.membersAlive, m.suspectEvents, m.malformedMeta, m.conflicts, m.joinFailures}
}

// register registers all collectors or none.
func (m *metrics) register(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	var done []prometheus.Collector
	for _, c := range m.collectors() {
		if err := reg.Register(c); err != nil {
			for _, d := range done {
				reg.Unregister(d)
			}
			return errors.Join(errors.New("gossip: registering metrics"), err)
		}
		done = append(done, c)
	}
	return nil
}

func (m *metrics) unregister(reg prometheus.Registerer) {
	if reg == nil {
		return
	}
	for _, c := range m.collectors() {
		reg.Unregister(c)
	}
}
