package bench

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// scrapeSums adds a series over every label set that matches and over every broker, and
// leaves out the other label values.
func TestScrapeSums(t *testing.T) {
	var addrs []string
	for i := 0; i < 2; i++ {
		reg := prometheus.NewRegistry()
		req := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "weir_objectstore_requests_total"}, []string{"op"})
		held := prometheus.NewGauge(prometheus.GaugeOpts{Name: "weir_tier_wal_held_bytes"})
		reg.MustRegister(req, held)
		req.WithLabelValues("put").Add(float64(3 + i))
		req.WithLabelValues("get").Add(100)
		held.Set(1000)
		srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		t.Cleanup(srv.Close)
		addrs = append(addrs, strings.TrimPrefix(srv.URL, "http://"))
	}
	got, err := scrapeSums(context.Background(), addrs, objectPuts, walHeld, producedBytes)
	if err != nil {
		t.Fatal(err)
	}
	if got[objectPuts] != 7 || got[walHeld] != 2000 || got[producedBytes] != 0 {
		t.Fatalf("sums %v, want puts 7, held 2000, produced 0", got)
	}
}

// costRows: PUTs per GB, held seconds and file-system reads per byte from the window's
// deltas, each judged against its target.
func TestCostRows(t *testing.T) {
	from := time.Unix(1000, 0)
	w := &costWatch{
		first: map[series]float64{producedBytes: 1e9, objectPuts: 10, fsReads: 0, fsWrites: 1e9},
		last:  map[series]float64{producedBytes: 3e9, objectPuts: 50, fsReads: 1e9, fsWrites: 3e9},
		held:  []float64{400e6, 800e6}, // 600 MB on average at 2e9 / 100 s = 20 MB/s: 30 s
		from:  from, to: from.Add(100 * time.Second),
	}
	rows := []SuiteRow{w.putsRow(), w.heldRow(), w.fsRow()}
	want := []struct {
		value float64
		pass  bool
	}{{20, false}, {30, true}, {0.5, true}}
	for i, r := range rows {
		if r.Value < want[i].value*0.999 || r.Value > want[i].value*1.001 || r.Pass == nil || *r.Pass != want[i].pass {
			t.Fatalf("row %q: value %v pass %v, want %v pass %v", r.Name, r.Value, r.Pass, want[i].value, want[i].pass)
		}
	}
	if r := (&costWatch{}).putsRow(); r.Pass != nil || r.Note == "" {
		t.Fatalf("an unsampled watch: %+v, want a row not run", r)
	}
}
