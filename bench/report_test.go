package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/weir-io/weir/internal/testutil"
)

// sampleResult builds an e2e-like Result from real recorders.
func sampleResult(t *testing.T) *Result {
	t.Helper()
	begin := time.Now()
	prod, cons := newRecorder(true, begin), newRecorder(true, begin)
	var pser, cser []Interval
	for sec := 1; sec <= 3; sec++ {
		for i := 0; i < 1000; i++ {
			at := begin.Add(time.Duration(sec-1)*time.Second + time.Duration(i)*time.Millisecond)
			prod.observe(1024, time.Duration(500+i*sec)*time.Microsecond, at)
			cons.observeBatch(1, 1024, []time.Duration{time.Duration(800+i*sec) * time.Microsecond}, at)
		}
		pser = append(pser, prod.snapshot(begin.Add(time.Duration(sec)*time.Second)))
		cser = append(cser, cons.snapshot(begin.Add(time.Duration(sec)*time.Second)))
	}
	pt, ct := prod.totals(), cons.totals()
	return &Result{
		Mode:      "e2e",
		Settings:  map[string]string{"topic": "t", "record-size": "1024", "rate": "1000", "acks": "all"},
		StartedAt: begin,
		Produce: &ProduceResult{RecordsSent: 3000, RecordsAcked: pt.Records, Bytes: pt.Bytes, DurationS: 3,
			RecordsPerSec: 1000, MBPerSec: 1.024, TargetRate: 1000, Latency: pt.Latency, Distribution: pt.Distribution, Intervals: pser},
		Consume: &ConsumeResult{RecordsRead: ct.Records, Bytes: ct.Bytes, DurationS: 3, RecordsPerSec: 1000, MBPerSec: 1.024,
			ReachedEnd: true, Latency: ct.Latency, Distribution: ct.Distribution, Intervals: cser},
		Disk: &DiskReport{Dir: "/wal",
			Results: []DiskResult{{WriteSize: 1024, Writes: 10, Bytes: 10240, DurationS: 1, MBPerSec: 0.01024, SyncsPerSec: 10}},
			Ratios:  []DiskRatio{{Basis: "record", WriteSize: 1024, LimitMBPerSec: 0.01024, Ratio: 100}}},
	}
}

func TestJSONShape(t *testing.T) {
	res := sampleResult(t)
	var buf bytes.Buffer
	cfg := &config{json: true}
	if err := finish(cfg, res, &buf, io.Discard); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	dec := json.NewDecoder(&buf)
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	if dec.More() {
		t.Fatal("more than one JSON value on stdout")
	}
	get := func(path ...string) any {
		var v any = m
		for _, p := range path {
			obj, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("%v: %v is not an object", path, p)
			}
			if v, ok = obj[p]; !ok {
				t.Fatalf("missing %s", strings.Join(path, "."))
			}
		}
		return v
	}
	if get("mode") != "e2e" || get("settings", "topic") != "t" {
		t.Errorf("mode/settings wrong: %v", m)
	}
	for _, k := range []string{"records_sent", "records_acked", "records_failed", "bytes", "duration_s", "records_per_sec", "mb_per_sec", "target_rate", "avg_batch_records", "avg_batch_bytes"} {
		if _, ok := get("produce", k).(float64); !ok {
			t.Errorf("produce.%s is not a number", k)
		}
	}
	if get("produce", "records_acked").(float64) != 3000 || get("consume", "records_read").(float64) != 3000 {
		t.Errorf("counts wrong")
	}
	for _, k := range []string{"count", "min", "avg", "p50", "p90", "p99", "p99_9", "p99_99", "max"} {
		if _, ok := get("produce", "latency_ms", k).(float64); !ok {
			t.Errorf("produce.latency_ms.%s missing", k)
		}
		if _, ok := get("consume", "e2e_latency_ms", k).(float64); !ok {
			t.Errorf("consume.e2e_latency_ms.%s missing", k)
		}
	}
	// Latencies are in ms: 500 µs .. 3.5 ms were recorded.
	if p50 := get("produce", "latency_ms", "p50").(float64); p50 < 0.5 || p50 > 3.5 {
		t.Errorf("p50 = %v, not in ms?", p50)
	}
	ivs := get("produce", "intervals").([]any)
	if len(ivs) != 3 {
		t.Fatalf("%d intervals", len(ivs))
	}
	iv := ivs[1].(map[string]any)
	for _, k := range []string{"elapsed_s", "duration_s", "records", "bytes", "failed", "records_per_sec", "mb_per_sec", "latency_ms"} {
		if _, ok := iv[k]; !ok {
			t.Errorf("interval lacks %s", k)
		}
	}
	if iv["records"].(float64) != 1000 || iv["elapsed_s"].(float64) != 2 {
		t.Errorf("interval = %v", iv)
	}
	if d := get("produce", "latency_distribution_ms").([]any); len(d) < 10 {
		t.Errorf("distribution has %d points", len(d))
	}
	if get("consume", "reached_end") != true {
		t.Error("reached_end")
	}
	if r := get("disk", "results").([]any)[0].(map[string]any); r["mb_per_sec"] == nil || r["sync_latency_ms"] == nil || r["syncs_per_sec"] == nil {
		t.Errorf("disk result = %v", r)
	}
	if r := get("disk", "ratios").([]any)[0].(map[string]any); r["ratio"].(float64) != 100 || r["basis"] != "record" {
		t.Errorf("disk ratio = %v", r)
	}

	// The same JSON decodes back into a Result.
	var back Result
	raw, _ := json.Marshal(res)
	if err := json.Unmarshal(raw, &back); err != nil || back.Produce.Latency.P99 != res.Produce.Latency.P99 {
		t.Fatalf("round trip: %v", err)
	}
}

