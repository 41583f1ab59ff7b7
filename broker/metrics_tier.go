package broker

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
type tierMetrics struct {
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

func newTierMetrics(m *metrics) tierMetrics {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: "weir_tier_" + name, Help: help})
	}
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: "weir_tier_" + name, Help: help})
	}
	t := tierMetrics{
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
	m.register(t.objects, t.uploadFailures, t.bytes, t.rejected, t.pending, t.lag, t.walHeld, t.trimmed, t.retained, t.deleted)
	return t
}

// updateTierGauges refreshes pending bytes, upload lag and WAL size.
func (b *Broker) updateTierGauges() {
	var pending int64
	var oldest time.Time
	for _, p := range b.ledPartitions() {
		p.mu.Lock()
		n, at := p.pendingLocked()
		p.mu.Unlock()
		pending += n
		if !at.IsZero() && (oldest.IsZero() || at.Before(oldest)) {
			oldest = at
		}
	}
	lag := 0.0
	if !oldest.IsZero() {
		lag = time.Since(oldest).Seconds()
	}
	b.metrics.tier.pending.Set(float64(pending))
	b.metrics.tier.lag.Set(lag)
	b.metrics.tier.walHeld.Set(float64(b.walHeld()))
}
