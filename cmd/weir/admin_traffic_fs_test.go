package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/weir-io/weir/routing"
)

// The file system's part of `weir admin traffic`: each broker's reads and writes over
// the interval, per produced byte, and the share of the provisioned throughput.
func TestAdminTrafficFileSystem(t *testing.T) {
	reg := prometheus.NewRegistry()
	tr := routing.NewTraffic("a", reg)
	defer tr.Close()
	fsb := prometheus.NewCounterVec(prometheus.CounterOpts{Name: fsMetric, Help: "test"}, []string{"op", "wal"})
	held := prometheus.NewGauge(prometheus.GaugeOpts{Name: heldMetric, Help: "test"})
	reg.MustRegister(fsb, held)
	fsb.WithLabelValues("write", "own").Add(1 << 30) // before the first scrape: not in the difference
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 3 { // between the scrapes (each scrape reads the endpoint twice)
			tr.Counter("a", routing.KindClientRecords).Add(routing.In, 10e6)
			fsb.WithLabelValues("write", "own").Add(20e6) // a zone proxy's appends and zero-fill
			fsb.WithLabelValues("read", "own").Add(10e6)  // the uploader
			fsb.WithLabelValues("read", "other").Add(20e6)
			held.Set(3e6)
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	var out bytes.Buffer
	if err := runAdminTraffic(context.Background(), []string{"--metrics", srv.URL, "--interval", "50ms", "--fs-throughput-mbps", "384", "--json"}, &out); err != nil {
		t.Fatal(err)
	}
	var rep trafficReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	fs := rep.FileSystem
	if fs == nil || fs.WriteBytes != 20e6 || fs.ReadBytes != 30e6 || fs.WritePerProduced != 2 || fs.ReadPerProduced != 3 || len(fs.Brokers) != 1 {
		t.Fatalf("file system %+v", fs)
	}
	if r := fs.Brokers[0]; r.ReadOwn != 10e6 || r.ReadOther != 20e6 {
		t.Fatalf("broker row %+v", r)
	}
	// 3 MB held at 10 MB produced over about 50 ms: about 0.015 s of traffic.
	if want := 3e6 / (10e6 / rep.IntervalSeconds); fs.WALHeldBytes != 3e6 || fs.WALHeldSeconds != want {
		t.Fatalf("WAL held %v bytes, %v s; want 3e6 bytes, %v s", fs.WALHeldBytes, fs.WALHeldSeconds, want)
	}
	// 50 MB in about 50 ms (more with the scrapes' own time): up to 1,000 MB/s.
	if fs.MBps <= 0 || fs.MBps > 1000 || fs.Share != fs.MBps/384 {
		t.Fatalf("rate %v MB/s, share %v of 384", fs.MBps, fs.Share)
	}

	out.Reset()
	if err := runAdminTraffic(context.Background(), []string{"--metrics", srv.URL, "--interval", "0", "--fs-throughput-mbps", "384"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"WAL file system", "READ OTHERS' WALS", "total: written", "WAL held: 2.9 MiB on disk"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("no %q in:\n%s", want, out.String())
		}
	}
	if err := runAdminTraffic(context.Background(), []string{"--metrics", srv.URL, "--fs-throughput-mbps", "-1"}, &out); err == nil {
		t.Fatal("negative --fs-throughput-mbps: no error")
	}
}
