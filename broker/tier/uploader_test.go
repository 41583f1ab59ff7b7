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
	dir := t.TempDir()
	meta, err := metadata.OpenLocal(metadata.LocalConfig{Path: filepath.Join(dir, "metadata.json"), Self: metadata.Broker{ID: 1}})
	if err != nil {
		t.Fatal(err)
	}
	// Eight partitions of 1,000 producers each: a weight of 2,001 per range, 16,008 in
	// all, just above the bound.
	const nParts = 8
	top, err := meta.CreateTopic(context.Background(), metadata.TopicSpec{Name: "t", Partitions: nParts, ReplicationFactor: -1}, false)
	if err != nil {
		t.Fatal(err)
	}
	v := meta.View()
	var parts []*partlog.Partition
	for i := int32(0); i < nParts; i++ {
		p := partlog.New("t", top.ID, i, 0, 0)
		p.Apply(v.Topics["t"].Partitions[i], v, true)
		if _, err := p.FinishLoad(-1, false, true); err != nil {
			t.Fatal(err)
		}
		for j := 0; j < metadata.MaxSnapshotProducers; j++ {
			b := kafkatest.Batch(int64(j), 0, 0, []byte("v"))
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
	defer w.Close()
	store, err := localfs.Open(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingManifest{ObjectManifest: meta}
	cfg := DefaultConfig()
	cfg.MaxUploadDelay = time.Nanosecond
	tr, err := New(cfg, Deps{NodeID: 1, Store: store, Meta: meta, Manifest: rec, WAL: w,
		Led: func() []*partlog.Partition { return parts }, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if _, err := tr.uploadOnce(); err != nil {
		t.Fatal(err)
	}
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
