package bench

import (
	"bytes"
	"flag"
	"math"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// TestHistogramQuantile: the broker's p99 comes from two scrapes of its histogram; the
// difference leaves out what was observed before, and the estimate lies in the right
// bucket: a power-of-two classic one, or a narrow native one when the histogram has them.
func TestHistogramQuantile(t *testing.T) {
	t.Run("classic", func(t *testing.T) { testHistogramQuantile(t, false) })
	t.Run("native", func(t *testing.T) { testHistogramQuantile(t, true) })
}

func testHistogramQuantile(t *testing.T, native bool) {
	reg := prometheus.NewRegistry()
	opts := prometheus.HistogramOpts{Name: "weir_broker_request_duration_seconds", Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18)}
	if native {
		opts.NativeHistogramBucketFactor, opts.NativeHistogramMaxBucketNumber = 1.1, 256
	}
	h := prometheus.NewHistogramVec(opts, []string{"api"})
	reg.MustRegister(h)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	for range 1000 {
		h.WithLabelValues("Produce").Observe(0.100) // before: slow, must not count
	}
	h.WithLabelValues("Fetch").Observe(0.5) // another API, must not count
	before, err := scrapeHistogram(addr, "weir_broker_request_duration_seconds", "api", "Produce")
	if err != nil {
		t.Fatal(err)
	}
	for range 980 {
		h.WithLabelValues("Produce").Observe(0.0005) // 0.4–0.8 ms bucket
	}
	for range 20 {
		h.WithLabelValues("Produce").Observe(0.005) // 3.2–6.4 ms bucket
	}
	after, err := scrapeHistogram(addr, "weir_broker_request_duration_seconds", "api", "Produce")
	if err != nil {
		t.Fatal(err)
	}
	d := after.sub(before)
	if d.total() != 1000 {
		t.Fatalf("difference holds %v observations, want 1000", d.total())
	}
	if after.native != native {
		t.Fatalf("native buckets read: %v, want %v", after.native, native)
	}
	est, lo, hi := d.quantile(0.99)
	switch {
	case !native && (lo != 3.2 || hi != 6.4 || est < lo || est > hi):
		t.Errorf("p99 = %v in [%v, %v], want within the 3.2–6.4 ms bucket", est, lo, hi)
	case native && (lo > 5 || hi < 5 || hi/lo > 1.1):
		t.Errorf("p99 = %v in [%v, %v], want a bucket at most 10 %% wide around 5 ms", est, lo, hi)
	}
	if est, _, _ := d.quantile(0.5); est < 0.4 || est > 0.8 {
		t.Errorf("p50 = %v, want within 0.4–0.8 ms", est)
	}
	if _, err := scrapeHistogram(addr, "no_such_histogram", "api", "Produce"); err == nil {
		t.Error("a missing family must be an error")
	}
}

func TestBenchMetrics(t *testing.T) {
	out := "goos: linux\nBenchmarkTierColdRead-2   \t       1\t123456789 ns/op\t 41.5 coldread_MBps\t 88.0 rawget1_MBps\t 0.4716 ratio\nPASS\n"
	m := benchMetrics(out)
	if m["coldread_MBps"] != 41.5 || m["rawget1_MBps"] != 88 || m["ratio"] != 0.4716 {
		t.Fatalf("parsed %v", m)
	}
}

// TestCPUSeconds: this process's CPU time from /proc grows when it burns CPU.
func TestCPUSeconds(t *testing.T) {
	a, err := cpuSeconds(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0.0
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
		x += math.Sqrt(x + 1)
	}
	b, err := cpuSeconds(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if b <= a {
		t.Fatalf("CPU seconds did not grow after busy work: %v -> %v (%v)", a, b, x)
	}
}

// TestSuiteTable: each row shows its ratio and a pass/fail mark from its target; rows run
// by other commands show their note.
func TestSuiteTable(t *testing.T) {
	t4, plus5, ge := atMost(4), within(5, "ms"), atLeast(0.8)
	rows := []SuiteRow{
		row("ack p99", 8, "ms", "fdatasync p99", 1, &t4),
		row("e2e p99", 12, "ms", "produce p99", 10, &plus5),
		row("cold", 40, "MB/s", "raw GET", 100, &ge),
		notRun("scale", "run by `weir bench scale`"),
	}
	if *rows[0].Pass || !*rows[1].Pass || *rows[2].Pass || rows[3].Pass != nil {
		t.Fatalf("pass marks wrong: %v %v %v", *rows[0].Pass, *rows[1].Pass, *rows[2].Pass)
	}
	var buf bytes.Buffer
	printSuiteTable(&buf, rows)
	s := buf.String()
	for _, want := range []string{"8.00", "FAIL", "pass", "≤ limit + 5 ms", "run by `weir bench scale`"} {
		if !strings.Contains(s, want) {
			t.Errorf("table lacks %q:\n%s", want, s)
		}
	}
}

func TestSuiteConfigValidate(t *testing.T) {
	c := DefaultSuiteConfig()
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	c.BindFlags(fs)
	if err := fs.Parse([]string{"--skip", "e2e,bogus"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Fatalf("want an error naming the unknown step, got %v", err)
	}
	c.Skip = "cold, scale"
	if err := c.Validate(); err != nil || !c.skips(stepCold) || !c.skips(stepScale) || c.skips(stepE2E) {
		t.Fatalf("skips: %v", err)
	}
}
