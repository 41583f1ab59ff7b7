package objread

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Request purposes (label values of requests_total and fetched_bytes_total).
const (
	purposeIndex     = "index"     // footer/index GETs (and a HEAD when a ref has no size)
	purposeBlock     = "block"     // block GETs of a foreground Read
	purposeReadahead = "readahead" // block GETs of background readahead
)

// Cache kinds (label values).
const (
	kindIndex = "index"
	kindBlock = "block"
)

// metrics are always created so the code never checks for nil; they are registered
// only when Config.Registerer is set, and unregistered by Close, so that several
// Readers (tests, two brokers in one process) never share state.
type metrics struct {
	reg        prometheus.Registerer
	collectors []prometheus.Collector

	hits      *prometheus.CounterVec // {kind}
	misses    *prometheus.CounterVec // {kind}
	coalesced *prometheus.CounterVec // {kind}
	requests  *prometheus.CounterVec // {purpose}
	fetched   *prometheus.CounterVec // {purpose}
	readahead *prometheus.CounterVec // {result}
	served    prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, cachedBytes func(kind string) float64) (*metrics, error) {
	cv := func(name, help, label string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "weir_objread_" + name, Help: help}, []string{label})
	}
	m := &metrics{
		reg:       reg,
		hits:      cv("cache_hits_total", "Lookups answered by the cache, by kind (index, block).", "kind"),
		misses:    cv("cache_misses_total", "Lookups that had to fetch from the object store, by kind.", "kind"),
		coalesced: cv("cache_coalesced_total", "Lookups that waited for a fetch another reader had in flight, by kind.", "kind"),
		requests:  cv("requests_total", "Object store requests issued, by purpose (index, block, readahead).", "purpose"),
		fetched:   cv("fetched_bytes_total", "Bytes read from the object store, by purpose.", "purpose"),
		readahead: cv("readahead_blocks_total", "Blocks fetched by readahead, by result: used by a read, wasted (evicted or forgotten unread), skipped (no free readahead slot; counts readaheads, not blocks).", "result"),
		served: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_objread_read_bytes_total", Help: "Record batch bytes returned by Read.",
		}),
	}
	m.collectors = []prometheus.Collector{m.hits, m.misses, m.coalesced, m.requests, m.fetched, m.readahead, m.served}
	for _, kind := range []string{kindIndex, kindBlock} {
		m.collectors = append(m.collectors, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "weir_objread_cache_bytes",
			Help:        "Bytes held by the cache, by kind (index sizes are estimates of the parsed index).",
			ConstLabels: prometheus.Labels{"kind": kind},
		}, func() float64 { return cachedBytes(kind) }))
		m.hits.WithLabelValues(kind)
		m.misses.WithLabelValues(kind)
		m.coalesced.WithLabelValues(kind)
	}
	for _, p := range []string{purposeIndex, purposeBlock, purposeReadahead} {
		m.requests.WithLabelValues(p)
		m.fetched.WithLabelValues(p)
	}
	for _, r := range []string{"used", "wasted", "skipped"} {
		m.readahead.WithLabelValues(r)
	}
	if reg == nil {
		return m, nil
	}
	for i, c := range m.collectors {
		if err := reg.Register(c); err != nil {
			for _, r := range m.collectors[:i] {
				reg.Unregister(r)
			}
			return nil, fmt.Errorf("objread: registering metrics (one Reader per Registerer): %w", err)
		}
	}
	return m, nil
}

func (m *metrics) unregister() {
	if m.reg == nil {
		return
	}
	for _, c := range m.collectors {
		m.reg.Unregister(c)
	}
}
