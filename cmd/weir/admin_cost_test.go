package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/weir-io/weir/internal/cost"
	"github.com/weir-io/weir/routing"
)

type costJSON struct {
	Workload cost.Workload `json:"workload"`
	Table    cost.Table    `json:"table"`
	Bills    []cost.Bill   `json:"bills"`
}

func runCost(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := runAdminCost(context.Background(), args, &out)
	return out.String(), err
}

// The workload and the table from flags and a file reach the bills; the text output
// names every system and its file system's load.
func TestAdminCostCommand(t *testing.T) {
	table := filepath.Join(t.TempDir(), "prices.json")
	if err := os.WriteFile(table, []byte(`{"prices": {"s3_per_gib_month": 0.046}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runCost(t, "--produce", "200", "--consume", "400", "--retention", "24h", "--zones", "2", "--table", table, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep costJSON
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if w := rep.Workload; w.ProduceMiBps != 200 || w.ConsumeMiBps != 400 || w.Zones != 2 || w.Retention.Hours() != 24 {
		t.Fatalf("workload %+v", w)
	}
	if rep.Table.Prices.S3PerGiBMonth != 0.046 || len(rep.Bills) != 5 || rep.Bills[0].System != "Weir (FSx WAL + S3)" {
		t.Fatalf("table %+v, %d bills", rep.Table.Prices, len(rep.Bills))
	}
	// S3 storage at the file's price: 200 MiB/s for a day is 16,875 GiB.
	for _, l := range rep.Bills[0].Lines {
		if strings.HasPrefix(l.Item, "S3 storage") && (l.Quantity != 16875 || l.USD != 16875*0.046) {
			t.Fatalf("S3 storage line %+v", l)
		}
	}

	text, err := runCost(t, "--produce", "50")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Weir (FSx WAL + S3)", "Apache Kafka (RF 3, EBS, rack-aware consumers)", "AutoMQ (FSx WAL)", "WAL file system: writes", "VS WEIR", "consume 50.0 MiB/s"} {
		if !strings.Contains(text, want) {
			t.Fatalf("no %q in:\n%s", want, text)
		}
	}

	// --print-table prints the defaults, which read back as they are.
	printed, err := runCost(t, "--print-table")
	if err != nil {
		t.Fatal(err)
	}
	back, err := cost.ReadTable(strings.NewReader(printed), cost.Table{})
	if err != nil || !reflect.DeepEqual(back, cost.DefaultTable()) {
		t.Fatalf("printed table reads back as %+v (%v)", back, err)
	}

	// Bad input: a misspelt field, a missing file, a bad workload, an argument.
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"prices": {"s3_per_gb_month": 0.02}}`), 0o644)
	if _, err := runCost(t, "--table", bad); err == nil || !strings.Contains(err.Error(), "s3_per_gb_month") || !strings.Contains(err.Error(), bad) {
		t.Fatalf("misspelt field: %v", err)
	}
	if _, err := runCost(t, "--table", filepath.Join(t.TempDir(), "none.json")); err == nil {
		t.Fatal("missing table: no error")
	}
	if _, err := runCost(t, "--zones", "0"); err == nil {
		t.Fatal("0 zones: no error")
	}
	if _, err := runCost(t, "extra"); err == nil {
		t.Fatal("an argument: no error")
	}
}

// --metrics takes the rates and the cross-zone share from the brokers' counters over
// the interval.
func TestAdminCostFromMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	tr := routing.NewTraffic("a", reg)
	defer tr.Close()
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 2 { // between the scrapes
			tr.Counter("a", routing.KindClientRecords).Add(routing.In, 30<<20)
			tr.Counter("a", routing.KindClientRecords).Add(routing.Out, 60<<20)
			tr.Counter("b", routing.KindPeer).Add(routing.Out, 90<<10) // 1/1024 of the record bytes crosses
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	out, err := runCost(t, "--metrics", srv.URL, "--interval", "100ms", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep costJSON
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// 30 MiB produced and 60 consumed in about 0.1 s (the scrapes' own time lowers it).
	if w := rep.Workload; w.ProduceMiBps > 300 || w.ProduceMiBps < 100 || w.ConsumeMiBps != 2*w.ProduceMiBps {
		t.Fatalf("workload %+v from the counters", w)
	}
	if f := rep.Table.Assumptions.WeirCrossZoneFraction; f != 1.0/1024 {
		t.Fatalf("cross-zone share %v, want 1/1024", f)
	}

	idle := httptest.NewServer(promhttp.HandlerFor(prometheus.NewRegistry(), promhttp.HandlerOpts{}))
	defer idle.Close()
	if _, err := runCost(t, "--metrics", idle.URL, "--interval", "10ms"); err == nil {
		t.Fatal("no counters: no error")
	}
	if _, err := runCost(t, "--metrics", srv.URL, "--interval", "0"); err == nil {
		t.Fatal("--interval 0 with --metrics: no error")
	}
}
