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
//	compaction_bytes_cleaned_total                            bytes of ranges the cleaner read and rewrote
//	compaction_objects_written_total                          objects the cleaner committed in place of ranges
//	compaction_records_removed_total                          records (and markers) the cleaner removed
//	compaction_failures_total                                 cleaner passes that failed (the old objects serve)
//	compaction_dirty_bytes                                    bytes of led compacted partitions not cleaned yet (the cleaner's lag)
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

	cleanedBytes   prometheus.Counter
	cleanedObjects prometheus.Counter
	cleanedRecords prometheus.Counter
	cleanFailures  prometheus.Counter
	dirtyBytes     prometheus.Gauge
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
	m.cleanedBytes = c("compaction_bytes_cleaned_total", "Bytes of object ranges the log cleaner read and rewrote.")
	m.cleanedObjects = c("compaction_objects_written_total", "Objects the log cleaner committed in place of object ranges.")
	m.cleanedRecords = c("compaction_records_removed_total", "Records and transaction markers the log cleaner removed.")
	m.cleanFailures = c("compaction_failures_total", "Log cleaner passes that failed or were refused (the old objects keep serving).")
	m.dirtyBytes = g("compaction_dirty_bytes", "Bytes of led compacted partitions' object ranges not cleaned yet (the cleaner's lag).")
	m.set.MustRegister(m.cleanedBytes, m.cleanedObjects, m.cleanedRecords, m.cleanFailures, m.dirtyBytes)
	m.set.MustRegister(m.objects, m.uploadFailures, m.bytes, m.rejected, m.pending, m.lag, m.walHeld, m.trimmed, m.retained, m.deleted)
	return m
}

func (m *metrics) close() { m.set.Close() }
