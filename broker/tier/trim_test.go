package tier

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/objectstore"
	"github.com/weir-io/weir/wal"
)

var (
	trimTopic = metadata.TopicID{1}
	trimKey   = partlog.Key{ID: trimTopic, Index: 0}
)

// trimView is a view of topic trimTopic with one partition led by broker 2, whose
// manifest holds offsets up to uploadedLast (none when -1), with log start logStart and
// a chain in which broker 1 (this broker) wrote offsets [0, 10) and broker 2 the rest.
func trimView(uploadedLast, logStart int64) *metadata.View {
	mp := metadata.Partition{Index: 0, Leader: 2, LogStartOffset: logStart,
		Logs: []metadata.LogRange{{Broker: 1, StartOffset: 0}, {Broker: 2, StartOffset: 10}}}
	if uploadedLast >= 0 {
		mp.Objects = []metadata.ObjectRange{{Object: 1, FirstOffset: 0, LastOffset: uploadedLast}}
	}
	topics := map[string]*metadata.Topic{"t": {Name: "t", ID: trimTopic, Partitions: []metadata.Partition{mp}}}
	return metadata.NewView(1, "c", 1, nil, topics)
}

// A pin ends at the first offset it does not keep (exclusive): the partition moved away
// with offsets up to 9 here (next offset 10), the last batch a single record at 9. Its
// data is safe only once the manifest holds offset 9 or the log start passed it.
func TestReleasedAtPinEnd(t *testing.T) {
	pin := walPin{pos: 4096, end: 10}
	for _, c := range []struct {
		name            string
		v               *metadata.View
		uploaded, logSt int64
		want            bool
		otherPartition  bool
	}{
		{name: "nothing uploaded", v: trimView(-1, 0), want: false},
		{name: "uploaded up to the last record but one", v: trimView(8, 0), want: false},
		{name: "uploaded up to the last record", v: trimView(9, 0), want: true},
		{name: "uploaded beyond", v: trimView(15, 0), want: true},
		{name: "log start at the last record", v: trimView(-1, 9), want: false},
		{name: "log start past the last record", v: trimView(-1, 10), want: true},
		{name: "topic deleted", v: metadata.NewView(1, "c", 1, nil, nil), want: true},
		{name: "partition gone", v: trimView(-1, 0), otherPartition: true, want: true},
	} {
		k := trimKey
		if c.otherPartition {
			k.Index = 1
		}
		if got := released(c.v, k, pin); got != c.want {
			t.Errorf("%s: released = %v, want %v", c.name, got, c.want)
		}
	}
}

// Pin keeps the lowest position and the highest end of every pin of a partition.
func TestPinMerges(t *testing.T) {
	tr := &Tier{pins: map[partlog.Key]walPin{}}
	steps := []struct {
		pos  wal.Pos
		end  int64
		want walPin
	}{
		{100, 10, walPin{100, 10}},
		{200, 5, walPin{100, 10}},  // later and shorter: nothing changes
		{200, 20, walPin{100, 20}}, // later but longer: the end grows
		{50, 15, walPin{50, 20}},   // earlier: the position drops, the end stays
		{40, 30, walPin{40, 30}},
	}
	for i, s := range steps {
		tr.Pin(trimKey, s.pos, s.end)
		if got := tr.pins[trimKey]; got != s.want {
			t.Fatalf("step %d: Pin(%d, %d) left %+v, want %+v", i, s.pos, s.end, got, s.want)
		}
	}
}

// Pins the view does not release lower the trim point, to the lowest of them; released
// pins are forgotten and lower nothing.
func TestPinsLowerTrimPoint(t *testing.T) {
	other := partlog.Key{ID: metadata.TopicID{2}, Index: 0} // a topic the view lacks: released
	for _, c := range []struct {
		name string
		v    *metadata.View
		at   wal.Pos
		want wal.Pos
		kept bool
	}{
		{name: "not uploaded", v: trimView(8, 0), at: 1 << 20, want: 4096, kept: true},
		{name: "not uploaded, trim point already lower", v: trimView(8, 0), at: 100, want: 100, kept: true},
		{name: "uploaded", v: trimView(9, 0), at: 1 << 20, want: 1 << 20},
	} {
		tr := &Tier{pins: map[partlog.Key]walPin{}}
		tr.Pin(trimKey, 4096, 10)
		tr.Pin(other, 10, 5)
		got := tr.pinnedLocked(c.v, c.at)
		if got != c.want {
			t.Errorf("%s: trim point %d, want %d", c.name, got, c.want)
		}
		if _, ok := tr.pins[trimKey]; ok != c.kept {
			t.Errorf("%s: pin kept %v, want %v", c.name, ok, c.kept)
		}
		if _, ok := tr.pins[other]; ok {
			t.Errorf("%s: the pin of a deleted topic kept", c.name)
		}
	}
}

