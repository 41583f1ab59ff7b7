package proccluster

import (
	"net/http"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Scrape reads a process's metrics: family name → sum of its samples' values (counters,
// gauges); a histogram appears as name{label=value...}_sum and _count per label set.
func Scrape(addr string) (map[string]float64, error) {
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.Metric {
			switch {
			case m.Counter != nil:
				out[name] += m.Counter.GetValue()
			case m.Gauge != nil:
				out[name] += m.Gauge.GetValue()
			case m.Histogram != nil:
				label := ""
				for _, l := range m.Label {
					label += "{" + l.GetName() + "=" + l.GetValue() + "}"
				}
				out[name+label+"_sum"] += m.Histogram.GetSampleSum()
				out[name+label+"_count"] += float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return out, nil
}

// ScrapeAll sums the metrics of procs (a process that does not answer is left out).
func ScrapeAll(procs []*Proc) map[string]float64 {
	out := map[string]float64{}
	for _, p := range procs {
		m, err := Scrape(p.Metrics)
		if err != nil {
			continue
		}
		for k, v := range m {
			out[k] += v
		}
	}
	return out
}
