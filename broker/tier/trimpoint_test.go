package tier

import (
	"bytes"
	"testing"

	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/wal"
)

// smallSegments makes a rig's WAL roll every 4 KiB, so trimming has segments to remove.
func smallSegments(c *wal.Config) { c.SegmentSize = 4 << 10 }

// Trim removes the segments whose batches are all in objects and never one holding a
// batch that is not: the WAL starts at or before the first batch not uploaded, every
// batch from there on still reads back, and once everything is uploaded only the active
// segment stays.
func TestTrimStopsAtFirstBatchNotUploaded(t *testing.T) {
	r := newRig(t, rigOpts{wal: smallSegments})
	r.produceWAL(t, 200)
	pending, _ := r.p.Pending()
	r.tr.cfg.TargetObjectBytes, r.tr.cfg.MaxObjectBytes = pending/2, pending/2
	if _, err := r.tr.uploadOnce(); err != nil {
		t.Fatal(err)
	}
	up := r.p.Uploaded()
	if up <= 0 || up >= 200 {
		t.Fatalf("uploaded up to %d, want part of 200 batches", up)
	}
	r.tr.Trim()
	start := r.w.Start()
	if start == 0 || start > r.pos[up] {
		t.Fatalf("WAL starts at %d with the first batch not uploaded (%d) at %d: trimmed nothing, or too much", start, up, r.pos[up])
	}
	for off := up; off < 200; off++ {
		buf := make([]byte, len(r.acked[off]))
		if err := r.w.ReadAt(buf, r.pos[off]); err != nil || !bytes.Equal(buf, r.acked[off]) {
			t.Fatalf("batch %d (not uploaded) at %d after the trim: %v", off, r.pos[off], err)
		}
	}
	if got := r.tr.WALHeld(); got != int64(r.w.End()-start) {
		t.Fatalf("WALHeld %d, want %d", got, r.w.End()-start)
	}
	uploadAll(t, r)
	r.tr.Trim()
	if r.p.Uploaded() != 200 || r.w.Start() != r.w.TrimPoint(r.w.End()) {
		t.Fatalf("everything uploaded (%d): WAL starts at %d, want %d (the active segment)", r.p.Uploaded(), r.w.Start(), r.w.TrimPoint(r.w.End()))
	}
	r.checkManifest(t)
}

// uploadAll uploads until nothing is pending (each uploadOnce makes at most one object
// of a single partition's MaxObjectBytes).
func uploadAll(t *testing.T, r *upRig) {
	t.Helper()
	for i := 0; ; i++ {
		if n, _ := r.p.Pending(); n == 0 {
			return
		}
		if i == 1000 {
			t.Fatal("still pending after 1000 uploads")
		}
		if _, err := r.tr.uploadOnce(); err != nil {
			t.Fatal(err)
		}
	}
}

// While a partition led here is still loading its index is incomplete: Trim removes
// nothing, whatever the others allow.
func TestTrimWaitsForLoadingPartitions(t *testing.T) {
	r := newRig(t, rigOpts{wal: smallSegments})
	r.produceWAL(t, 200)
	uploadAll(t, r)
	loading := partlog.New("t", r.p.ID(), 1, 0, 0) // never finishes its load
	r.tr.d.Led = func() []*partlog.Partition { return []*partlog.Partition{r.p, loading} }
	r.tr.Trim()
	if r.w.Start() != 0 {
		t.Fatalf("trimmed to %d while a partition loads", r.w.Start())
	}
	r.tr.d.Led = func() []*partlog.Partition { return []*partlog.Partition{r.p} }
	r.tr.Trim()
	if r.w.Start() == 0 {
		t.Fatal("nothing trimmed once the load is over")
	}
}

// A zone proxy's WAL keeps each proxied batch until the proof that the copy is not
// needed: pins awaiting an answer or lost keep it whatever the manifest says, a resolved
// pin until the manifest reaches its end, and the first pin still held (in WAL order)
// is the trim point.
func TestTrimKeepsProxyPins(t *testing.T) {
	w, pos := pinWAL(t)
	meta := &fixedMeta{v: trimView(100, 0)} // the leader's manifest holds offsets 0..100
	tr := pinTier(w, meta)
	held := func(step string, from, to wal.Pos) {
		t.Helper()
		tr.Trim()
		if s := w.Start(); s <= from || s > to {
			t.Fatalf("%s: WAL starts at %d, want in (%d, %d]", step, s, from, to)
		}
	}
	// Another partition's batch further on, awaiting its answer: the lowest of the two
	// partitions' first held pins is the trim point.
	o := tr.PinProxied(partlog.Key{ID: metadata.TopicID{2}, Index: 0}, pos[35])
	a, b, c := tr.PinProxied(trimKey, pos[10]), tr.PinProxied(trimKey, pos[20]), tr.PinProxied(trimKey, pos[30])
	held("all awaiting answers", 0, pos[10])
	tr.ResolvePin(a, 50) // the manifest is past 50: a's copy may go
	held("the first resolved and uploaded", pos[10], pos[20])
	tr.LostPin(b)
	held("the second lost", pos[10], pos[20])
	keys, fresh := tr.LostPins()
	if len(keys) != 1 || !fresh {
		t.Fatalf("LostPins %v %v", keys, fresh)
	}
	tr.ResolveLost(trimKey, 40)
	held("the lost one resolved by its fence", pos[20], pos[30])
	tr.ResolvePin(c, 200) // beyond the manifest's end (101): still needed
	held("the third resolved, not uploaded", pos[20], pos[30])
	if n := tr.ProxyPinsHeld(); n != 2 {
		t.Fatalf("%d pins held, want 2", n)
	}
	meta.v = trimView(199, 0)
	held("the third uploaded, the other partition's awaiting its answer", pos[30], pos[35])
	tr.ReleasePin(o)
	tr.Trim()
	if w.Start() != w.TrimPoint(w.End()) || tr.ProxyPinsHeld() != 0 || len(tr.proxyPins) != 0 {
		t.Fatalf("every pin released: WAL starts at %d (want %d), %d pins held", w.Start(), w.TrimPoint(w.End()), tr.ProxyPinsHeld())
	}
	// A pin the leader refused (never in the log) lets go at once.
	d := tr.PinProxied(trimKey, w.End())
	tr.ReleasePin(d)
	if end, released := tr.PinEnd(d); !released || end != pinPending || tr.ProxyPinsHeld() != 0 {
		t.Fatalf("released pin: end %d released %v, %d held", end, released, tr.ProxyPinsHeld())
	}
}
