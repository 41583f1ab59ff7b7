package partlog

import (
	"testing"

	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/objectstore/objread"
)

// tiered is a Ready partition whose manifest holds six object ranges of two offsets
// each, [0,1] .. [10,11], with max timestamps 100 .. 600 and 10 bytes each; its WAL
// data starts at 12.
func tiered(t *testing.T) *Partition {
	t.Helper()
	var objs []metadata.ObjectRange
	for i := int64(0); i < 6; i++ {
		objs = append(objs, metadata.ObjectRange{Object: uint64(i + 1), FirstOffset: 2 * i, LastOffset: 2*i + 1, MaxTimestamp: 100 * (i + 1), Bytes: 10})
	}
	p := New("t", metadata.TopicID{1}, 0, 5, 0)
	p.Apply(metadata.Partition{Leader: 1, LeaderEpoch: 5, Logs: []metadata.LogRange{{Broker: 1}}, Objects: objs}, metadata.NewView(1, "c", 1, nil, nil), true)
	if gaps, err := p.FinishLoad(-1, false, true); err != nil || len(gaps) != 0 || p.End() != 12 {
		t.Fatalf("load: gaps %v %v end %d", gaps, err, p.End())
	}
	return p
}

func firstOffsets(refs []objread.ObjectRef) []int64 {
	var out []int64
	for _, r := range refs {
		out = append(out, r.FirstOffset)
	}
	return out
}

// Reads below the first indexed batch go to objects (at most MaxObjectRefs ranges from
// the one holding the offset), reads from it to the index; once the WAL bytes of
// uploaded batches are trimmed, their offsets are read from objects.
func TestMutTierReads(t *testing.T) {
	p, log := tiered(t), &memLog{}
	put(t, p, log, 2, 50) // [12,13]
	b14 := put(t, p, log, 1, 40)
	objs := func(off int64) []int64 {
		t.Helper()
		pieces, _, _, err := p.Read(off, 1<<20, true, -1)
		if err != nil {
			t.Fatalf("read %d: %v", off, err)
		}
		if len(pieces) == 0 || pieces[0].Objs == nil {
			return nil
		}
		return firstOffsets(pieces[0].Objs)
	}
	for off, want := range map[int64][]int64{0: {0, 2, 4, 6}, 3: {2, 4, 6, 8}, 9: {8, 10}, 11: {10}, 12: nil, 14: nil} {
		if got := objs(off); !equalInts(got, want) {
			t.Fatalf("read %d from objects %v, want %v", off, got, want)
		}
	}
	if from, end, refs := p.ObjectSpan(); from != 0 || end != 12 || len(refs) != 6 {
		t.Fatalf("object span [%d, %d) of %d refs", from, end, len(refs))
	}
	for ts, want := range map[int64][]int64{0: {0, 2, 4, 6}, 250: {4, 6, 8, 10}, 600: {10}, 601: nil} {
		if refs, _ := p.ObjectsForTime(ts); !equalInts(firstOffsets(refs), want) {
			t.Fatalf("ObjectsForTime(%d) = %v, want %v", ts, firstOffsets(refs), want)
		}
	}
	if off, ts := p.MaxTimestamp(); off != 11 || ts != 600 {
		t.Fatalf("MaxTimestamp over objects and index = %d %d", off, ts)
	}
	// Uploaded and trimmed: [12,13] is read from objects, [14] still from the WAL.
	p.MarkUploaded(NewTierObj(metadata.ObjectRange{Object: 7, FirstOffset: 12, LastOffset: 13, MaxTimestamp: 50, Bytes: 10}, "k7", 100), log)
	if got := objs(12); got != nil {
		t.Fatalf("an uploaded batch still in the WAL read from objects: %v", got)
	}
	p.DropUploaded(b14.loc.pos, log)
	if got := objs(12); !equalInts(got, []int64{12}) {
		t.Fatalf("a trimmed batch read from objects %v, want [12]", got)
	}
	if got := objs(14); got != nil {
		t.Fatalf("a batch only the WAL holds read from objects: %v", got)
	}
	// Objects below the log start hold no maximum.
	p.SetLogStart(12)
	if off, ts := p.MaxTimestamp(); off != 13 || ts != 50 {
		t.Fatalf("MaxTimestamp above the log start = %d %d", off, ts)
	}
	if refs, ls := p.ObjectsForTime(0); ls != 12 || !equalInts(firstOffsets(refs), []int64{12}) {
		t.Fatalf("ObjectsForTime above the log start = %v (log start %d)", firstOffsets(refs), ls)
	}
}

