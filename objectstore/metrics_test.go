package objectstore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/weir-io/weir/objectstore"
	"github.com/weir-io/weir/objectstore/faulty"
)

func TestInstrumented(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	f := newFaulty(t, 1)
	in, err := objectstore.NewInstrumented(f, reg)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 1000)
	if err := in.Put(ctx, "k", bytes.NewReader(data), 1000); err != nil {
		t.Fatal(err)
	}
	if _, err := objectstore.ReadRange(ctx, in, "k", 100, 300); err != nil {
		t.Fatal(err)
	}
	// A get whose body is abandoned half-way counts only what was read.
	rc, err := in.GetRange(ctx, "k", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(rc, make([]byte, 50)); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	if _, err := in.Head(ctx, "missing"); !errors.Is(err, objectstore.ErrNotFound) {
		t.Fatal(err)
	}
	f.FailNext(faulty.Get, 1, faulty.Throttle)
	if _, err := in.GetRange(ctx, "k", 0, -1); !errors.Is(err, objectstore.ErrThrottled) {
		t.Fatal(err)
	}
	f.Inject(faulty.Rule{Ops: faulty.Get, Times: 1, Fault: faulty.BreakBody, After: 10})
	if _, err := objectstore.ReadRange(ctx, in, "k", 0, -1); !errors.Is(err, objectstore.ErrUnavailable) {
		t.Fatal(err)
	}
	if err := in.Delete(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := in.List(canceled(), ""); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}

	req := func(op, outcome string) float64 { return requests(t, reg, op, outcome) }
	for _, c := range []struct {
		op, outcome string
		want        float64
	}{
		{"put", "ok", 1}, {"get", "ok", 2}, {"get", "throttled", 1}, {"get", "unavailable", 1},
		{"head", "not_found", 1}, {"delete", "ok", 1}, {"list", "canceled", 1}, {"list", "ok", 0},
	} {
		if got := req(c.op, c.outcome); got != c.want {
			t.Errorf("requests_total{op=%s,outcome=%s} = %v, want %v", c.op, c.outcome, got, c.want)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "weir_objectstore_bytes_total":
			for _, m := range mf.GetMetric() {
				dir := m.GetLabel()[0].GetValue()
				want := map[string]float64{"upload": 1000, "download": 300 + 50 + 10}[dir]
				if m.GetCounter().GetValue() != want {
					t.Errorf("bytes_total{direction=%s} = %v, want %v", dir, m.GetCounter().GetValue(), want)
				}
			}
		case "weir_objectstore_request_duration_seconds":
			for _, m := range mf.GetMetric() {
				op := m.GetLabel()[0].GetValue()
				want := map[string]uint64{"put": 1, "get": 4, "head": 1, "delete": 1, "list": 1}[op]
				if m.GetHistogram().GetSampleCount() != want {
					t.Errorf("duration{op=%s} count = %d, want %d", op, m.GetHistogram().GetSampleCount(), want)
				}
			}
		}
	}
	if n := testutil.CollectAndCount(reg, "weir_objectstore_requests_total"); n != 9 {
		t.Errorf("%d requests_total series", n)
	}

	// One Instrumented per Registerer; after Unregister the next one can register.
	if _, err := objectstore.NewInstrumented(f, reg); err == nil {
		t.Fatal("second registration succeeded")
	}
	in.Unregister()
	in2, err := objectstore.NewInstrumented(f, reg)
	if err != nil {
		t.Fatal(err)
	}
	in2.Unregister()
	// No Registerer: a plain pass-through.
	in3, err := objectstore.NewInstrumented(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := in3.Put(ctx, "x", bytes.NewReader(nil), 0); err != nil {
		t.Fatal(err)
	}
	in3.Unregister()
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// requests returns weir_objectstore_requests_total{op,outcome} (0 when absent).
func requests(t *testing.T, reg *prometheus.Registry, op, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "weir_objectstore_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["op"] == op && labels["outcome"] == outcome {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
