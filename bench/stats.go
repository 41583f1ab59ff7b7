package bench

import (
	"math"
	"sync"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Histograms track 1 µs .. 1 h with 3 significant digits (0.1% error).
// Longer values are clamped rather than dropped, so a pathological stall
// still shows up as the max instead of vanishing from the percentiles.
const (
	histMinUs   = 1
	histMaxUs   = int64(time.Hour / time.Microsecond)
	histSigFigs = 3
)

// LatencySummary is a latency distribution in milliseconds. Avg, Min and Max
// are exact; percentiles come from the histogram (microsecond resolution).
type LatencySummary struct {
	Count int64   `json:"count"`
	Min   float64 `json:"min"`
	Avg   float64 `json:"avg"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p99_9"`
	P9999 float64 `json:"p99_99"`
	Max   float64 `json:"max"`
}

// PercentilePoint is one point of a latency percentile distribution.
type PercentilePoint struct {
	Percentile float64 `json:"percentile"`
	Ms         float64 `json:"ms"`
}

// latencyStats is an HdrHistogram plus the exact sum, min and max; it is not
// safe for concurrent use (recorder guards it).
type latencyStats struct {
	h     *hdrhistogram.Histogram
	sumNs float64
	minNs int64
	maxNs int64
}

func newLatencyStats() *latencyStats {
	return &latencyStats{h: hdrhistogram.New(histMinUs, histMaxUs, histSigFigs)}
}

func (l *latencyStats) add(d time.Duration) {
	ns := int64(d)
	if ns < 0 {
		// Only possible across clocks (e2e stamps are wall time); a
		// negative latency is a clock step, count it as zero.
		ns = 0
	}
	us := ns / int64(time.Microsecond)
	us = max(us, histMinUs)
	us = min(us, histMaxUs)
	_ = l.h.RecordValue(us) // cannot fail: us is clamped into range
	if l.h.TotalCount() == 1 || ns < l.minNs {
		l.minNs = ns
	}
	l.maxNs = max(l.maxNs, ns)
	l.sumNs += float64(ns)
}

func (l *latencyStats) count() int64 { return l.h.TotalCount() }

// merge adds o's samples to l.
func (l *latencyStats) merge(o *latencyStats) {
	if o.count() == 0 {
		return
	}
	if l.count() == 0 || o.minNs < l.minNs {
		l.minNs = o.minNs
	}
	l.maxNs = max(l.maxNs, o.maxNs)
	l.sumNs += o.sumNs
	l.h.Merge(o.h)
}

func (l *latencyStats) reset() {
	l.h.Reset()
	l.sumNs, l.minNs, l.maxNs = 0, 0, 0
}

func (l *latencyStats) summary() LatencySummary {
	n := l.h.TotalCount()
	if n == 0 {
		return LatencySummary{}
	}
	q := func(p float64) float64 { return usToMs(l.h.ValueAtQuantile(p)) }
	return LatencySummary{
		Count: n,
		Min:   float64(l.minNs) / 1e6,
		Avg:   l.sumNs / float64(n) / 1e6,
		P50:   q(50),
		P90:   q(90),
		P99:   q(99),
		P999:  q(99.9),
		P9999: q(99.99),
		Max:   float64(l.maxNs) / 1e6,
	}
}

// distribution samples the percentile curve with 10 points per "nine"
// (50%, 90%, 99%, ...) up to the resolution the sample count allows, plus the
// max, which is what an HdrHistogram percentile plot shows.
func (l *latencyStats) distribution() []PercentilePoint {
	n := l.h.TotalCount()
	if n == 0 {
		return nil
	}
	var pts []PercentilePoint
	for k := 0; ; k++ {
		tail := math.Pow(10, -float64(k)/10) // fraction of samples above the point
		if tail*float64(n) < 1 {
			break
		}
		p := 100 * (1 - tail)
		pts = append(pts, PercentilePoint{Percentile: p, Ms: usToMs(l.h.ValueAtQuantile(p))})
	}
	return append(pts, PercentilePoint{Percentile: 100, Ms: float64(l.maxNs) / 1e6})
}

func usToMs(us int64) float64 { return float64(us) / 1e3 }

// Interval is one point of the per-interval series.
type Interval struct {
	// ElapsedS is the end of the interval in seconds since measuring began.
	ElapsedS      float64         `json:"elapsed_s"`
	DurationS     float64         `json:"duration_s"`
	Records       int64           `json:"records"`
	Bytes         int64           `json:"bytes"`
	Failed        int64           `json:"failed"`
	RecordsPerSec float64         `json:"records_per_sec"`
	MBPerSec      float64         `json:"mb_per_sec"`
	Latency       *LatencySummary `json:"latency_ms,omitempty"`
}

// recorder accumulates one stream of events (acks, or records read) for the
// whole run and for the current interval. Callbacks from many client
// goroutines feed it, so everything is behind one mutex; the critical
// section is a few additions.
type recorder struct {
	mu          sync.Mutex
	withLatency bool
	begin       time.Time // start of measuring
	total       *latencyStats
	n, bytes    int64
	failed      int64
	last        time.Time // time of the last success, ends the measured duration
	// cur is the open interval; prev the one closed last, kept so that a
	// short final interval can be folded into it (see snapshot).
	cur, prev window
}

// window is the data of one interval.
type window struct {
	start            time.Time
	n, bytes, failed int64
	lat              *latencyStats
}

func (w *window) reset(start time.Time) {
	w.start = start
	w.n, w.bytes, w.failed = 0, 0, 0
	if w.lat != nil {
		w.lat.reset()
	}
}

func newRecorder(withLatency bool, begin time.Time) *recorder {
	r := &recorder{withLatency: withLatency, begin: begin}
	r.cur.start, r.prev.start = begin, begin
	if withLatency {
		r.total, r.cur.lat, r.prev.lat = newLatencyStats(), newLatencyStats(), newLatencyStats()
	}
	return r
}

// observe counts one successful record and, for latency streams, its latency.
func (r *recorder) observe(bytes int, lat time.Duration, at time.Time) {
	r.mu.Lock()
	r.n++
	r.cur.n++
	r.bytes += int64(bytes)
	r.cur.bytes += int64(bytes)
	if r.withLatency {
		r.total.add(lat)
		r.cur.lat.add(lat)
	}
	if at.After(r.last) {
		r.last = at
	}
	r.mu.Unlock()
}

// observeBatch counts n records of bytes in total at once (one fetch), so the
// lock is taken once per partition batch rather than per record.
func (r *recorder) observeBatch(n int, bytes int64, lats []time.Duration, at time.Time) {
	if n == 0 {
		return
	}
	r.mu.Lock()
	r.n += int64(n)
	r.cur.n += int64(n)
	r.bytes += bytes
	r.cur.bytes += bytes
	if r.withLatency {
		for _, l := range lats {
			r.total.add(l)
			r.cur.lat.add(l)
		}
	}
	if at.After(r.last) {
		r.last = at
	}
	r.mu.Unlock()
}

func (r *recorder) fail() {
	r.mu.Lock()
	r.failed++
	r.cur.failed++
	r.mu.Unlock()
}

// snapshot closes the current interval at now and starts the next one.
func (r *recorder) snapshot(now time.Time) Interval {
	r.mu.Lock()
	defer r.mu.Unlock()
	iv := r.cur.interval(r.begin, now)
	r.cur, r.prev = r.prev, r.cur
	r.cur.reset(now)
	return iv
}

// extendLast folds the open interval into the one closed last and returns
// that one again, ending at now. The run's final interval is usually a
// sliver (stop lands just after a tick), and a rate over a few
// milliseconds is noise; merged, the series still adds up to the totals.
func (r *recorder) extendLast(now time.Time) Interval {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.prev.n += r.cur.n
	r.prev.bytes += r.cur.bytes
	r.prev.failed += r.cur.failed
	if r.withLatency {
		r.prev.lat.merge(r.cur.lat)
	}
	r.cur.reset(now)
	return r.prev.interval(r.begin, now)
}

func (w *window) interval(begin, now time.Time) Interval {
	d := now.Sub(w.start).Seconds()
	iv := Interval{
		ElapsedS:      now.Sub(begin).Seconds(),
		DurationS:     d,
		Records:       w.n,
		Bytes:         w.bytes,
		Failed:        w.failed,
		RecordsPerSec: rate(w.n, d),
		MBPerSec:      rate(w.bytes, d) / 1e6,
	}
	if w.lat != nil && w.lat.count() > 0 {
		s := w.lat.summary()
		iv.Latency = &s
	}
	return iv
}

// totals is the state of the whole run so far.
type totals struct {
	Records, Bytes, Failed int64
	Last                   time.Time
	Latency                *LatencySummary
	Distribution           []PercentilePoint
}

func (r *recorder) totals() totals {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := totals{Records: r.n, Bytes: r.bytes, Failed: r.failed, Last: r.last}
	if r.withLatency && r.total.count() > 0 {
		s := r.total.summary()
		t.Latency = &s
		t.Distribution = r.total.distribution()
	}
	return t
}