// The uploader is handed the synced batches after the manifest's end, dense, up to
// maxBytes exactly but at least one; never an unsynced batch; nothing while loading.
func TestMutPendingUpload(t *testing.T) {
	p, log := tiered(t), &memLog{}
	a := put(t, p, log, 2, -1)
	b := put(t, p, log, 1, -1)
	if _, _, err := prep(t, p, -1, -1, -1, 1, -1); err != nil {
		t.Fatal(err)
	}
	sa, sb := int64(a.loc.size), int64(b.loc.size)
	bases := func(maxBytes int64) []int64 {
		t.Helper()
		pieces, bytes := p.PendingUpload(maxBytes)
		var out []int64
		var sum int64
		for _, pc := range pieces {
			out = append(out, pc.Base)
			sum += int64(pc.Size)
		}
		if sum != bytes {
			t.Fatalf("PendingUpload says %d bytes, pieces hold %d", bytes, sum)
		}
		return out
	}
	for maxBytes, want := range map[int64][]int64{1 << 20: {12, 14}, sa + sb: {12, 14}, sa + sb - 1: {12}, 1: {12}} {
		if got := bases(maxBytes); !equalInts(got, want) {
			t.Fatalf("PendingUpload(%d) = %v, want %v", maxBytes, got, want)
		}
	}
	if bytes, oldest := p.Pending(); bytes != sa+sb || oldest.IsZero() {
		t.Fatalf("pending %d bytes since %v", bytes, oldest)
	}
	if pos, ok := p.WALNeed(log); !ok || pos != a.loc.pos {
		t.Fatalf("WAL needed from %d %v, want %d", pos, ok, a.loc.pos)
	}
	if _, ok := p.WALNeed(&memLog{}); ok {
		t.Fatal("another WAL is needed")
	}
	p.MarkUploaded(NewTierObj(metadata.ObjectRange{Object: 7, FirstOffset: 12, LastOffset: 13}, "k7", 100), log)
	p.MarkUploaded(NewTierObj(metadata.ObjectRange{Object: 3, FirstOffset: 4, LastOffset: 5}, "k3", 100), log) // stale
	if p.Uploaded() != 14 {
		t.Fatalf("uploaded %d", p.Uploaded())
	}
	if got := bases(1 << 20); !equalInts(got, []int64{14}) {
		t.Fatalf("after the upload of [12,13]: %v", got)
	}
	if pos, ok := p.WALNeed(log); !ok || pos != b.loc.pos {
		t.Fatalf("WAL needed from %d %v, want %d", pos, ok, b.loc.pos)
	}
	if bytes, _ := p.Pending(); bytes != sb {
		t.Fatalf("pending %d bytes, want %d", bytes, sb)
	}
	q := New("t", metadata.TopicID{1}, 0, 5, 0)
	if pieces, _ := q.PendingUpload(1 << 20); pieces != nil {
		t.Fatal("a loading partition offered data to upload")
	}
}

// Retention acts on whole object ranges: by time, those whose max timestamp is older
// than the limit (a range exactly at it stays); by size, the oldest ranges while what
// remains (objects and pending WAL data) is at least the limit.
func TestMutRetentionStart(t *testing.T) {
	p := tiered(t)
	if got := p.RetentionStart(1000, 700, -1); got != 4 {
		t.Fatalf("retention by time from %d, want 4", got)
	}
	if got := p.RetentionStart(1000, 1000, -1); got != 0 {
		t.Fatalf("nothing old enough: %d", got)
	}
	if got := p.RetentionStart(1000, -1, 50); got != 2 {
		t.Fatalf("retention to 50 of 60 bytes from %d, want 2", got)
	}
	if got := p.RetentionStart(1000, -1, 51); got != 0 {
		t.Fatalf("retention to 51 of 60 bytes from %d, want none", got)
	}
	if got := p.RetentionStart(1000, 700, 30); got != 6 {
		t.Fatalf("both limits: %d, want 6", got)
	}
	p.SetLogStart(4)
	if got := p.RetentionStart(1000, 700, -1); got != 0 {
		t.Fatalf("retention at the log start: %d", got)
	}
	if got := p.RetentionStart(1000, 500, -1); got != 8 {
		t.Fatalf("retention past the log start: %d, want 8", got)
	}
	q := New("t", metadata.TopicID{1}, 0, 5, 0)
	if got := q.RetentionStart(1000, 0, 0); got != 0 {
		t.Fatalf("a loading partition asked for retention from %d", got)
	}
}

