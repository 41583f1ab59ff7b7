package wal

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics is nil when Config.Registerer is nil; every method accepts a nil receiver.
type metrics struct {
	reg          prometheus.Registerer
	appends      prometheus.Counter
	appendErrors prometheus.Counter
	bytesWritten prometheus.Counter
	syncs        prometheus.Counter
	syncDuration prometheus.Histogram
	groupEntries prometheus.Histogram
	groupBytes   prometheus.Histogram
	segments     prometheus.Gauge
	fenceCheck   prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &metrics{
		appends: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_wal_appends_total", Help: "WAL entries made durable.",
		}),
		appendErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_wal_append_errors_total", Help: "WAL entries whose Done got an error.",
		}),
		bytesWritten: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_wal_bytes_written_total", Help: "Framed record bytes written to WAL segments.",
		}),
		syncs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_wal_syncs_total", Help: "fdatasync calls on WAL segments for group commits.",
		}),
		syncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "weir_wal_sync_duration_seconds",
			Help:    "Duration of one group-commit fdatasync.",
			Buckets: prometheus.ExponentialBucketsRange(50e-6, 1, 16),
		}),
		groupEntries: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "weir_wal_group_commit_entries",
			Help:    "Entries written by one group commit.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 13),
		}),
		groupBytes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "weir_wal_group_commit_bytes",
			Help:    "Bytes written by one group commit.",
			Buckets: prometheus.ExponentialBuckets(256, 4, 10),
		}),
		segments: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "weir_wal_segments", Help: "Segment files of the WAL.",
		}),
		fenceCheck: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "weir_wal_fence_check_duration_seconds",
			Help:    "Duration of one fence token check (fresh open and read of FENCE) after a group commit.",
			Buckets: prometheus.ExponentialBucketsRange(5e-6, 1, 16),
		}),
	}
	m.reg = reg
	cs := m.collectors()
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, r := range cs[:i] {
				reg.Unregister(r)
			}
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, fmt.Errorf("wal: metrics already registered (one WAL per Registerer): %w", err)
			}
			return nil, fmt.Errorf("wal: registering metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.appends, m.appendErrors, m.bytesWritten, m.syncs,
		m.syncDuration, m.groupEntries, m.groupBytes, m.segments, m.fenceCheck}
}

// unregister removes the metrics so a new WAL can use the same Registerer.
func (m *metrics) unregister() {
	if m == nil {
		return
	}
	for _, c := range m.collectors() {
		m.reg.Unregister(c)
	}
}

func (m *metrics) done(err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.appendErrors.Inc()
	} else {
		m.appends.Inc()
	}
}

func (m *metrics) group(entries, bytes int) {
	if m == nil {
		return
	}
	m.bytesWritten.Add(float64(bytes))
	m.groupEntries.Observe(float64(entries))
	m.groupBytes.Observe(float64(bytes))
}

func (m *metrics) synced(seconds float64) {
	if m == nil {
		return
	}
	m.syncs.Inc()
	m.syncDuration.Observe(seconds)
}

func (m *metrics) setSegments(n int) {
	if m == nil {
		return
	}
	m.segments.Set(float64(n))
}

func (m *metrics) fenceChecked(seconds float64) {
	if m == nil {
		return
	}
	m.fenceCheck.Observe(seconds)
}