// A batch found at replay in this broker's range of a partition led elsewhere is pinned
// to the end of the range, unless the manifest already holds it: a single-record batch at
// offset 9 (the range's last) is pinned while the manifest ends at 8.
func TestPinReplayedSingleRecordLastBatch(t *testing.T) {
	h := &recbatch.Header{BaseOffset: 9, LastOffsetDelta: 0}
	for _, c := range []struct {
		name     string
		v        *metadata.View
		wantPin  bool
		released bool // once the manifest reaches the range's end
	}{
		{name: "manifest ends at 8", v: trimView(8, 0), wantPin: true},
		{name: "manifest holds 9", v: trimView(9, 0)},
		{name: "log start at it", v: trimView(-1, 9), wantPin: true},
		{name: "log start past it", v: trimView(-1, 10)},
	} {
		tr := &Tier{d: Deps{NodeID: 1}, pins: map[partlog.Key]walPin{}}
		tr.PinReplayed(c.v, trimTopic, 0, h, 4096)
		pn, ok := tr.pins[trimKey]
		if ok != c.wantPin {
			t.Fatalf("%s: pinned %v (%+v), want %v", c.name, ok, pn, c.wantPin)
		}
		if !ok {
			continue
		}
		if pn.pos != 4096 || pn.end != 10 {
			t.Fatalf("%s: pin %+v, want position 4096 up to offset 10 (the range's end)", c.name, pn)
		}
		if released(c.v, trimKey, pn) || !released(trimView(9, 0), trimKey, pn) {
			t.Fatalf("%s: pin %+v released before offset 9 is uploaded, or not after", c.name, pn)
		}
	}
	// A batch in the range of another broker is not this broker's to keep.
	tr := &Tier{d: Deps{NodeID: 1}, pins: map[partlog.Key]walPin{}}
	tr.PinReplayed(trimView(8, 0), trimTopic, 0, &recbatch.Header{BaseOffset: 10}, 4096)
	if len(tr.pins) != 0 {
		t.Fatalf("pinned a batch of broker 2's range: %+v", tr.pins)
	}
}

// fixedMeta serves one view.
type fixedMeta struct {
	metadata.Store
	v *metadata.View
}

func (m fixedMeta) View() *metadata.View { return m.v }

// pinWAL is a WAL of 4 KiB segments holding 40 records of 1,000 bytes, and where each is.
func pinWAL(t *testing.T) (*wal.WAL, []wal.Pos) {
	t.Helper()
	cfg := wal.DefaultConfig(filepath.Join(t.TempDir(), "wal"))
	cfg.SegmentSize = 4 << 10
	w := openWAL(t, cfg)
	var pos []wal.Pos
	for i := 0; i < 40; i++ {
		p, err := w.AppendSync(context.Background(), 1, make([]byte, 1000))
		if err != nil {
			t.Fatal(err)
		}
		pos = append(pos, p)
	}
	return w, pos
}

// pinTier is a tier over w that leads nothing and sees meta's view: only pins hold the
// WAL.
func pinTier(w *wal.WAL, meta metadata.Store) *Tier {
	return &Tier{d: Deps{NodeID: 1, Meta: meta, WAL: w, Led: func() []*partlog.Partition { return nil }},
		log: slog.Default(), metrics: newMetrics(prometheus.NewRegistry()),
		pins: map[partlog.Key]walPin{}, proxyPins: map[partlog.Key][]*ProxyPin{}}
}

// Trim over a real WAL of small segments: a pin keeps its segment and those after it
// until the view releases it.
func TestTrimKeepsPinnedSegments(t *testing.T) {
	w, pos := pinWAL(t)
	pinned := pos[20]
	meta := &fixedMeta{v: trimView(8, 0)}
	tr := pinTier(w, meta)
	tr.Pin(trimKey, pinned, 10)
	tr.Trim()
	if start := w.Start(); start > pinned || start == 0 {
		t.Fatalf("WAL starts at %d with a pin at %d (nothing before the pin trimmed, or the pin's segment)", start, pinned)
	}
	buf := make([]byte, 1000)
	if err := w.ReadAt(buf, pinned); err != nil {
		t.Fatalf("pinned record: %v", err)
	}
	meta.v = trimView(9, 0) // the new leader uploaded offset 9: the pin is released
	tr.Trim()
	if start := w.Start(); start <= pinned || start != w.TrimPoint(w.End()) {
		t.Fatalf("WAL still starts at %d after the pin was released", start)
	}
	if len(tr.pins) != 0 {
		t.Fatalf("pins left: %+v", tr.pins)
	}
}

// The partition moves away when its last batch, a single record, is not uploaded yet:
// the pin its drop leaves (partlog.Partition.Drop) keeps that batch's position until the
// new leader's manifest holds its offset, not one offset less.
func TestMovedPartitionLastRecordPinned(t *testing.T) {
	r := newUpRig(t, func(s objectstore.Store) objectstore.Store { return s })
	ctx := context.Background()
	r.produceWAL(t, 9)
	if _, err := r.tr.uploadOnce(); err != nil {
		t.Fatal(err)
	}
	r.produceWAL(t, 1) // offset 9, in the WAL only
	pos, end, ok := r.p.Drop(r.w)
	if !ok || pos != r.pos[9] || end != 10 {
		t.Fatalf("drop: pin %v at %d up to %d; want position %d up to 10", ok, pos, end, r.pos[9])
	}
	r.tr.Pin(r.p.Key(), pos, end)
	r.tr.pinMu.Lock()
	at := r.tr.pinnedLocked(r.meta.View(), r.w.End())
	r.tr.pinMu.Unlock()
	if at != r.pos[9] {
		t.Fatalf("trim point %d with offset 9 not uploaded, want %d", at, r.pos[9])
	}
	// The new leader uploads offset 9: the pin is released.
	obj, err := r.meta.PrepareObject(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.meta.CommitObject(ctx, obj.ID, 1, []metadata.PartitionRange{{Topic: r.p.ID(), Partition: 0, FirstOffset: 9, LastOffset: 9, MaxTimestamp: -1}}); err != nil {
		t.Fatal(err)
	}
	r.tr.pinMu.Lock()
	at = r.tr.pinnedLocked(r.meta.View(), r.w.End())
	r.tr.pinMu.Unlock()
	if at != r.w.End() || len(r.tr.pins) != 0 {
		t.Fatalf("trim point %d (pins %+v) once offset 9 is uploaded, want %d", at, r.tr.pins, r.w.End())
	}
}