// Batches read from another broker's WAL (a previous leader's) leave the index once
// object storage holds them — that WAL may be trimmed by its owner — also when the
// manifest comes with a view rather than this broker's own upload; a batch whose last
// offset object storage does not hold yet stays.
func TestMutForeignBatchesLeaveAtUpload(t *testing.T) {
	src, log := ready(t), &memLog{}
	for i := 0; i < 4; i++ {
		put(t, src, log, 1, -1) // [0] [1] [2] [3] in the previous leader's WAL
	}
	p := New("t", metadata.TopicID{1}, 0, 5, 0)
	p.UseOwn(&memLog{}, SourceID{Broker: 2, Epoch: 1})
	v := metadata.NewView(1, "c", 1, nil, nil)
	p.Apply(metadata.Partition{Leader: 2, LeaderEpoch: 5, Logs: []metadata.LogRange{{Broker: 1}}}, v, true)
	for _, b := range src.Batches() {
		data := make([]byte, b.Size)
		if err := b.Src.ReadAt(data, b.Pos); err != nil {
			t.Fatal(err)
		}
		h, _ := recbatch.Parse(data)
		p.Collect(&h, log, b.Pos, int(b.Size))
	}
	if _, err := p.FinishLoad(-1, false, true); err != nil {
		t.Fatal(err)
	}
	fromObjects := func(off int64) bool {
		t.Helper()
		pieces, _, _, err := p.Read(off, 1<<20, true, -1)
		if err != nil || len(pieces) == 0 {
			t.Fatalf("read %d: %d pieces %v", off, len(pieces), err)
		}
		return pieces[0].Objs != nil
	}
	if fromObjects(0) {
		t.Fatal("read from objects before any upload")
	}
	// Another broker's upload, seen in a view: [0,1] are in objects.
	p.Apply(metadata.Partition{Leader: 2, LeaderEpoch: 5, Logs: []metadata.LogRange{{Broker: 1}},
		Objects: []metadata.ObjectRange{{Object: 1, FirstOffset: 0, LastOffset: 1}}}, v, true)
	if !fromObjects(0) || !fromObjects(1) {
		t.Fatal("offsets object storage holds are still read from the previous leader's WAL")
	}
	if fromObjects(2) {
		t.Fatal("offset 2, not uploaded, read from objects")
	}
	if bs := p.Batches(); len(bs) != 2 || bs[0].Base != 2 {
		t.Fatalf("index after the upload: %+v", bs)
	}
}

