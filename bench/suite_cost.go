package bench

import (
	"context"
	"fmt"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// The e2e step's cost figures (issue 27), read from the brokers' own counters over the
// measured window: S3 PUTs per GB produced, the WAL's held bytes as seconds of traffic,
// and the WAL file system's reads and writes per produced byte.

// series names one summed series: a family and, optionally, one label's value.
type series struct{ family, label, value string }

var (
	producedBytes = series{"weir_broker_produce_bytes_total", "", ""}
	objectPuts    = series{"weir_objectstore_requests_total", "op", "put"}
	walHeld       = series{"weir_tier_wal_held_bytes", "", ""}
	fsReads       = series{"weir_broker_wal_fs_bytes_total", "op", "read"}
	fsWrites      = series{"weir_broker_wal_fs_bytes_total", "op", "write"}
)

// scrapeSums sums every series of want over the /metrics of addrs (counters and gauges).
func scrapeSums(ctx context.Context, addrs []string, want ...series) (map[series]float64, error) {
	out := make(map[series]float64, len(want))
	for _, addr := range addrs {
		err := eachFamily(ctx, addr, func(f *dto.MetricFamily) bool {
			for _, s := range want {
				if f.GetName() == s.family {
					out[s] += sumSeries(f, s)
				}
			}
			return true
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func sumSeries(f *dto.MetricFamily, s series) float64 {
	sum := 0.0
	for _, m := range f.Metric {
		if s.label != "" {
			match := false
			for _, l := range m.Label {
				match = match || (l.GetName() == s.label && l.GetValue() == s.value)
			}
			if !match {
				continue
			}
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		}
	}
	return sum
}

// costWatch samples the brokers over the measured window of a run: the counters at its
// start and end, the WAL's held bytes every 2 s in between.
type costWatch struct {
	addrs []string
	first map[series]float64
	last  map[series]float64
	held  []float64
	from  time.Time
	to    time.Time
	err   error
	done  chan struct{}
}

// watchCost starts sampling after warmup, until ctx ends or stop is called.
func watchCost(ctx context.Context, addrs []string, warmup time.Duration) (*costWatch, func()) {
	w := &costWatch{addrs: addrs, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(ctx)
	counters := []series{producedBytes, objectPuts, fsReads, fsWrites}
	go func() {
		defer close(w.done)
		select {
		case <-time.After(warmup):
		case <-ctx.Done():
			return
		}
		first, err := scrapeSums(ctx, addrs, counters...)
		if err != nil {
			w.err = err
			return
		}
		w.first, w.from = first, time.Now()
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				h, err := scrapeSums(ctx, addrs, walHeld)
				if err == nil {
					w.held = append(w.held, h[walHeld]) // read only after stop: no lock
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	stop := func() {
		cancel()
		<-w.done
		if w.first == nil {
			return
		}
		// The end of the window: scraped after the run with a fresh context.
		sctx, c2 := context.WithTimeout(context.Background(), 10*time.Second)
		defer c2()
		last, err := scrapeSums(sctx, addrs, counters...)
		if err != nil {
			w.err = err
			return
		}
		w.last, w.to = last, time.Now()
	}
	return w, stop
}

// window is the watch's produced bytes and seconds, or a row saying why there are none.
func (w *costWatch) window(name string) (produced, secs float64, bad *SuiteRow) {
	if w.err != nil || w.first == nil || w.last == nil {
		why := "not sampled (the run ended before its warmup did)"
		if w.err != nil {
			why = "metrics not read: " + w.err.Error()
		}
		r := notRun(name, why)
		return 0, 0, &r
	}
	produced = w.delta(producedBytes)
	if produced <= 0 {
		r := notRun(name, "nothing produced in the window")
		return 0, 0, &r
	}
	return produced, w.to.Sub(w.from).Seconds(), nil
}

func (w *costWatch) delta(s series) float64 { return w.last[s] - w.first[s] }

var atMostTarget = atMost(1)

// putsRow: S3 PUTs per GB produced, against issue 27's 16.
func (w *costWatch) putsRow() SuiteRow {
	const name = "S3 PUTs per GB produced (3+3 cluster, e2e rate)"
	produced, secs, bad := w.window(name)
	if bad != nil {
		return *bad
	}
	puts := w.delta(objectPuts)
	if puts == 0 {
		// Not zero PUTs per GB: no upload fell in a window shorter than the upload delay.
		return notRun(name, fmt.Sprintf("no PUT in the %.0f s window: a broker uploads at the latest every upload delay (10 s); measure longer", secs))
	}
	r := row(name, puts/(produced/1e9), "PUTs/GB", "issue 27 target", 16, &atMostTarget)
	r.Note = fmt.Sprintf("%.0f PUTs for %.1f MB in %.0f s; a broker below ~6.7 MB/s makes one PUT per upload delay (10 s) (PERFORMANCE.md)", puts, produced/1e6, secs)
	return r
}

// heldRow: the WAL's held bytes (sampled every 2 s) as seconds of the window's produce
// rate, against issue 27's 30 s.
func (w *costWatch) heldRow() SuiteRow {
	const name = "WAL held, seconds of produce (3+3 cluster)"
	produced, secs, bad := w.window(name)
	if bad != nil {
		return *bad
	}
	if len(w.held) == 0 {
		return notRun(name, "no sample of weir_tier_wal_held_bytes in the window")
	}
	rate := produced / secs
	sum, peak := 0.0, 0.0
	for _, h := range w.held {
		sum += h
		peak = max(peak, h)
	}
	r := row(name, sum/float64(len(w.held))/rate, "s", "issue 27 target", 30, &atMostTarget)
	r.Note = fmt.Sprintf("average of %d samples; peak %.1f s (%.1f MB)", len(w.held), peak/rate, peak/1e6)
	return r
}

// fsRow: bytes the brokers read from the WAL file system per produced byte; with the
// consumers in one zone, at most 1 if its replicas read each byte once.
func (w *costWatch) fsRow() SuiteRow {
	const name = "WAL file-system reads per produced byte"
	produced, _, bad := w.window(name)
	if bad != nil {
		return *bad
	}
	r := row(name, w.delta(fsReads)/produced, "B/B", "each byte read once per zone", 1, &atMostTarget)
	r.Note = fmt.Sprintf("every broker read: zone b's read replicas, uploads not served from memory; file-system writes %.2f B per produced byte", w.delta(fsWrites)/produced)
	return r
}
