package bench

import (
	"math"
	"testing"
	"time"
)

func near(got, want, relTol float64) bool {
	return math.Abs(got-want) <= relTol*math.Abs(want)
}

func TestLatencyStatsPercentiles(t *testing.T) {
	l := newLatencyStats()
	// 1..1000 ms, one sample each: percentile p is p*10 ms.
	for i := 1; i <= 1000; i++ {
		l.add(time.Duration(i) * time.Millisecond)
	}
	s := l.summary()
	if s.Count != 1000 {
		t.Fatalf("count = %d", s.Count)
	}
	checks := []struct {
		name      string
		got, want float64
	}{
		{"min", s.Min, 1}, {"avg", s.Avg, 500.5}, {"p50", s.P50, 500}, {"p90", s.P90, 900},
		{"p99", s.P99, 990}, {"p99.9", s.P999, 999}, {"p99.99", s.P9999, 1000}, {"max", s.Max, 1000},
	}
	for _, c := range checks {
		// 3 significant digits: 0.1% histogram error.
		if !near(c.got, c.want, 0.002) {
			t.Errorf("%s = %v ms, want %v", c.name, c.got, c.want)
		}
	}
}

func TestLatencyStatsEdges(t *testing.T) {
	l := newLatencyStats()
	if s := l.summary(); s != (LatencySummary{}) {
		t.Fatalf("empty summary = %+v", s)
	}
	if d := l.distribution(); d != nil {
		t.Fatalf("empty distribution = %v", d)
	}
	l.add(-time.Second)    // clock step: counted as 0
	l.add(2 * time.Hour)   // beyond the histogram: clamped, max stays exact
	l.add(time.Nanosecond) // below resolution
	s := l.summary()
	if s.Count != 3 || s.Min != 0 || s.Max != float64(2*time.Hour)/1e6 {
		t.Fatalf("summary = %+v", s)
	}
	if s.P50 <= 0 || s.P50 > 0.0011 {
		t.Fatalf("p50 = %v ms, want ~1 µs", s.P50)
	}
}

func TestDistributionShape(t *testing.T) {
	l := newLatencyStats()
	for i := 1; i <= 10000; i++ {
		l.add(time.Duration(i) * time.Microsecond)
	}
	d := l.distribution()
	if len(d) < 40 {
		t.Fatalf("only %d points for 10k samples", len(d))
	}
	if d[0].Percentile != 0 || d[len(d)-1].Percentile != 100 || d[len(d)-1].Ms != 10 {
		t.Fatalf("ends = %+v .. %+v", d[0], d[len(d)-1])
	}
	for i := 1; i < len(d); i++ {
		if d[i].Percentile <= d[i-1].Percentile || d[i].Ms < d[i-1].Ms {
			t.Fatalf("not monotonic at %d: %+v then %+v", i, d[i-1], d[i])
		}
	}
	// No point claims more resolution than the samples give: the last
	// percentile before the max leaves at least one sample above it.
	if last := d[len(d)-2].Percentile; (100-last)/100*10000 < 1 {
		t.Fatalf("percentile %v beyond resolution of 10k samples", last)
	}
}

func TestRecorderIntervals(t *testing.T) {
	begin := time.Now()
	r := newRecorder(true, begin)
	for i := 0; i < 100; i++ {
		r.observe(1000, time.Millisecond, begin.Add(time.Duration(i)*time.Millisecond))
	}
	r.fail()
	iv := r.snapshot(begin.Add(time.Second))
	if iv.Records != 100 || iv.Bytes != 100000 || iv.Failed != 1 || iv.DurationS != 1 || iv.ElapsedS != 1 {
		t.Fatalf("interval = %+v", iv)
	}
	if iv.RecordsPerSec != 100 || iv.MBPerSec != 0.1 || iv.Latency == nil || !near(iv.Latency.P50, 1, 0.002) {
		t.Fatalf("interval rates = %+v latency %+v", iv, iv.Latency)
	}
	// A short tail is folded into the previous interval.
	r.observeBatch(50, 50000, make([]time.Duration, 50), begin.Add(1100*time.Millisecond))
	ext := r.extendLast(begin.Add(1200 * time.Millisecond))
	if ext.Records != 150 || ext.Failed != 1 || !near(ext.DurationS, 1.2, 1e-9) || ext.Latency.Count != 150 {
		t.Fatalf("extended = %+v", ext)
	}
	tot := r.totals()
	if tot.Records != 150 || tot.Bytes != 150000 || tot.Failed != 1 || tot.Latency.Count != 150 {
		t.Fatalf("totals = %+v", tot)
	}
	if !tot.Last.Equal(begin.Add(1100 * time.Millisecond)) {
		t.Fatalf("last = %v", tot.Last.Sub(begin))
	}
	// An empty interval has zero rates and no latency.
	iv = r.snapshot(begin.Add(2 * time.Second))
	if iv.Records != 0 || iv.Latency != nil {
		t.Fatalf("empty interval = %+v", iv)
	}
}

func TestRecorderWithoutLatency(t *testing.T) {
	r := newRecorder(false, time.Now())
	r.observeBatch(10, 100, nil, time.Now())
	if tot := r.totals(); tot.Records != 10 || tot.Latency != nil || tot.Distribution != nil {
		t.Fatalf("totals = %+v", tot)
	}
}
