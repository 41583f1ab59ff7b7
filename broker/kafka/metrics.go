package kafka

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/internal/metricset"
)

// The front end's metrics, registered on the injected Registerer only (several brokers
// can share a process) and unregistered on Close (a broker can restart on the same one).
//
// Exported series (all prefixed weir_broker_):
//
//	request_duration_seconds{api}  histogram, read of a request to its response sent (native buckets too)
//	requests_total{api}            counter, requests answered (acks=0 produces too)
//	request_errors_total{api,error} counter, non-zero ErrorCode fields in responses
//	connections                    gauge, open client connections
//	bad_frames_total, unsupported_requests_total
//	fetch_bytes_total{topic}       record batch bytes served to fetchers
//	produce_errors_total{error}    counter, failed partition appends
type metrics struct {
	set           *metricset.Set
	requests      *prometheus.HistogramVec
	requestsTotal *prometheus.CounterVec
	requestErrors *prometheus.CounterVec
	connections   prometheus.Gauge
	badFrames     prometheus.Counter
	tlsFailures   prometheus.Counter
	unsupported   prometheus.Counter
	bytesOut      *prometheus.CounterVec
	produceErrs   *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		set: metricset.New(reg),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "weir_broker_request_duration_seconds",
			Help:    "Time from reading a request to sending its response, by API.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18),
			// Native buckets beside the classic ones (protobuf scrapes only; weir bench
			// suite reads them): about 9 % wide, so that a p99 at 1.1× the disk's
			// fdatasync can be told from 2×. 50 µs .. 1000 s needs under 200 of them.
			NativeHistogramBucketFactor:    1.1,
			NativeHistogramMaxBucketNumber: 256,
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
		tlsFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "weir_broker_tls_handshake_failures_total", Help: "Connections closed because their TLS handshake failed (bad or missing client certificate, wrong protocol, timeout)."}),
		unsupported: prometheus.NewCounter(prometheus.CounterOpts{Name: "weir_broker_unsupported_requests_total", Help: "Requests with an unknown API key or version."}),
		bytesOut:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "weir_broker_fetch_bytes_total", Help: "Record batch bytes served to fetchers, by topic."}, []string{"topic"}),
		produceErrs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "weir_broker_produce_errors_total", Help: "Partition produce failures, by Kafka error."}, []string{"error"}),
	}
	m.set.MustRegister(m.requests, m.requestsTotal, m.requestErrors, m.connections, m.badFrames, m.tlsFailures, m.unsupported, m.bytesOut, m.produceErrs)
	return m
}

func (m *metrics) close() { m.set.Close() }

// observe records one answered request: its latency, and the error codes in resp (nil for
// acks=0 produces and pre-encoded answers).
func (m *metrics) observe(key int16, d time.Duration, resp kmsg.Response) {
	api := kmsg.NameForKey(key)
	if key == InternalKey {
		api = "WeirInternal"
	}
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
