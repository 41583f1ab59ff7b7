package broker

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// metrics are registered on the injected Registerer only, so several brokers can share a
// process (tests) without colliding; Close unregisters them, so a broker can be restarted
// on the same Registerer.
//
// Exported series (all prefixed weir_broker_):
//
//	request_duration_seconds{api}            histogram, read of a request to its response sent
//	requests_total{api}                      counter, requests answered (acks=0 produces too)
//	request_errors_total{api,error}          counter, non-zero ErrorCode fields in responses
//	connections                              gauge, open client connections
//	bad_frames_total, unsupported_requests_total
//	produce_bytes_total{topic}, fetch_bytes_total{topic}
//	produce_errors_total{error}              counter, failed partition appends
//	partitions_led                           gauge (scrape time), partitions this broker leads
//	consumer_groups{state}                   gauge (scrape time), groups it coordinates
//	consumer_group_lag{group,topic,partition} gauge (scrape time), high watermark − committed
//	consumer_group_lag_lookup_failures_total counter, scrapes that could not get a remote
//	                                         partition's high watermark (its lag is left out)
//
// The WAL registers its own weir_wal_* metrics on the same Registerer (wal/metrics.go).
type metrics struct {
	requests      *prometheus.HistogramVec
	requestsTotal *prometheus.CounterVec
	requestErrors *prometheus.CounterVec
	connections   prometheus.Gauge
	badFrames     prometheus.Counter
	unsupported   prometheus.Counter
	bytesIn       *prometheus.CounterVec
	bytesOut      *prometheus.CounterVec
	produceErrs   *prometheus.CounterVec
	lagFailures   prometheus.Counter
	tier          tierMetrics

	reg       prometheus.Registerer
	mu        sync.Mutex
	cols      []prometheus.Collector // registered, for unregister
	collector *brokerCollector       // scrape-time state; nil until attach
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "weir_broker_request_duration_seconds",
			Help:    "Time from reading a request to sending its response, by API.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18),
		}, []string{"api"}),
		requestsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_broker_requests_total",
			Help: "Requests answered, by API (acks=0 produces, which get no answer, included).",
		}, []string{"api"}),
		requestErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_broker_request_errors_total",
			Help: "Non-zero error codes in responses, by API and Kafka error: one per ErrorCode field (top level, per topic, per partition...).",
		}, []string{"api", "error"}),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{Name: "weir_broker_connections", Help: "Open client connections."}),
		badFrames:   prometheus.NewCounter(prometheus.CounterOpts{Name: "weir_broker_bad_frames_total", Help: "Connections closed for malformed or oversized frames."}),
		unsupported: prometheus.NewCounter(prometheus.CounterOpts{Name: "weir_broker_unsupported_requests_total", Help: "Requests with an unknown API key or version."}),
		bytesIn:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "weir_broker_produce_bytes_total", Help: "Record batch bytes appended, by topic."}, []string{"topic"}),
		bytesOut:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "weir_broker_fetch_bytes_total", Help: "Record batch bytes served to fetchers, by topic."}, []string{"topic"}),
		produceErrs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "weir_broker_produce_errors_total", Help: "Partition produce failures, by Kafka error."}, []string{"error"}),
		lagFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_broker_consumer_group_lag_lookup_failures_total",
			Help: "Scrapes that could not read the high watermark of a partition led by another broker; those partitions' lag is missing from that scrape.",
		}),
		reg: reg,
	}
	m.register(m.requests, m.requestsTotal, m.requestErrors, m.connections, m.badFrames, m.unsupported,
		m.bytesIn, m.bytesOut, m.produceErrs, m.lagFailures)
	m.tier = newTierMetrics(m)
	return m
}

// register registers cs (panicking on a conflict, as before: a second broker on the same
// Registerer without its own label is a wiring bug) and remembers them for unregister.
func (m *metrics) register(cs ...prometheus.Collector) {
	if m.reg == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range cs {
		m.reg.MustRegister(c)
		m.cols = append(m.cols, c)
	}
}

// attach registers the scrape-time collector (partitions led, consumer groups, lag) of b.
// Called once b's partitions and group coordinator exist.
func (m *metrics) attach(b *Broker) {
	c := newBrokerCollector(b, m.lagFailures)
	m.mu.Lock()
	m.collector = c
	m.mu.Unlock()
	m.register(c)
}

// close unregisters every metric and releases the collector's client.
func (m *metrics) close() {
	m.mu.Lock()
	cols, c := m.cols, m.collector
	m.cols = nil
	m.mu.Unlock()
	if m.reg != nil {
		for _, col := range cols {
			m.reg.Unregister(col)
		}
	}
	if c != nil {
		c.close()
	}
}

// observe records one answered request: its latency, and the error codes in resp (nil for
// acks=0 produces and pre-encoded answers).
func (m *metrics) observe(key int16, d time.Duration, resp kmsg.Response) {
	api := kmsg.NameForKey(key)
	m.requests.WithLabelValues(api).Observe(d.Seconds())
	m.requestsTotal.WithLabelValues(api).Inc()
	if resp == nil {
		return
	}
	var t errTally
	countErrors(resp, &t)
	t.each(func(code int16, n int) {
		m.requestErrors.WithLabelValues(api, errorName(code)).Add(float64(n))
	})
}
