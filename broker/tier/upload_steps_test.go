package tier

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/objectstore"
)

// steps records, in order, what the uploader asked of the store and the manifest.
type steps struct {
	mu   sync.Mutex
	list []string
}

func (s *steps) add(format string, args ...any) {
	s.mu.Lock()
	s.list = append(s.list, fmt.Sprintf(format, args...))
	s.mu.Unlock()
}

func (s *steps) get() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.list)
}

// stepStore records PUTs and HEADs; failPuts fails that many PUTs with an error the
// retrying layer does not retry (as a 403 is), writing nothing.
type stepStore struct {
	objectstore.Store
	steps    *steps
	mu       sync.Mutex
	failPuts int
}

func (s *stepStore) Put(ctx context.Context, key string, body io.Reader, size int64) error {
	s.steps.add("put %s", key)
	s.mu.Lock()
	fail := s.failPuts > 0
	if fail {
		s.failPuts--
	}
	s.mu.Unlock()
	if fail {
		return errors.New("403 AccessDenied (test)")
	}
	return s.Store.Put(ctx, key, body, size)
}

func (s *stepStore) Head(ctx context.Context, key string) (objectstore.ObjectInfo, error) {
	s.steps.add("head %s", key)
	return s.Store.Head(ctx, key)
}

// stepManifest records prepares and commits. A commit first checks that the object is in
// the store with the size committed (the uploader must PUT before it commits); commitErr,
// if set, answers the nth commit (from 1) instead of the manifest when it returns an error.
type stepManifest struct {
	metadata.ObjectManifest
	steps     *steps
	store     objectstore.Store
	commitErr func(n int) error
	mu        sync.Mutex
	commits   int
	ids       []uint64 // the ID of every commit attempt
}

func (m *stepManifest) PrepareObject(ctx context.Context) (metadata.Object, error) {
	o, err := m.ObjectManifest.PrepareObject(ctx)
	m.steps.add("prepare %s", o.Key)
	return o, err
}

func (m *stepManifest) CommitObject(ctx context.Context, id uint64, size int64, ranges []metadata.PartitionRange) error {
	key := metadata.ObjectKey(id)
	m.steps.add("commit %s", key)
	m.mu.Lock()
	m.commits++
	n := m.commits
	m.ids = append(m.ids, id)
	m.mu.Unlock()
	if info, err := m.store.Head(ctx, key); err != nil || info.Size != size {
		return fmt.Errorf("commit of %s before its PUT: %+v %v", key, info, err)
	}
	if m.commitErr != nil {
		if err := m.commitErr(n); err != nil {
			return err
		}
	}
	return m.ObjectManifest.CommitObject(ctx, id, size, ranges)
}

// stepRig is a rig whose store and manifest record the uploader's steps.
func stepRig(t *testing.T, failPuts int, commitErr func(n int) error) (*upRig, *stepStore, *stepManifest) {
	t.Helper()
	st := &steps{}
	var ss *stepStore
	var sm *stepManifest
	r := newRig(t, rigOpts{
		wrap: func(s objectstore.Store) objectstore.Store {
			ss = &stepStore{Store: s, steps: st, failPuts: failPuts}
			return ss
		},
		manifest: func(m metadata.ObjectManifest) metadata.ObjectManifest {
			sm = &stepManifest{ObjectManifest: m, steps: st, store: ss.Store, commitErr: commitErr}
			return sm
		},
	})
	return r, ss, sm
}

// An object is prepared (its ID and key), PUT, checked (HEAD) and only then committed;
// the partition then counts it as uploaded and nothing is pending.
func TestUploadPreparesPutsVerifiesThenCommits(t *testing.T) {
	r, ss, _ := stepRig(t, 0, nil)
	r.produce(t, 3)
	if n, _ := r.p.Pending(); n == 0 {
		t.Fatal("nothing pending after produce")
	}
	r.tr.UploadRound()
	objs := r.committed()
	if len(objs) != 1 {
		t.Fatalf("%d objects committed, want 1", len(objs))
	}
	key := objs[0].Key
	want := []string{"prepare " + key, "put " + key, "head " + key, "commit " + key}
	if got := ss.steps.get(); !slices.Equal(got, want) {
		t.Fatalf("steps %q, want %q", got, want)
	}
	r.checkManifest(t)
	if n, _ := r.p.Pending(); n != 0 || r.p.Uploaded() != 3 {
		t.Fatalf("after the upload: %d bytes pending, uploaded up to %d, want 0 and 3", n, r.p.Uploaded())
	}
	if len(r.tr.inflight) != 0 {
		t.Fatalf("prepared objects still in use: %v", r.tr.inflight)
	}
	m := r.tr.metrics
	if testutil.ToFloat64(m.objects) != 1 || testutil.ToFloat64(m.bytes) != float64(objs[0].Size) || testutil.ToFloat64(m.pending) != 0 {
		t.Fatalf("metrics: %v objects, %v bytes (want %d), %v pending", testutil.ToFloat64(m.objects), testutil.ToFloat64(m.bytes), objs[0].Size, testutil.ToFloat64(m.pending))
	}
}

