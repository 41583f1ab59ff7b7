package tier

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/weir-io/weir/internal/metricset"
)

// Object tier metrics (prefix weir_tier_). S3 requests themselves are counted by the
// store's objectstore.Instrumented wrapper (weir_objectstore_*), reads by objread
// (weir_objread_*).
//
//	uploads_total, upload_failures_total, upload_bytes_total  objects put and committed
//	commits_rejected_total                                    commits the controller refused
//	upload_pending_bytes                                      synced bytes not in objects yet
//	upload_lag_seconds                                        age of the oldest of them
//	wal_held_bytes                                            WAL bytes on disk
//	wal_segments_trimmed_total                                segments removed after upload
//	retention_actions_total                                   log starts raised by retention
//	objects_deleted_total{why}                                expired, garbage, orphan, stray
type metrics struct {
	set            *metricset.Set
	objects        prometheus.Counter
	uploadFailures prometheus.Counter
	bytes          prometheus.Counter
	rejected       prometheus.Counter
	pending        prometheus.Gauge
	lag            prometheus.Gauge
	walHeld        prometheus.Gauge
	trimmed        prometheus.Counter
	retained       prometheus.Counter
	deleted        *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: "weir_tier_" + name, Help: help})
	}
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: "weir_tier_" + name, Help: help})
	}
	m := &metrics{
		set:            metricset.New(reg),
		objects:        c("uploads_total", "Objects put and committed."),
		uploadFailures: c("upload_failures_total", "Upload attempts that failed (the WAL keeps the data; retried)."),
		bytes:          c("upload_bytes_total", "Bytes of committed objects."),
		rejected:       c("commits_rejected_total", "Object commits the controller refused."),
		pending:        g("upload_pending_bytes", "Synced batch bytes of led partitions not in object storage yet."),
		lag:            g("upload_lag_seconds", "Age of the oldest synced batch not in object storage yet."),
		walHeld:        g("wal_held_bytes", "Bytes the WAL keeps on disk."),
		trimmed:        c("wal_segments_trimmed_total", "WAL segments removed once their data was in object storage."),
		retained:       c("retention_actions_total", "Log start offsets raised by retention.ms/retention.bytes."),
		deleted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "weir_tier_objects_deleted_total",
			Help: "Objects deleted from object storage, by reason (expired: below the log start; garbage: unreferenced or never committed; orphan: own unused prepared; stray: a key with no object record)."}, []string{"why"}),
	}
	m.set.MustRegister(m.objects, m.uploadFailures, m.bytes, m.rejected, m.pending, m.lag, m.walHeld, m.trimmed, m.retained, m.deleted)
	return m
}

func (m *metrics) close() { m.set.Close() }