func TestTextSummary(t *testing.T) {
	var buf bytes.Buffer
	if err := finish(&config{}, sampleResult(t), &buf, io.Discard); err != nil {
		t.Fatal(err)
	}
	s := buf.String()
	for _, want := range []string{"3,000 records acked", "3,000 records read", "ack latency ms:", "end-to-end latency ms:", "p99.9", "(reached end)", "10000.0% of the disk limit at 1KiB"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
}

func TestProgressLineAndFormatting(t *testing.T) {
	l := &LatencySummary{Avg: 1.5, P50: 1.25, P99: 12.5, P999: 150.4, Max: 0.0125}
	line := progressLine("produce", Interval{ElapsedS: 5, RecordsPerSec: 49999.6, MBPerSec: 51.2, Failed: 2, Latency: l})
	for _, want := range []string{"[    5.0s]", "50,000 rec/s", "51.20 MB/s", "failed 2", "avg 1.50", "p50 1.25", "p99 12.5", "p99.9 150", "max 0.013"} {
		if !strings.Contains(line, want) {
			t.Errorf("line %q lacks %q", line, want)
		}
	}
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -1234: "-1,234"} {
		if got := Commas(n); got != want {
			t.Errorf("Commas(%d) = %s", n, got)
		}
	}
}

// runProgress prints a line per interval and folds a short tail into the
// last interval.
func TestRunProgress(t *testing.T) {
	begin := time.Now()
	st := &stream{name: "produce", rec: newRecorder(true, begin)}
	stop := make(chan struct{})
	var out testutil.Buffer
	done := runProgress(stop, 40*time.Millisecond, begin, &out, st)
	// A record arrives at every check, like a paced producer, until three intervals
	// were printed: the wait ends on what runProgress printed, not on the clock, so a
	// slow machine only makes it longer. Stopping right after a tick leaves the short
	// tail to fold.
	testutil.EventuallyNoError(t, 30*time.Second, "3 progress lines", func() error {
		st.rec.observe(10, time.Millisecond, time.Now())
		if got := out.String(); strings.Count(got, "\n") < 3 {
			return fmt.Errorf("printed so far:\n%s", got)
		}
		return nil
	})
	close(stop)
	<-done
	var sum int64
	for _, iv := range st.series {
		sum += iv.Records
	}
	if tot := st.rec.totals(); sum != tot.Records || len(st.series) < 2 {
		t.Fatalf("series %d intervals summing to %d, totals %d", len(st.series), sum, tot.Records)
	}
	if n := strings.Count(out.String(), "\n"); n < len(st.series) {
		t.Fatalf("%d lines for %d intervals:\n%s", n, len(st.series), out.String())
	}
}