// A PUT that fails leaves nothing committed and the data pending; the next round waits
// for the backoff (on the tier's clock), then uploads it under a new key. The abandoned
// prepared object is collected later.
func TestFailedPutCommitsNothingAndIsRetried(t *testing.T) {
	r, ss, sm := stepRig(t, 1, nil)
	r.produce(t, 3)
	pending, _ := r.p.Pending()
	r.tr.UploadRound()
	if len(r.committed()) != 0 || len(r.manifest().Objects) != 0 || sm.commits != 0 {
		t.Fatalf("after a failed PUT: committed %v, manifest %v, %d commits", r.committed(), r.manifest().Objects, sm.commits)
	}
	if n, _ := r.p.Pending(); n != pending || r.p.Uploaded() != -1 {
		t.Fatalf("after a failed PUT: %d bytes pending (want %d), uploaded %d", n, pending, r.p.Uploaded())
	}
	if testutil.ToFloat64(r.tr.metrics.uploadFailures) != 1 || len(r.tr.inflight) != 0 {
		t.Fatalf("failures %v, in use %v", testutil.ToFloat64(r.tr.metrics.uploadFailures), r.tr.inflight)
	}
	abandoned := ss.steps.get()[0]
	// Not before the backoff is over: no new prepare.
	r.tr.UploadRound()
	if n := len(ss.steps.get()); n != 2 {
		t.Fatalf("a round during the backoff did something: %q", ss.steps.get())
	}
	r.clock.Add(r.tr.upBackoff)
	r.tr.UploadRound()
	r.checkManifest(t)
	objs := r.committed()
	if len(objs) != 1 || "prepare "+objs[0].Key == abandoned {
		t.Fatalf("committed %+v after %q was abandoned: the key must be new", objs, abandoned)
	}
	if r.tr.upBackoff != 0 {
		t.Fatalf("backoff %v after a success", r.tr.upBackoff)
	}
	r.tr.collectGarbage()
	r.tr.collectGarbage()
	if n := len(r.meta.View().Objects); n != 1 {
		t.Fatalf("%d object records after two collections, want the committed one", n)
	}
}

// A commit the controller refuses leaves nothing committed (the object stays prepared,
// then garbage), the data pending, and is retried with a new object; the refused one's
// record and key go at garbage collection.
func TestRefusedCommitCommitsNothingAndIsRetried(t *testing.T) {
	r, _, sm := stepRig(t, 0, func(n int) error {
		if n == 1 {
			return fmt.Errorf("%w: range does not continue the manifest (test)", metadata.ErrObjectRejected)
		}
		return nil
	})
	r.produce(t, 2)
	r.tr.UploadRound()
	if len(r.committed()) != 0 || len(r.manifest().Objects) != 0 {
		t.Fatalf("after a refused commit: committed %v, manifest %v", r.committed(), r.manifest().Objects)
	}
	if n, _ := r.p.Pending(); n == 0 {
		t.Fatal("nothing pending after a refused commit")
	}
	if testutil.ToFloat64(r.tr.metrics.rejected) != 1 || sm.commits != 1 {
		t.Fatalf("%v commits counted refused, %d attempted; want 1 and 1 (a refusal is final)", testutil.ToFloat64(r.tr.metrics.rejected), sm.commits)
	}
	refused := metadata.ObjectKey(sm.ids[0])
	if !r.keys(t)[refused] {
		t.Fatalf("the refused object's key %s is not in the store", refused)
	}
	r.clock.Add(r.tr.upBackoff)
	r.tr.UploadRound()
	r.checkManifest(t)
	for i := 0; i < 2; i++ {
		r.tr.collectGarbage()
	}
	keys := r.keys(t)
	if keys[refused] || len(keys) != 1 || len(r.meta.View().Objects) != 1 {
		t.Fatalf("after collection: keys %v, %d records; want only the committed object", keys, len(r.meta.View().Objects))
	}
	if got := testutil.ToFloat64(r.tr.metrics.deleted.WithLabelValues("orphan")); got != 1 {
		t.Fatalf("%v orphans counted, want 1", got)
	}
}

// A commit that fails for any other reason (the controller unreachable) is retried with
// the same object until it is accepted: one PUT, one object, no new prepare.
func TestCommitRetriedWhileControllerUnreachable(t *testing.T) {
	r, ss, sm := stepRig(t, 0, func(n int) error {
		if n <= 2 {
			return errors.New("controller unreachable (test)")
		}
		return nil
	})
	r.produce(t, 2)
	if _, err := r.tr.uploadOnce(); err != nil {
		t.Fatal(err)
	}
	r.checkManifest(t)
	if sm.commits != 3 || sm.ids[0] != sm.ids[1] || sm.ids[1] != sm.ids[2] {
		t.Fatalf("commit attempts %v, want 3 of one object", sm.ids)
	}
	prepares, puts := 0, 0
	for _, s := range ss.steps.get() {
		switch s[:4] {
		case "prep":
			prepares++
		case "put ":
			puts++
		}
	}
	if prepares != 1 || puts != 1 {
		t.Fatalf("%d prepares and %d PUTs for one object: %q", prepares, puts, ss.steps.get())
	}
}
