package broker

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// metrics are registered on the injected Registerer only, so several brokers can share a
// process (tests) without colliding.
type metrics struct {
	requests    *prometheus.HistogramVec
	connections prometheus.Gauge
	badFrames   prometheus.Counter
	unsupported prometheus.Counter
	bytesIn     *prometheus.CounterVec
	bytesOut    *prometheus.CounterVec
	produceErrs *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "weir_broker_request_duration_seconds",
			Help:    "Time from reading a request to sending its response, by API.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18),
		}, []string{"api"}),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{Name: "weir_broker_connections", Help: "Open client connections."}),
		badFrames:   prometheus.NewCounter(prometheus.CounterOpts{Name: "weir_broker_bad_frames_total", Help: "Connections closed for malformed or oversized frames."}),
		unsupported: prometheus.NewCounter(prometheus.CounterOpts{Name: "weir_broker_unsupported_requests_total", Help: "Requests with an unknown API key or version."}),
		bytesIn:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "weir_broker_produce_bytes_total", Help: "Record batch bytes appended, by topic."}, []string{"topic"}),
		bytesOut:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "weir_broker_fetch_bytes_total", Help: "Record batch bytes served to fetchers, by topic."}, []string{"topic"}),
		produceErrs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "weir_broker_produce_errors_total", Help: "Partition produce failures, by Kafka error."}, []string{"error"}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.connections, m.badFrames, m.unsupported, m.bytesIn, m.bytesOut, m.produceErrs)
	}
	return m
}

func (m *metrics) observe(key int16, d time.Duration) {
	m.requests.WithLabelValues(kmsg.NameForKey(key)).Observe(d.Seconds())
}
