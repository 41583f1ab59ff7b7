package broker

import (
	"sync"
	"time"

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
//	wal_read_bytes_total{source}             WAL payload bytes scanned to load partitions (own|other)
//	wal_fs_bytes_total{op,wal}               bytes read and written in files under the WAL root
//	                                         (read|write; own|other WAL): the shared file system's load
//	recovered_partitions_total               partitions taken over from a fenced broker and served
//	recovery_read_bytes_total                bytes scanned of fenced brokers' WALs by recoveries
//	wal_dirs_deleted_total                   sealed WAL directories deleted (all of them in objects)
//	proxy_links_total{result}                batches produced here as a zone proxy, by outcome
//	proxy_link_seconds                       one link request's round trip to the leader
//	proxy_produce_seconds                    a proxied batch from WAL append to the leader's answer
//	group_load_seconds                       loading one __consumer_offsets partition's groups
//	group_compactions_total                  compactions of __consumer_offsets partitions
//	recovery_seconds{phase}                  seal, scan, complete: one recovery of a fenced
//	                                         broker's partitions; total: from seeing a partition
//	                                         Recovering to serving it
//	partitions_led                           gauge (scrape time), partitions this broker leads
//	consumer_groups{state}                   gauge (scrape time), groups it coordinates
//	consumer_group_lag{group,topic,partition} gauge (scrape time), high watermark − committed
//	consumer_group_lag_lookup_failures_total counter, scrapes that could not get a remote
//	                                         partition's high watermark (its lag is left out)
type metrics struct {
	set            *metricset.Set
	bytesIn        *prometheus.CounterVec
	lagFailures    prometheus.Counter
	walReadBytes   *prometheus.CounterVec
	walFSBytes     *prometheus.CounterVec
	recovered      prometheus.Counter
	recoveryRead   prometheus.Counter
	recoverySecs   *prometheus.HistogramVec
	walDirsDeleted prometheus.Counter
	links          *prometheus.CounterVec
	linkSeconds    prometheus.Histogram
	proxySeconds   prometheus.Histogram
	groupLoadSecs  prometheus.Histogram
	// groupCompactions counts compactions of __consumer_offsets partitions.
	groupCompactions prometheus.Counter

	self int32 // for walRead's own/other label

	mu        sync.Mutex
	collector *brokerCollector // scrape-time state; nil until attach
}

func newMetrics(reg prometheus.Registerer, self int32) *metrics {
	m := &metrics{
		self:    self,
		set:     metricset.New(reg),
		bytesIn: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "weir_broker_produce_bytes_total", Help: "Record batch bytes appended, by topic."}, []string{"topic"}),
		lagFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_broker_consumer_group_lag_lookup_failures_total",
			Help: "Scrapes that could not read the high watermark of a partition led by another broker; those partitions' lag is missing from that scrape.",
		}),
	}
	m.walReadBytes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "weir_broker_wal_read_bytes_total",
		Help: "WAL payload bytes scanned to load partitions, by whose WAL (own: this broker's earlier epochs; other: other brokers')."}, []string{"source"})
	m.walFSBytes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "weir_broker_wal_fs_bytes_total",
		Help: "Bytes this broker read and wrote in files under the WAL root, by op (read, write) and whose WAL (own, other): its share of the shared file system's throughput. Own writes include a zone proxy's appends and the zero-fill of preallocated segments; reads include the uploader's, loads and recoveries."},
		[]string{"op", "wal"})
	m.recovered = prometheus.NewCounter(prometheus.CounterOpts{Name: "weir_broker_recovered_partitions_total",
		Help: "Partitions taken over from a fenced broker, recovered from its WAL and served."})
	m.recoveryRead = prometheus.NewCounter(prometheus.CounterOpts{Name: "weir_broker_recovery_read_bytes_total",
		Help: "Bytes scanned of fenced brokers' WALs by recoveries (nothing is copied: this is read once)."})
	m.recoverySecs = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "weir_broker_recovery_seconds",
		Help:    "Recovery of partitions from a fenced broker's WAL, by phase: seal, scan, complete (one pass over a WAL); total (per partition, from seeing it Recovering to serving it).",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}, []string{"phase"})
	m.walDirsDeleted = prometheus.NewCounter(prometheus.CounterOpts{Name: "weir_broker_wal_dirs_deleted_total",
		Help: "Sealed WAL directories (a fenced broker's, or this broker's own from earlier processes) deleted once object storage held all they held."})
	m.links = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "weir_broker_proxy_links_total",
		Help: "Batches this broker produced as a zone proxy, by the leader's answer: ok, refused (an error code passed on to the client; not in the log), unacked (written at the leader but not acked: an error passed on, the batch kept until uploaded), lost (no answer: outcome unknown until a session fence), abandoned (the answer no longer awaited: the leader moved or was fenced, or this broker's lease lapsed; NOT_LEADER_OR_FOLLOWER to the client, the batch kept until a session fence), unavailable (leader unreachable)."}, []string{"result"})
	m.linkSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "weir_broker_proxy_link_seconds",
		Help: "Round trip of one link request to a partition's leader in another zone.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18)})
	m.proxySeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "weir_broker_proxy_produce_seconds",
		Help: "A proxied batch from its append to this broker's WAL to the leader's answer.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18)})
	m.groupLoadSecs = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "weir_broker_group_load_seconds",
		Help: "Loading the groups of one __consumer_offsets partition this broker came to lead (its groups answer COORDINATOR_LOAD_IN_PROGRESS meanwhile).", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)})
	m.groupCompactions = prometheus.NewCounter(prometheus.CounterOpts{Name: "weir_broker_group_compactions_total",
		Help: "Compactions of a __consumer_offsets partition: every group's state written again and the log start raised past the older records."})
	m.set.MustRegister(m.links, m.linkSeconds, m.proxySeconds, m.groupLoadSecs, m.groupCompactions)
	m.set.MustRegister(m.bytesIn, m.lagFailures, m.walReadBytes, m.walFSBytes, m.recovered, m.recoveryRead, m.recoverySecs, m.walDirsDeleted)
	return m
}

// walRead counts bytes the loader scanned of broker's WAL.
func (m *metrics) walRead(broker int32, n int) {
	src := "other"
	if broker == m.self {
		src = "own"
	}
	m.walReadBytes.WithLabelValues(src).Add(float64(n))
}

func (m *metrics) groupLoad(d time.Duration) { m.groupLoadSecs.Observe(d.Seconds()) }

func (m *metrics) recoveryPhase(phase string, d time.Duration) {
	m.recoverySecs.WithLabelValues(phase).Observe(d.Seconds())
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

// close unregisters every metric.
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
