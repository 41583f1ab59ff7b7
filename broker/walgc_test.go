package broker

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/wal"
	"github.com/weir-io/weir/wal/walhome"
)

// The WAL directory GC deletes nothing while the broker's lease is not valid, and never
// takes a topic missing from its view for deleted unless the view tombstones it: a
// topic created after the view looks the same.
func TestWALGCNeedsALeaseAndATombstone(t *testing.T) {
	b1, store := startLeasedBroker(t, nil)
	cfg := b1.cfg
	cfg.ListenAddr = "127.0.0.1:0"
	cfg.Registerer = prometheus.NewRegistry() // another process: seals epoch 1
	b2, err := New(cfg, store)
	if err != nil {
		t.Fatal(err)
	}
	if err := b2.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b2.Close() })
	old := walhome.EpochDir(cfg.WAL.Dir, b1.Epoch())
	if _, ok, err := wal.ReadSeal(nil, old); err != nil || !ok {
		t.Fatalf("epoch %d not sealed: %v %v", b1.Epoch(), ok, err)
	}
	created, err := store.CreateTopic(testCtx(t), metadata.TopicSpec{Name: "gone", Partitions: 1, ReplicationFactor: -1}, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.DeleteTopic(testCtx(t), "gone"); err != nil {
		t.Fatal(err)
	}
	writeIndex := func(id metadata.TopicID) {
		t.Helper()
		b, err := json.Marshal(partlog.DirIndex{FormatVersion: partlog.DirIndexVersion, Partitions: []partlog.DirIndexRef{{Topic: id, Partition: 0, LastOffset: 5}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(old, partlog.DirIndexFile), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	collect := func(what string, want int) {
		t.Helper()
		n, err := b2.collectWALDirs()
		if err != nil || n != want {
			t.Fatalf("%s: collected %d directories (%v), want %d", what, n, err, want)
		}
	}
	writeIndex(metadata.TopicID{0xee}) // a topic newer than the view, as far as it can tell
	collect("a topic the view does not know", 0)
	writeIndex(created.ID)
	store.valid.Store(false)
	collect("lease not valid", 0)
	if _, err := os.Stat(old); err != nil {
		t.Fatalf("the sealed directory is gone without a lease: %v", err)
	}
	store.valid.Store(true)
	collect("a tombstoned topic, lease valid", 1)
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Fatalf("the unneeded directory is still there: %v", err)
	}
	if ef, err := walhome.ReadToken(nil, cfg.WAL.Dir); err != nil || !ef.Fenced(b1.Epoch()) {
		t.Fatalf("token after the GC: %+v %v", ef, err)
	}
}
