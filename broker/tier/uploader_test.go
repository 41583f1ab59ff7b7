package tier

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/internal/kafkatest"
	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/objectstore/localfs"
	"github.com/weir-io/weir/wal"
)

// recordingManifest records the ranges of every commit.
type recordingManifest struct {
	metadata.ObjectManifest
	mu      sync.Mutex
	commits [][]metadata.PartitionRange
}

func (m *recordingManifest) CommitObject(ctx context.Context, id uint64, size int64, ranges []metadata.PartitionRange) error {
	m.mu.Lock()
	m.commits = append(m.commits, ranges)
	m.mu.Unlock()
	return m.ObjectManifest.CommitObject(ctx, id, size, ranges)
}

// noReader is never read: the batches stay in the tail cache.
type noReader struct{}

func (noReader) ReadAt([]byte, wal.Pos) error { panic("read from the WAL") }

// Every range carries its partition's producer snapshot as of its end, and partitions
// whose snapshots would make a shared object's commit heavier than
// metadata.MaxCommitRanges are split over several commits, each accepted.
func TestUploadCarriesSnapshotsWithinCommitWeight(t *testing.T) {
	// Eight partitions of 1,000 producers each: a weight of 2,001 per range, 16,008 in
	// all, just above the bound.
	const nParts = 8
	cfg := DefaultConfig()
	cfg.MaxUploadDelay = time.Nanosecond
	tr, rec, meta, _ := multiRig(t, cfg, nParts, metadata.MaxSnapshotProducers, func(j int) []byte {
		return kafkatest.Batch(int64(j), 0, 0, []byte("v"))
	})
	uploadDue(t, tr)
	if len(rec.commits) != 2 {
		t.Fatalf("%d commits, want 2", len(rec.commits))
	}
	ranges := 0
	for _, c := range rec.commits {
		if w := metadata.CommitWeight(c); w > metadata.MaxCommitRanges {
			t.Fatalf("a commit of weight %d", w)
		}
		ranges += len(c)
	}
	if ranges != nParts {
		t.Fatalf("%d ranges committed, want %d", ranges, nParts)
	}
	for i, mp := range meta.View().Topics["t"].Partitions {
		s := mp.Producers
		if mp.UploadedThrough() != metadata.MaxSnapshotProducers || s == nil || s.Offset != metadata.MaxSnapshotProducers || len(s.Producers) != metadata.MaxSnapshotProducers {
			t.Fatalf("partition %d: uploaded through %d, snapshot %v", i, mp.UploadedThrough(), s != nil)
		}
		if last := s.Producers[len(s.Producers)-1]; last.ID != metadata.MaxSnapshotProducers-1 || last.Batches[0] != [3]int64{0, 0, metadata.MaxSnapshotProducers - 1} {
			t.Fatalf("partition %d: last producer %+v", i, last)
		}
	}
}

// multiRig is a tier leading nParts partitions of topic "t", each holding batches
// batches made by batch (kept in the tail cache), with a manifest that records commits.
func multiRig(t *testing.T, cfg Config, nParts, batches int, batch func(j int) []byte) (*Tier, *recordingManifest, *metadata.LocalStore, []*partlog.Partition) {
	t.Helper()
	dir := t.TempDir()
	meta, err := metadata.OpenLocal(metadata.LocalConfig{Path: filepath.Join(dir, "metadata.json"), Self: metadata.Broker{ID: 1}})
	if err != nil {
		t.Fatal(err)
	}
	top, err := meta.CreateTopic(context.Background(), metadata.TopicSpec{Name: "t", Partitions: int32(nParts), ReplicationFactor: -1}, false)
	if err != nil {
		t.Fatal(err)
	}
	v := meta.View()
	var parts []*partlog.Partition
	for i := int32(0); i < int32(nParts); i++ {
		p := partlog.New("t", top.ID, i, 0, 0)
		p.Apply(v.Topics["t"].Partitions[i], v, true)
		if _, err := p.FinishLoad(-1, false, true); err != nil {
			t.Fatal(err)
		}
		for j := 0; j < batches; j++ {
			b := batch(j)
			h, err := recbatch.ValidateProduce(b, 0)
			if err != nil {
				t.Fatal(err)
			}
			pr, err := p.Prepare(&h, b, -1)
			if err != nil {
				t.Fatal(err)
			}
			p.Commit(pr, noReader{}, 0)
		}
		parts = append(parts, p)
	}
	w, err := wal.Open(wal.DefaultConfig(filepath.Join(dir, "wal")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	store, err := localfs.Open(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingManifest{ObjectManifest: meta}
	tr, err := New(cfg, Deps{NodeID: 1, Store: store, Meta: meta, Manifest: rec, WAL: w,
		Led: func() []*partlog.Partition { return parts }, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	return tr, rec, meta, parts
}

// uploadDue calls uploadOnce until it reports nothing more due.
func uploadDue(t *testing.T, tr *Tier) {
	t.Helper()
	for i := 0; ; i++ {
		more, err := tr.uploadOnce()
		if err != nil {
			t.Fatal(err)
		}
		if !more {
			return
		}
		if i > 100 {
			t.Fatal("uploadOnce reports more after 100 objects")
		}
	}
}

// An object gathers the pending data of many partitions, largest first, up to
// MaxObjectBytes, cutting the partition that does not fit at a batch boundary; what is
// left below the target waits until its oldest batch is MaxUploadDelay old.
func TestUploadGathersPartitionsUpToMax(t *testing.T) {
	const nParts, perPart = 6, 10
	value := make([]byte, 1000)
	cfg := DefaultConfig()
	cfg.MaxUploadDelay = time.Hour
	tr, rec, meta, parts := multiRig(t, cfg, nParts, perPart, func(int) []byte {
		return kafkatest.Batch(-1, 0, 0, value)
	})
	pending, _ := parts[0].Pending()
	batch := pending / perPart
	// 60 batches pending; objects of 25: two full ones, 10 batches left below the target.
	tr.cfg.TargetObjectBytes, tr.cfg.MaxObjectBytes = 25*batch, 25*batch
	uploadDue(t, tr)
	if len(rec.commits) != 2 {
		t.Fatalf("%d objects, want 2 full ones (the rest waits): %v", len(rec.commits), rec.commits)
	}
	for i, c := range rec.commits {
		var n int64
		for _, r := range c {
			n += r.Bytes
		}
		if n != 25*batch || len(c) != 3 {
			t.Fatalf("object %d: %d bytes in %d ranges, want %d bytes (25 batches) of 3 partitions", i, n, len(c), 25*batch)
		}
	}
	var left int64
	for _, p := range parts {
		n, _ := p.Pending()
		left += n
	}
	if left != 10*batch {
		t.Fatalf("%d bytes pending after the full objects, want %d", left, 10*batch)
	}
	tr.cfg.MaxUploadDelay = time.Nanosecond
	uploadDue(t, tr)
	if len(rec.commits) != 3 || len(rec.commits[2]) != 2 {
		t.Fatalf("overdue rest: %d objects, last %v; want a third of 2 partitions", len(rec.commits), rec.commits[len(rec.commits)-1])
	}
	for i, mp := range meta.View().Topics["t"].Partitions {
		if got := mp.UploadedThrough(); got != perPart {
			t.Fatalf("partition %d uploaded through %d, want %d", i, got, perPart)
		}
	}
}
