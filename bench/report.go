package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Result is everything one `weir bench` run measured; --json prints it as one
// JSON object. Byte counts are record value bytes; MB = 10^6 bytes;
// latencies are in milliseconds.
type Result struct {
	Mode string `json:"mode"`
	// Settings holds the value of every flag of the subcommand after
	// presets and derived defaults were applied.
	Settings  map[string]string `json:"settings"`
	StartedAt time.Time         `json:"started_at"`
	Produce   *ProduceResult    `json:"produce,omitempty"`
	Consume   *ConsumeResult    `json:"consume,omitempty"`
	Disk      *DiskReport       `json:"disk,omitempty"`
	Txn       *TxnResult        `json:"txn,omitempty"`
}

// ProduceResult covers the records sent after warmup.
type ProduceResult struct {
	RecordsSent   int64   `json:"records_sent"`
	RecordsAcked  int64   `json:"records_acked"`
	RecordsFailed int64   `json:"records_failed"`
	Bytes         int64   `json:"bytes"`
	DurationS     float64 `json:"duration_s"`
	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"`
	// TargetRate is --rate (records/s, 0 = unlimited).
	TargetRate float64 `json:"target_rate"`
	// Average batch the client wrote (including warmup), as reported by
	// franz-go; BatchBytes is after compression.
	AvgBatchRecords float64 `json:"avg_batch_records"`
	AvgBatchBytes   float64 `json:"avg_batch_bytes"`
	// Latency is from the produce call (or its scheduled time with --rate)
	// to the ack callback.
	Latency      *LatencySummary   `json:"latency_ms,omitempty"`
	Distribution []PercentilePoint `json:"latency_distribution_ms,omitempty"`
	Intervals    []Interval        `json:"intervals"`
	// Requests splits the Produce requests' latency into the client's wait
	// and the round trip (breakdown.go).
	Requests *RequestBreakdown `json:"requests,omitempty"`
}

// ConsumeResult covers the records read after warmup (in e2e: the records
// sent after warmup).
type ConsumeResult struct {
	RecordsRead   int64   `json:"records_read"`
	Bytes         int64   `json:"bytes"`
	DurationS     float64 `json:"duration_s"`
	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"`
	// ReachedEnd is set when the consumers read every partition up to the
	// target end offsets (--stop-at-end, and always in e2e).
	ReachedEnd bool `json:"reached_end"`
	// Latency is end-to-end (receipt - send time), e2e only.
	Latency      *LatencySummary   `json:"e2e_latency_ms,omitempty"`
	Distribution []PercentilePoint `json:"e2e_latency_distribution_ms,omitempty"`
	Intervals    []Interval        `json:"intervals"`
}

// progressWriter is where progress lines go: stderr under --json, so that
// stdout holds nothing but the JSON object.
func progressWriter(cfg *config, stdout, stderr io.Writer) io.Writer {
	if cfg.json {
		return stderr
	}
	return stdout
}

// finish writes the plot (if asked) and the JSON or the text summary.
func finish(cfg *config, res *Result, stdout, progress io.Writer) error {
	if cfg.plot != "" {
		if err := WritePlot(cfg.plot, res); err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		fmt.Fprintf(progress, "plot written to %s\n", cfg.plot)
	}
	if cfg.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	printSummary(stdout, res)
	return nil
}

// stream is one recorder plus its per-interval series, as shown by progress.
type stream struct {
	name   string // "produce", "consume" or "e2e"
	rec    *recorder
	series []Interval
}

// runProgress prints one line per stream every interval from the recorders'
// begin until stop is closed, then closes the last, partial interval. The
// returned channel is closed once the series are final.
func runProgress(stop <-chan struct{}, interval time.Duration, begin time.Time, out io.Writer, streams ...*stream) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		warm := time.NewTimer(time.Until(begin))
		defer warm.Stop()
		select {
		case <-stop:
			return // stopped during warmup: nothing was measured
		case <-warm.C:
		}
		tick := time.NewTicker(interval)
		defer tick.Stop()
		lastTick := begin
		for {
			select {
			case now := <-tick.C:
				lastTick = now
				for _, s := range streams {
					iv := s.rec.snapshot(now)
					s.series = append(s.series, iv)
					fmt.Fprintln(out, progressLine(s.name, iv))
				}
			case <-stop:
				now := time.Now()
				for _, s := range streams {
					var iv Interval
					if n := len(s.series); n > 0 && now.Sub(lastTick) < interval/2 {
						iv = s.rec.extendLast(now)
						s.series[n-1] = iv
					} else {
						iv = s.rec.snapshot(now)
						s.series = append(s.series, iv)
					}
					fmt.Fprintln(out, progressLine(s.name, iv)+" (final)")
				}
				return
			}
		}
	}()
	return done
}

