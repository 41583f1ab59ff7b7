package broker

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/weir-io/weir/internal/metricset"
)

// The broker's own metrics, registered on the injected Registerer only (several brokers
// can share a process) and unregistered on Close (a broker can restart on the same one).
// The front end registers the request metrics (broker/kafka), the tier weir_tier_*
// (broker/tier), the WAL weir_wal_* (wal/metrics.go), on the same Registerer.
//
// Exported series (all prefixed weir_broker_):
//
//	produce_bytes_total{topic}               record batch bytes appended (synced)
//	partitions_led                           gauge (scrape time), partitions this broker leads
//	consumer_groups{state}                   gauge (scrape time), groups it coordinates
//	consumer_group_lag{group,topic,partition} gauge (scrape time), high watermark − committed
//	consumer_group_lag_lookup_failures_total counter, scrapes that could not get a remote
//	                                         partition's high watermark (its lag is left out)
type metrics struct {
	set         *metricset.Set
	bytesIn     *prometheus.CounterVec
	lagFailures prometheus.Counter

	mu        sync.Mutex
	collector *brokerCollector // scrape-time state; nil until attach
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		set:     metricset.New(reg),
		bytesIn: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "weir_broker_produce_bytes_total", Help: "Record batch bytes appended, by topic."}, []string{"topic"}),
		lagFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_broker_consumer_group_lag_lookup_failures_total",
			Help: "Scrapes that could not read the high watermark of a partition led by another broker; those partitions' lag is missing from that scrape.",
		}),
	}
	m.set.MustRegister(m.bytesIn, m.lagFailures)
	return m
}

// attach registers the scrape-time collector (partitions led, consumer groups, lag) of b.
// Called once b's partitions and group coordinator exist.
func (m *metrics) attach(b *Broker) {
	c := newBrokerCollector(b, m.lagFailures)
	m.mu.Lock()
	m.collector = c
	m.mu.Unlock()
	m.set.MustRegister(c)
}

// close unregisters every metric and releases the collector's client.
func (m *metrics) close() {
	m.set.Close()
	m.mu.Lock()
	c := m.collector
	m.collector = nil
	m.mu.Unlock()
	if c != nil {
		c.close()
	}
}