// Edges of the object-side answers: a range whose last offset is the log start still
// counts; an empty index leaves the whole manifest to objects; retention limits of 0
// delete every range; a single-offset range right after the manifest's end is recorded;
// a partition handing off still uploads.
func TestMutTierEdges(t *testing.T) {
	p := tiered(t)
	if from, end, _ := p.ObjectSpan(); from != 0 || end != 12 {
		t.Fatalf("object span without an index [%d, %d)", from, end)
	}
	if got := p.RetentionStart(1000, 0, -1); got != 12 {
		t.Fatalf("retention.ms 0 from %d, want 12", got)
	}
	if got := p.RetentionStart(1000, -1, 0); got != 12 {
		t.Fatalf("retention.bytes 0 from %d, want 12", got)
	}
	p.SetLogStart(11)
	if refs, _ := p.ObjectsForTime(0); len(refs) != 1 || refs[0].FirstOffset != 10 {
		t.Fatalf("ObjectsForTime with the log start at a range's last offset: %v", firstOffsets(refs))
	}
	if off, ts := p.MaxTimestamp(); off != 11 || ts != 600 {
		t.Fatalf("MaxTimestamp with the log start at a range's last offset: %d %d", off, ts)
	}
	if off, ts, ok := p.OffsetForTime(0); ok || off != -1 || ts != -1 {
		t.Fatalf("OffsetForTime without an index: %d %d %v", off, ts, ok)
	}
	if off, ts := ready(t).MaxTimestamp(); off != -1 || ts != -1 {
		t.Fatalf("MaxTimestamp of an empty partition: %d %d", off, ts)
	}
	log := &memLog{}
	put(t, p, log, 1, -1) // [12]
	p.MarkUploaded(NewTierObj(metadata.ObjectRange{Object: 7, FirstOffset: 12, LastOffset: 12}, "k7", 10), log)
	if p.Uploaded() != 13 {
		t.Fatalf("a one-offset range after the manifest's end: uploaded %d, want 13", p.Uploaded())
	}
	if _, end, _ := p.ObjectSpan(); end != 12 {
		t.Fatalf("object span ends at %d, want the first indexed batch 12", end)
	}
	put(t, p, log, 1, -1) // [13]
	p.Apply(metadata.Partition{Leader: 1, LeaderEpoch: 5, Moving: true, Logs: []metadata.LogRange{{Broker: 1}}}, metadata.NewView(1, "c", 1, nil, nil), true)
	if p.State() != Closing {
		t.Fatalf("state %v", p.State())
	}
	if pieces, _ := p.PendingUpload(1 << 20); len(pieces) != 1 || pieces[0].Base != 13 {
		t.Fatalf("a partition handing off uploads %+v", pieces)
	}
	// A stale view whose log start is past every range drops them all.
	p.Apply(metadata.Partition{Leader: 1, LeaderEpoch: 5, Moving: true, LogStartOffset: 13, Logs: []metadata.LogRange{{Broker: 1}},
		Objects: []metadata.ObjectRange{{Object: 1, FirstOffset: 0, LastOffset: 1}}}, metadata.NewView(1, "c", 1, nil, nil), true)
	if _, _, refs := p.ObjectSpan(); len(refs) != 0 {
		t.Fatalf("ranges below the log start kept: %v", firstOffsets(refs))
	}
}

// The uploader never starts a range that does not continue the manifest: offsets
// between the manifest's end (or 0) and the first indexed batch must be below the log
// start, else they are nowhere and nothing is uploaded.
func TestMutUploadContinuesManifest(t *testing.T) {
	src, log := ready(t), &memLog{}
	for i := 0; i < 3; i++ {
		put(t, src, log, 2, -1) // [0,1] [2,3] [4,5]
	}
	load := func(logStart int64, objs []metadata.ObjectRange) *Partition {
		p := New("t", metadata.TopicID{1}, 0, 5, logStart)
		p.Apply(metadata.Partition{Leader: 1, LeaderEpoch: 5, LogStartOffset: logStart, Logs: []metadata.LogRange{{Broker: 1}}, Objects: objs}, metadata.NewView(1, "c", 1, nil, nil), true)
		b := src.Batches()[2]
		data := make([]byte, b.Size)
		if err := b.Src.ReadAt(data, b.Pos); err != nil {
			t.Fatal(err)
		}
		h, _ := recbatch.Parse(data)
		p.Collect(&h, log, b.Pos, int(b.Size))
		if _, err := p.FinishLoad(-1, true, true); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		logStart int64
		objs     []metadata.ObjectRange
		ok       bool
	}{
		{0, nil, false}, {3, nil, false}, {4, nil, true},
		{0, []metadata.ObjectRange{{Object: 1, FirstOffset: 0, LastOffset: 1}}, false},
		{4, []metadata.ObjectRange{{Object: 1, FirstOffset: 0, LastOffset: 1}}, true},
		{0, []metadata.ObjectRange{{Object: 1, FirstOffset: 0, LastOffset: 3}}, true},
	} {
		pieces, _ := load(c.logStart, c.objs).PendingUpload(1 << 20)
		if (len(pieces) == 1) != c.ok {
			t.Fatalf("log start %d, manifest %+v: %d pieces, want upload %v", c.logStart, c.objs, len(pieces), c.ok)
		}
	}
}
