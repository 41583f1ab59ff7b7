package tier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/internal/kafkatest"
	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/objectstore"
	"github.com/weir-io/weir/objectstore/faulty"
	"github.com/weir-io/weir/objectstore/localfs"
	"github.com/weir-io/weir/objectstore/objfmt"
	"github.com/weir-io/weir/wal"
)

// upRig is one led partition, a WAL and a tier over a store the test wraps.
type upRig struct {
	meta    *metadata.LocalStore
	p       *partlog.Partition
	tr      *Tier
	objects objectstore.Store // the store under the tier (no retries, no metrics)
	w       *wal.WAL
	pos     map[int64]wal.Pos // base offset → where produceWAL wrote the batch
	acked   map[int64][]byte  // base offset → the batch as written
}

func newUpRig(t *testing.T, wrap func(objectstore.Store) objectstore.Store) *upRig {
	t.Helper()
	dir := t.TempDir()
	meta, err := metadata.OpenLocal(metadata.LocalConfig{Path: filepath.Join(dir, "metadata.json"), Self: metadata.Broker{ID: 1}})
	if err != nil {
		t.Fatal(err)
	}
	top, err := meta.CreateTopic(context.Background(), metadata.TopicSpec{Name: "t", Partitions: 1, ReplicationFactor: -1}, false)
	if err != nil {
		t.Fatal(err)
	}
	v := meta.View()
	p := partlog.New("t", top.ID, 0, 0, 0)
	p.Apply(v.Topics["t"].Partitions[0], v, true)
	if _, err := p.FinishLoad(-1, false, true); err != nil {
		t.Fatal(err)
	}
	w, err := wal.Open(wal.DefaultConfig(filepath.Join(dir, "wal")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	if _, err := w.Replay(func(byte, []byte, wal.Pos) error { return nil }); err != nil {
		t.Fatal(err)
	}
	local, err := localfs.Open(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	store := wrap(local)
	cfg := DefaultConfig()
	cfg.MaxUploadDelay = time.Nanosecond
	tr, err := New(cfg, Deps{NodeID: 1, Store: store, Meta: meta, Manifest: meta, WAL: w,
		Led: func() []*partlog.Partition { return []*partlog.Partition{p} }, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	return &upRig{meta: meta, p: p, tr: tr, objects: store, w: w, pos: map[int64]wal.Pos{}, acked: map[int64][]byte{}}
}

// produce appends n one-record batches (kept in the tail cache, as if synced).
func (r *upRig) produce(t *testing.T, n int) { r.produceTo(t, n, false) }

// produceWAL appends n one-record batches, each also written to the WAL (the partition
// knows where).
func (r *upRig) produceWAL(t *testing.T, n int) { r.produceTo(t, n, true) }

func (r *upRig) produceTo(t *testing.T, n int, toWAL bool) {
	t.Helper()
	for i := 0; i < n; i++ {
		b := kafkatest.Batch(-1, 0, 0, []byte(fmt.Sprintf("record %d of %d", len(r.acked), n)))
		h, err := recbatch.ValidateProduce(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		pr, err := r.p.Prepare(&h, b, -1)
		if err != nil {
			t.Fatal(err)
		}
		r.acked[pr.Base()] = b
		if !toWAL {
			r.p.Commit(pr, noReader{}, 0)
			continue
		}
		pos, err := r.w.AppendSync(context.Background(), 1, b)
		if err != nil {
			t.Fatal(err)
		}
		r.p.Commit(pr, r.w, pos)
		r.pos[pr.Base()] = pos
	}
}

// checkManifest reads every range of the partition's manifest from the object its
// manifest names and compares each batch with the one acked: the committed manifest
// must never name bytes other than those uploaded.
func (r *upRig) checkManifest(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	v := r.meta.View()
	mp := v.Topics["t"].Partitions[0]
	if got, want := mp.UploadedThrough(), int64(len(r.acked)); got != want {
		t.Fatalf("uploaded through %d, want %d", got, want)
	}
	seen := map[int64]bool{}
	for _, or := range mp.Objects {
		o, ok := v.Object(or.Object)
		if !ok || o.State != metadata.ObjectCommitted {
			t.Fatalf("manifest names object %d: %+v %v", or.Object, o, ok)
		}
		data, err := objectstore.ReadRange(ctx, r.objects, o.Key, 0, -1)
		if err != nil {
			t.Fatalf("object %s: %v", o.Key, err)
		}
		if int64(len(data)) != o.Size {
			t.Fatalf("object %s holds %d bytes, committed with %d", o.Key, len(data), o.Size)
		}
		_, idx, err := objfmt.ReadIndex(bytes.NewReader(data), o.Size)
		if err != nil {
			t.Fatalf("object %s: %v", o.Key, err)
		}
		pi, ok := idx.Partition(r.p.ID(), 0)
		if !ok {
			t.Fatalf("object %s has no data of the partition", o.Key)
		}
		off, n := objfmt.Span(pi.AllBlocks())
		batches, err := objfmt.DecodeBlocks(pi.AllBlocks(), data[off:off+n])
		if err != nil {
			t.Fatalf("object %s: %v", o.Key, err)
		}
		for _, b := range batches {
			if b.BaseOffset < or.FirstOffset || b.LastOffset > or.LastOffset {
				continue
			}
			if !bytes.Equal(b.Data, r.acked[b.BaseOffset]) {
				t.Fatalf("object %s: the batch at %d is not the one acked", o.Key, b.BaseOffset)
			}
			seen[b.BaseOffset] = true
		}
	}
	for off := range r.acked {
		if !seen[off] {
			t.Fatalf("acked batch at %d is in no committed object", off)
		}
	}
}

// A PUT that times out after its body was sent can land at the server after the next
// one. Had the next object gone to the same key, the late PUT would replace it under a
// committed manifest (and the WAL would be trimmed): every attempt takes a new key.
func TestLatePutNeverReplacesCommittedObject(t *testing.T) {
	for _, when := range []string{"before the next commit", "after the next commit", "after garbage collection"} {
		t.Run(when, func(t *testing.T) {
			var fs *faulty.Store
			var afterPut func()
			r := newUpRig(t, func(s objectstore.Store) objectstore.Store {
				fs = faulty.New(s, 1)
				return &hookStore{Store: fs, afterPut: func() {
					if afterPut != nil {
						afterPut()
					}
				}}
			})
			ctx := context.Background()
			r.produce(t, 3)
			fs.FailNext(faulty.Put, 1, faulty.LatePut)
			if _, err := r.tr.uploadOnce(); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("first upload: %v", err)
			}
			r.produce(t, 4) // the next object differs: it holds 7 batches
			if when == "before the next commit" {
				afterPut = func() {
					if err := fs.DeliverLate(ctx); err != nil {
						t.Error(err)
					}
				}
			}
			if _, err := r.tr.uploadOnce(); err != nil {
				t.Fatalf("second upload: %v", err)
			}
			afterPut = nil
			switch when {
			case "after the next commit":
				if err := fs.DeliverLate(ctx); err != nil {
					t.Fatal(err)
				}
			case "after garbage collection":
				// Two collections forget the abandoned prepared object and delete its
				// key; the late PUT then lands as a stray key, which the sweep deletes.
				r.tr.collectGarbage()
				r.tr.collectGarbage()
				if err := fs.DeliverLate(ctx); err != nil {
					t.Fatal(err)
				}
				r.tr.sweepStrayKeys(r.meta.View())
			}
			r.checkManifest(t)
			if when == "after garbage collection" {
				infos, err := r.objects.List(ctx, "objects/")
				if err != nil {
					t.Fatal(err)
				}
				v := r.meta.View()
				for _, in := range infos {
					var id uint64
					fmt.Sscanf(in.Key, "objects/%d.obj", &id)
					if o, ok := v.Object(id); !ok || o.State != metadata.ObjectCommitted {
						t.Fatalf("key %s left behind (%+v, %v)", in.Key, o, ok)
					}
				}
				if len(infos) != 1 || len(v.Objects) != 1 {
					t.Fatalf("%d keys and %d object records, want 1 each", len(infos), len(v.Objects))
				}
			}
		})
	}
}

// hookStore calls afterPut after every Put that succeeded.
type hookStore struct {
	objectstore.Store
	afterPut func()
}

func (h *hookStore) Put(ctx context.Context, key string, body io.Reader, size int64) error {
	err := h.Store.Put(ctx, key, body, size)
	if err == nil {
		h.afterPut()
	}
	return err
}

// shortStore stores all but the last byte of every body and reports success: a store
// (or a path to it) that lost bytes.
type shortStore struct{ objectstore.Store }

func (s shortStore) Put(ctx context.Context, key string, body io.Reader, size int64) error {
	data, err := io.ReadAll(body)
	if err != nil {
		return err
	}
	return s.Store.Put(ctx, key, bytes.NewReader(data[:len(data)-1]), size-1)
}

// The uploader checks the stored object before it commits: an object whose size is not
// the one put is never committed, and the data stays pending (in the WAL).
func TestUploadVerifiesBeforeCommit(t *testing.T) {
	r := newUpRig(t, func(s objectstore.Store) objectstore.Store { return shortStore{s} })
	r.produce(t, 2)
	if _, err := r.tr.uploadOnce(); !errors.Is(err, objectstore.ErrMismatch) {
		t.Fatalf("upload to a store that loses bytes: %v", err)
	}
	v := r.meta.View()
	if mp := v.Topics["t"].Partitions[0]; len(mp.Objects) != 0 {
		t.Fatalf("manifest %+v after a mismatch", mp.Objects)
	}
	if n, _ := r.p.Pending(); n == 0 {
		t.Fatal("nothing pending after a mismatch")
	}
	for _, o := range v.Objects {
		if o.State == metadata.ObjectCommitted {
			t.Fatalf("object %s committed", o.Key)
		}
	}
}

// refusingStore refuses every PUT, as a store with wrong credentials does.
type refusingStore struct{ objectstore.Store }

func (refusingStore) Put(context.Context, string, io.Reader, int64) error {
	return errors.New("403 AccessDenied (test)")
}

// Every upload attempt prepares a new object ID, so failed uploads back off: rounds
// run back to back against a store that refuses every PUT prepare one object, not one
// per round.
func TestFailedUploadsBackOff(t *testing.T) {
	r := newUpRig(t, func(s objectstore.Store) objectstore.Store { return refusingStore{s} })
	r.produce(t, 2)
	r.tr.cfg.CheckInterval = 2 * time.Second // the first wait: longer than the rounds below take
	for i := 0; i < 10; i++ {
		r.tr.UploadRound()
	}
	if n := len(r.meta.View().Objects); n != 1 {
		t.Fatalf("%d objects prepared by 10 rounds in a row", n)
	}
	r.tr.upNotBefore = time.Time{} // the wait is over
	r.tr.UploadRound()
	if n := len(r.meta.View().Objects); n != 2 {
		t.Fatalf("%d objects prepared once the wait is over, want 2", n)
	}
	if r.tr.upBackoff != 2*r.tr.cfg.CheckInterval {
		t.Fatalf("backoff %v after two failures, want %v", r.tr.upBackoff, 2*r.tr.cfg.CheckInterval)
	}
}