func progressLine(name string, iv Interval) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%7.1fs] %-7s %10s rec/s %9.2f MB/s", iv.ElapsedS, name, Commas(int64(iv.RecordsPerSec+0.5)), iv.MBPerSec)
	if iv.Failed > 0 {
		fmt.Fprintf(&b, "  failed %s", Commas(iv.Failed))
	}
	if iv.Latency != nil {
		l := iv.Latency
		fmt.Fprintf(&b, "  latency ms avg %s p50 %s p99 %s p99.9 %s max %s", ms(l.Avg), ms(l.P50), ms(l.P99), ms(l.P999), ms(l.Max))
	}
	return b.String()
}

func printSummary(w io.Writer, res *Result) {
	if p := res.Produce; p != nil {
		fmt.Fprintf(w, "\n== produce: %s records acked, %s failed, %s sent after warmup, in %.2fs\n",
			Commas(p.RecordsAcked), Commas(p.RecordsFailed), Commas(p.RecordsSent), p.DurationS)
		target := "unlimited"
		if p.TargetRate > 0 {
			target = Commas(int64(p.TargetRate)) + " rec/s"
		}
		fmt.Fprintf(w, "   throughput %s rec/s, %.2f MB/s (target %s); avg batch %.1f records, %s\n",
			Commas(int64(p.RecordsPerSec+0.5)), p.MBPerSec, target, p.AvgBatchRecords, formatBytes(p.AvgBatchBytes))
		if p.Latency != nil {
			fmt.Fprintf(w, "   ack latency ms: %s\n", latencyLine(p.Latency))
		}
		if r := p.Requests; r != nil {
			fmt.Fprintf(w, "   %s Produce requests: round trip ms: %s\n", Commas(r.Requests), latencyLine(&r.RoundTrip))
			fmt.Fprintf(w, "     waiting in the client to be written ms: %s\n", latencyLine(&r.WriteWait))
		}
	}
	if c := res.Consume; c != nil {
		name := "consume"
		if res.Mode == "e2e" {
			name = "e2e consume"
		}
		end := ""
		if c.ReachedEnd {
			end = " (reached end)"
		}
		fmt.Fprintf(w, "\n== %s: %s records read in %.2fs%s\n", name, Commas(c.RecordsRead), c.DurationS, end)
		fmt.Fprintf(w, "   throughput %s rec/s, %.2f MB/s\n", Commas(int64(c.RecordsPerSec+0.5)), c.MBPerSec)
		if c.Latency != nil {
			fmt.Fprintf(w, "   end-to-end latency ms: %s\n", latencyLine(c.Latency))
		}
	}
	if t := res.Txn; t != nil {
		printTxnTable(w, t)
	}
	if d := res.Disk; d != nil && res.Mode != "disk" {
		fmt.Fprintf(w, "\n== disk limit of %s (write+fdatasync)\n%s\n", d.Dir, diskHeader())
		for _, r := range d.Results {
			fmt.Fprintln(w, diskRow(r))
		}
		for _, r := range d.Ratios {
			fmt.Fprintf(w, "   produce throughput = %.1f%% of the disk limit at %s writes (%s: %.2f MB/s)\n",
				100*r.Ratio, humanSize(r.WriteSize), r.Basis, r.LimitMBPerSec)
		}
	}
}

func latencyLine(l *LatencySummary) string {
	return fmt.Sprintf("avg %s  p50 %s  p90 %s  p99 %s  p99.9 %s  p99.99 %s  max %s",
		ms(l.Avg), ms(l.P50), ms(l.P90), ms(l.P99), ms(l.P999), ms(l.P9999), ms(l.Max))
}

// ms prints a latency in ms with about three significant digits, which is
// what a 3-digit HdrHistogram holds.
func ms(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case v >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

// Commas formats n with thousands separators, for readable counts (weir bench's reports,
// weir admin cost's bills).
func Commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func formatBytes(v float64) string {
	switch {
	case v >= 1<<20:
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	case v >= 1<<10:
		return fmt.Sprintf("%.1f KiB", v/(1<<10))
	}
	return fmt.Sprintf("%.0f B", v)
}

// rate divides a count by seconds, 0 when no time passed.
func rate(n int64, secs float64) float64 {
	if secs <= 0 {
		return 0
	}
	return float64(n) / secs
}
