package tier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/objectstore"
	"github.com/weir-io/weir/objectstore/faulty"
)

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
