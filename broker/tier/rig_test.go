package tier

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/internal/crc32c"
	"github.com/weir-io/weir/internal/kafkatest"
	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/objectstore"
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
	clock   *clock
	pos     map[int64]wal.Pos // base offset → where produceWAL wrote the batch
	acked   map[int64][]byte  // base offset → the batch as written
}

// rigOpts adjusts a rig before its tier is made; every field is optional.
type rigOpts struct {
	wrap     func(objectstore.Store) objectstore.Store // the store the tier uses
	manifest func(metadata.ObjectManifest) metadata.ObjectManifest
	wal      func(*wal.Config)
	cfg      func(*Config)
	configs  map[string]string // the topic's configs
}

// clock is the tier's injected clock (Deps.Now), moved by the test only.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// rigEpoch is where a rig's clock starts: the timestamp kafkatest.Batch writes.
var rigEpoch = time.UnixMilli(1700000000000)

func newUpRig(t *testing.T, wrap func(objectstore.Store) objectstore.Store) *upRig {
	t.Helper()
	return newRig(t, rigOpts{wrap: wrap})
}

func newRig(t testing.TB, o rigOpts) *upRig {
	t.Helper()
	dir := t.TempDir()
	meta, err := metadata.OpenLocal(metadata.LocalConfig{Path: filepath.Join(dir, "metadata.json"), Self: metadata.Broker{ID: 1}})
	if err != nil {
		t.Fatal(err)
	}
	top, err := meta.CreateTopic(context.Background(), metadata.TopicSpec{Name: "t", Partitions: 1, ReplicationFactor: -1, Configs: o.configs}, false)
	if err != nil {
		t.Fatal(err)
	}
	v := meta.View()
	p := partlog.New("t", top.ID, 0, 0, 0)
	p.Apply(v.Topics["t"].Partitions[0], v, true)
	if _, err := p.FinishLoad(-1, false, true); err != nil {
		t.Fatal(err)
	}
	wcfg := wal.DefaultConfig(filepath.Join(dir, "wal"))
	wcfg.SegmentSize = 1 << 20 // not 64 MiB: every rig pre-allocates its first segment
	if o.wal != nil {
		o.wal(&wcfg)
	}
	w := openWAL(t, wcfg)
	local, err := localfs.Open(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	store := objectstore.Store(local)
	if o.wrap != nil {
		store = o.wrap(local)
	}
	var manifest metadata.ObjectManifest = meta
	if o.manifest != nil {
		manifest = o.manifest(meta)
	}
	cfg := DefaultConfig()
	cfg.MaxUploadDelay = time.Nanosecond
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	clk := &clock{now: rigEpoch}
	tr, err := New(cfg, Deps{NodeID: 1, Store: store, Meta: meta, Manifest: manifest, WAL: w, Now: clk.Now,
		Led: func() []*partlog.Partition { return []*partlog.Partition{p} }, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	return &upRig{meta: meta, p: p, tr: tr, objects: store, w: w, clock: clk, pos: map[int64]wal.Pos{}, acked: map[int64][]byte{}}
}

// openWAL opens an empty WAL, ready for appends, closed when the test ends.
func openWAL(t testing.TB, cfg wal.Config) *wal.WAL {
	t.Helper()
	w, err := wal.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	if _, err := w.Replay(func(byte, []byte, wal.Pos) error { return nil }); err != nil {
		t.Fatal(err)
	}
	return w
}

// produce appends n one-record batches (kept in the tail cache, as if synced).
func (r *upRig) produce(t *testing.T, n int) { r.produceTo(t, n, false, -1) }

// produceWAL appends n one-record batches, each also written to the WAL (the partition
// knows where).
func (r *upRig) produceWAL(t *testing.T, n int) { r.produceTo(t, n, true, -1) }

// produceAt appends one one-record batch with timestamp ts (ms), in the tail cache.
func (r *upRig) produceAt(t *testing.T, ts int64) { r.produceTo(t, 1, false, ts) }

func (r *upRig) produceTo(t *testing.T, n int, toWAL bool, ts int64) {
	t.Helper()
	for i := 0; i < n; i++ {
		b := kafkatest.Batch(-1, 0, 0, []byte(fmt.Sprintf("record %d of %d", len(r.acked), n)))
		if ts >= 0 {
			stamp(b, ts)
		}
		pr := r.prepare(t, b)
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

// prepare validates batch b as produced and prepares its append (noted as acked).
func (r *upRig) prepare(t testing.TB, b []byte) partlog.Prepared {
	t.Helper()
	h, err := recbatch.ValidateProduce(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	pr, err := r.p.Prepare(&h, b, -1)
	if err != nil {
		t.Fatal(err)
	}
	r.acked[pr.Base()] = b
	return pr
}

// stamp sets a kafkatest batch's first and max timestamps to ts and its CRC to match.
func stamp(b []byte, ts int64) {
	binary.BigEndian.PutUint64(b[27:], uint64(ts))
	binary.BigEndian.PutUint64(b[35:], uint64(ts))
	binary.BigEndian.PutUint32(b[17:], crc32c.Checksum(b[21:]))
}

// manifest is the partition's manifest in the store's view.
func (r *upRig) manifest() metadata.Partition { return r.meta.View().Topics["t"].Partitions[0] }

// committed lists the store view's committed objects.
func (r *upRig) committed() []metadata.Object {
	var out []metadata.Object
	for _, o := range r.meta.View().Objects {
		if o.State == metadata.ObjectCommitted {
			out = append(out, o)
		}
	}
	return out
}

// keys lists the keys in the store under the tier.
func (r *upRig) keys(t *testing.T) map[string]bool {
	t.Helper()
	infos, err := r.objects.List(context.Background(), "objects/")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, in := range infos {
		out[in.Key] = true
	}
	return out
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
