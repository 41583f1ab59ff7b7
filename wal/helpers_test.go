package wal_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-io/weir/wal"
)

const testDir = "/wal"

// memConfig returns a config on fs with small segments.
func memConfig(fs wal.FS) wal.Config {
	cfg := wal.DefaultConfig(testDir)
	cfg.FS = fs
	cfg.SegmentSize = 64 << 10
	return cfg
}

// openWAL opens and replays a WAL, closing it at the end of the test.
func openWAL(t testing.TB, cfg wal.Config) (*wal.WAL, []record, wal.ReplayInfo) {
	t.Helper()
	w, err := wal.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	recs, info := replayAll(t, w)
	return w, recs, info
}

type record struct {
	typ     byte
	payload []byte
	pos     wal.Pos
}

func (r record) String() string { return fmt.Sprintf("{%d %q @%d}", r.typ, r.payload, r.pos) }

func replayAll(t testing.TB, w *wal.WAL) ([]record, wal.ReplayInfo) {
	t.Helper()
	var recs []record
	info, err := w.Replay(func(typ byte, payload []byte, pos wal.Pos) error {
		recs = append(recs, record{typ, bytes.Clone(payload), pos})
		return nil
	})
	if err != nil {
		t.Fatalf("Replay: %v", err)
	}
	return recs, info
}

func mustAppend(t testing.TB, w *wal.WAL, typ byte, payload []byte) record {
	t.Helper()
	pos, err := w.AppendSync(context.Background(), typ, payload)
	if err != nil {
		t.Fatalf("AppendSync: %v", err)
	}
	return record{typ, bytes.Clone(payload), pos}
}

// payload returns a deterministic payload of n bytes for record i.
func payload(i, n int) []byte {
	p := make([]byte, n)
	for j := range p {
		p[j] = byte(i*7 + j*13 + 1)
	}
	return p
}

func sameRecords(t testing.TB, got, want []record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].typ != want[i].typ || got[i].pos != want[i].pos || !bytes.Equal(got[i].payload, want[i].payload) {
			t.Fatalf("record %d: got %v, want %v", i, got[i], want[i])
		}
	}
}

func checkReadAt(t testing.TB, w *wal.WAL, recs []record) {
	t.Helper()
	for i, r := range recs {
		p := make([]byte, len(r.payload))
		if err := w.ReadAt(p, r.pos); err != nil {
			t.Fatalf("ReadAt record %d at %d: %v", i, r.pos, err)
		}
		if !bytes.Equal(p, r.payload) {
			t.Fatalf("ReadAt record %d: wrong bytes", i)
		}
	}
}

// reopen closes w and opens and replays the WAL in cfg again.
func reopen(t testing.TB, w *wal.WAL, cfg wal.Config) (*wal.WAL, []record, wal.ReplayInfo) {
	t.Helper()
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return openWAL(t, cfg)
}

func newRegistry() *prometheus.Registry { return prometheus.NewRegistry() }

// gather returns counter and gauge values, and histogram sample counts, by name.
func gather(t testing.TB, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch {
			case m.Counter != nil:
				out[mf.GetName()] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[mf.GetName()] = m.GetGauge().GetValue()
			case m.Histogram != nil:
				out[mf.GetName()] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// waitABit returns a channel that fires after a short while. It is only used
// to give a goroutine the chance to do something it must not do, never to
// wait for something that must happen.
func waitABit() <-chan time.Time { return time.After(20 * time.Millisecond) }
