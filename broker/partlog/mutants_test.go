package partlog

// Tests written against the mutants gremlins found alive (docs/MUTATION.md): each one
// pins down an observable rule of the ack path — dense offsets, what a read may return,
// rollback, producer windows, epochs, chains, loads — at the boundary a mutant moved.

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/weir-io/weir/internal/kafkatest"
	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
)

// prep prepares (does not commit) a batch of n records of producer pid; ts >= 0 stamps it
// with that LogAppendTime.
func prep(t *testing.T, p *Partition, pid int64, epoch int16, seq int32, n int, ts int64) (Prepared, []byte, error) {
	t.Helper()
	vals := make([][]byte, n)
	for i := range vals {
		vals[i] = []byte{byte(i)}
	}
	b := kafkatest.Batch(pid, epoch, seq, vals...)
	h, err := recbatch.ValidateProduce(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	pr, err := p.Prepare(&h, b, ts)
	return pr, b, err
}

// put prepares and commits a non-idempotent batch of n records stamped ts.
func put(t *testing.T, p *Partition, log *memLog, n int, ts int64) Prepared {
	t.Helper()
	pr, b, err := prep(t, p, -1, -1, -1, n, ts)
	if err != nil || pr.Dup != nil {
		t.Fatalf("prepare: %v %v", pr.Dup, err)
	}
	p.Commit(pr, log, log.add(b))
	return pr
}

func pieceBases(t *testing.T, pieces []Piece) []int64 {
	t.Helper()
	var out []int64
	for _, pc := range pieces {
		data := pc.Data
		if data == nil {
			data = make([]byte, pc.Size)
			if err := pc.Src.ReadAt(data, pc.Pos); err != nil {
				t.Fatal(err)
			}
		}
		h, err := recbatch.Parse(data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, h.BaseOffset)
	}
	return out
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A read returns whole batches up to maxBytes exactly (a batch that just fits is served),
// at least one with minOne, none without; reads below the log start or above the high
// watermark are out of range, reads at either edge are not.
func TestMutReadBudgetAndEdges(t *testing.T) {
	p, log := ready(t), &memLog{}
	var size int
	for i := 0; i < 3; i++ {
		pr := put(t, p, log, 2, -1)
		size = int(pr.loc.size)
	}
	read := func(off int64, maxBytes int, minOne bool) []int64 {
		t.Helper()
		pieces, _, _, err := p.Read(off, maxBytes, minOne, -1)
		if err != nil {
			t.Fatalf("read %d: %v", off, err)
		}
		return pieceBases(t, pieces)
	}
	if got := read(0, 2*size, false); !equalInts(got, []int64{0, 2}) {
		t.Fatalf("two batches' worth of bytes served %v", got)
	}
	if got := read(0, 2*size-1, false); !equalInts(got, []int64{0}) {
		t.Fatalf("one byte short of two batches served %v", got)
	}
	if got := read(0, 0, false); len(got) != 0 {
		t.Fatalf("maxBytes 0 without minOne served %v", got)
	}
	if got := read(3, 0, true); !equalInts(got, []int64{2}) {
		t.Fatalf("minOne at offset 3 served %v", got)
	}
	if got := read(5, 1<<20, true); !equalInts(got, []int64{4}) {
		t.Fatalf("last offset served %v", got)
	}
	if got := read(6, 1<<20, true); len(got) != 0 {
		t.Fatalf("read at the high watermark served %v", got)
	}
	p.SetLogStart(3)
	if got := read(3, 1<<20, true); !equalInts(got, []int64{2, 4}) {
		t.Fatalf("read at the log start served %v", got)
	}
	if _, _, _, err := p.Read(2, 1<<20, true, -1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below the log start: %v", err)
	}
	if _, _, _, err := p.Read(7, 1<<20, true, -1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read above the high watermark: %v", err)
	}
}

// A batch the WAL has not synced is never served, even when a later one was.
func TestMutUnsyncedNeverServed(t *testing.T) {
	p, log := ready(t), &memLog{}
	a, ab, _ := prep(t, p, -1, -1, -1, 1, -1)
	b, bb, _ := prep(t, p, -1, -1, -1, 1, -1)
	p.Commit(b, log, log.add(bb))
	pieces, _, _, err := p.Read(0, 1<<20, true, -1)
	if err != nil || len(pieces) != 0 {
		t.Fatalf("read before the first batch synced: %d pieces, %v", len(pieces), err)
	}
	if n := len(p.Batches()); n != 0 {
		t.Fatalf("Batches lists %d batches before the first synced", n)
	}
	if off, _, ok := p.OffsetForTime(0); ok {
		t.Fatalf("OffsetForTime found %d in unsynced data", off)
	}
	if bytes, _ := p.Pending(); bytes != 0 {
		t.Fatalf("%d bytes pending upload before the first batch synced", bytes)
	}
	p.Commit(a, log, log.add(ab))
	pieces, _, _, _ = p.Read(0, 1<<20, true, -1)
	if got := pieceBases(t, pieces); !equalInts(got, []int64{0, 1}) {
		t.Fatalf("after both synced: %v", got)
	}
}

// LogAppendTime stamps the batch (type bit, max timestamp) even with time 0; without it
// the client's max timestamp is kept.
func TestMutLogAppendTime(t *testing.T) {
	p, log := ready(t), &memLog{}
	pr, b, err := prep(t, p, -1, -1, -1, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	p.Commit(pr, log, log.add(b))
	h, err := recbatch.Parse(b)
	if err != nil || h.Attributes&0x08 == 0 || h.MaxTimestamp != 0 || !recbatch.CRCOK(b) {
		t.Fatalf("stamped at 0: attrs %#x max ts %d crc ok %v (%v)", h.Attributes, h.MaxTimestamp, recbatch.CRCOK(b), err)
	}
	put(t, p, log, 1, -1)
	if off, ts := p.MaxTimestamp(); off != 1 || ts != 1700000000000 {
		t.Fatalf("max timestamp at %d: %d", off, ts)
	}
	if off, ts, ok := p.OffsetForTime(0); !ok || off != 0 || ts != 0 {
		t.Fatalf("OffsetForTime(0) = %d %d %v", off, ts, ok)
	}
}

// OffsetForTime answers the first batch whose max timestamp reaches ts (clamped to the
// log start); MaxTimestamp the first batch holding the largest one, synced data only.
func TestMutTimestamps(t *testing.T) {
	p, log := ready(t), &memLog{}
	for _, ts := range []int64{100, 300, 300, 200} {
		put(t, p, log, 3, ts) // batches [0,2] [3,5] [6,8] [9,11]
	}
	for _, c := range []struct{ ts, off, bts int64 }{{0, 0, 100}, {100, 0, 100}, {101, 3, 300}, {300, 3, 300}} {
		if off, bts, ok := p.OffsetForTime(c.ts); !ok || off != c.off || bts != c.bts {
			t.Fatalf("OffsetForTime(%d) = %d %d %v, want %d %d", c.ts, off, bts, ok, c.off, c.bts)
		}
	}
	if off, _, ok := p.OffsetForTime(301); ok {
		t.Fatalf("OffsetForTime past every timestamp found %d", off)
	}
	if off, ts := p.MaxTimestamp(); off != 5 || ts != 300 {
		t.Fatalf("MaxTimestamp = %d %d, want the first batch with 300 (last offset 5)", off, ts)
	}
	// An unsynced batch with a later timestamp counts for neither.
	if _, _, err := prep(t, p, -1, -1, -1, 1, 900); err != nil {
		t.Fatal(err)
	}
	if off, ts := p.MaxTimestamp(); off != 5 || ts != 300 {
		t.Fatalf("MaxTimestamp with an unsynced batch = %d %d", off, ts)
	}
	if off, _, ok := p.OffsetForTime(500); ok {
		t.Fatalf("OffsetForTime found unsynced data at %d", off)
	}
	p.Rollback(12)
	p.SetLogStart(1)
	if off, bts, ok := p.OffsetForTime(50); !ok || off != 1 || bts != 100 {
		t.Fatalf("OffsetForTime inside the batch holding the log start = %d %d %v", off, bts, ok)
	}
	if off, _, ok := p.OffsetForTime(150); !ok || off != 3 {
		t.Fatalf("OffsetForTime above the log start = %d %v", off, ok)
	}
}

// The leader epoch a request carries: -1 is unchecked, older is fenced, newer unknown;
// epoch 0 is an epoch like any other.
func TestMutCheckEpoch(t *testing.T) {
	p := ready(t) // epoch 3
	for cur, want := range map[int32]error{-1: nil, 0: ErrFencedEpoch, 2: ErrFencedEpoch, 3: nil, 4: ErrUnknownEpoch} {
		if err := p.CheckEpoch(cur); !errors.Is(err, want) || (want == nil && err != nil) {
			t.Fatalf("CheckEpoch(%d) = %v, want %v", cur, err, want)
		}
	}
	z := New("t", metadata.TopicID{1}, 0, 0, 0)
	z.FinishLoad(-1, false, true)
	if err := z.CheckEpoch(0); err != nil {
		t.Fatalf("epoch 0 at epoch 0: %v", err)
	}
	if err := z.CheckEpoch(1); !errors.Is(err, ErrUnknownEpoch) {
		t.Fatalf("epoch 1 at epoch 0: %v", err)
	}
}

// OffsetForLeaderEpoch: an epoch whose only batch was rolled back owns no offsets, so a
// follower asking for it is told where the previous epoch ended.
func TestMutEpochEnds(t *testing.T) {
	p, log := ready(t), &memLog{} // epoch 3
	put(t, p, log, 2, -1)         // [0,1] epoch 3
	v := metadata.NewView(1, "c", 1, nil, nil)
	p.Apply(metadata.Partition{Leader: 1, LeaderEpoch: 4}, v, false)
	pr, _, err := prep(t, p, -1, -1, -1, 1, -1) // offset 2, epoch 4, never synced
	if err != nil || pr.Base() != 2 {
		t.Fatal(pr.Base(), err)
	}
	p.Rollback(2)
	if p.End() != 2 {
		t.Fatalf("next offset after rollback %d, want 2", p.End())
	}
	p.Apply(metadata.Partition{Leader: 1, LeaderEpoch: 5}, v, false)
	put(t, p, log, 1, -1) // [2] epoch 5
	for _, c := range []struct{ ask, e int32 }{{2, 2}, {3, 3}, {4, 3}, {5, 5}, {6, -1}} {
		e, end := p.EndOffsetForEpoch(c.ask)
		want := map[int32]int64{2: 0, 3: 2, 4: 2, 5: 3, 6: -1}[c.ask]
		if e != c.e || end != want {
			t.Fatalf("EndOffsetForEpoch(%d) = %d %d, want %d %d", c.ask, e, end, c.e, want)
		}
	}
	// Nothing indexed: an older epoch ended at or below the high watermark.
	q := New("t", metadata.TopicID{1}, 0, 7, 10)
	q.FinishLoad(-1, false, true)
	if e, end := q.EndOffsetForEpoch(6); e != 6 || end != 10 {
		t.Fatalf("empty partition: EndOffsetForEpoch(6) = %d %d", e, end)
	}
}

// Producer ID 0 is a producer like any other: a failed write forgets its batch, so the
// retry is appended at the same offset rather than answered as a duplicate of data that
// was never written; a producer whose only batch failed is forgotten altogether.
func TestMutRollbackProducerZero(t *testing.T) {
	p, log := ready(t), &memLog{}
	if pr, err := appendSynced(t, p, log, 0, 0, 0, 2); err != nil || pr.Base() != 0 {
		t.Fatal(pr.Base(), err)
	}
	pr, _, err := prep(t, p, 0, 0, 2, 1, -1)
	if err != nil || pr.Base() != 2 {
		t.Fatal(pr.Base(), err)
	}
	// The retry of an in-flight batch is a duplicate of an offset not yet readable: the
	// broker answers it only once the high watermark passes it.
	if d, _, err := prep(t, p, 0, 0, 2, 1, -1); err != nil || d.Dup == nil || d.Dup.Offset != 2 {
		t.Fatalf("retry of the in-flight batch: %+v %v", d, err)
	} else if _, hw := p.Offsets(); d.Dup.Offset < hw {
		t.Fatalf("duplicate offset %d already below the high watermark %d", d.Dup.Offset, hw)
	} else if d.Base() >= 0 {
		// A duplicate assigned nothing: its failure must roll nothing back.
		t.Fatalf("a duplicate has base %d", d.Base())
	}
	p.Rollback(2)
	// Only the failed batch is forgotten: the synced one is still recognised, and the
	// producer's sequence still checked.
	if off, dup, err := prepareBatch(p, 0, 0, 0, 2); err != nil || !dup || off != 0 {
		t.Fatalf("retry of the synced batch after the rollback: %d %v %v", off, dup, err)
	}
	if _, _, err := prepareBatch(p, 0, 0, 4, 1); !errors.Is(err, ErrOutOfOrderSeq) {
		t.Fatalf("sequence gap after the rollback: %v", err)
	}
	if pr, err := appendSynced(t, p, log, 0, 0, 2, 1); err != nil || pr.Dup != nil || pr.Base() != 2 {
		t.Fatalf("retry after the failed write: base %d dup %v err %v", pr.Base(), pr.Dup, err)
	}
	if _, hw := p.Offsets(); hw != 3 {
		t.Fatalf("hw %d", hw)
	}
	// Producer 5's first batch fails: it may then start at any sequence again.
	pr, _, err = prep(t, p, 5, 0, 7, 1, -1)
	if err != nil || pr.Base() != 3 {
		t.Fatal(pr.Base(), err)
	}
	p.Rollback(3)
	if pr, err := appendSynced(t, p, log, 5, 0, 0, 1); err != nil || pr.Dup != nil || pr.Base() != 3 {
		t.Fatalf("producer restarting after its only batch failed: base %d dup %v err %v", pr.Base(), pr.Dup, err)
	}
	// A failed batch of a new producer epoch does not fence the old epoch: its next
	// sequence is accepted.
	pr, _, err = prep(t, p, 0, 1, 0, 1, -1)
	if err != nil || pr.Base() != 4 {
		t.Fatal(pr.Base(), err)
	}
	p.Rollback(4)
	if pr, err := appendSynced(t, p, log, 0, 0, 3, 1); err != nil || pr.Dup != nil || pr.Base() != 4 {
		t.Fatalf("old epoch after the new epoch's batch failed: base %d dup %v err %v", pr.Base(), pr.Dup, err)
	}
	// Rolling back at the end changes nothing.
	p.Rollback(p.End())
	if p.End() != 5 {
		t.Fatalf("end %d", p.End())
	}
}

// The window remembers exactly the last five batches; a retry of an older one is out of
// order. A duplicate must match first and last sequence.
func TestMutProducerWindow(t *testing.T) {
	p, log := ready(t), &memLog{}
	for i := int32(0); i < 6; i++ {
		if _, err := appendSynced(t, p, log, 1, 0, i, 1); err != nil {
			t.Fatal(err)
		}
	}
	if off, dup, err := prepareBatch(p, 1, 0, 1, 1); err != nil || !dup || off != 1 {
		t.Fatalf("retry of the oldest batch in the window: %d %v %v", off, dup, err)
	}
	if _, _, err := prepareBatch(p, 1, 0, 0, 1); !errors.Is(err, ErrOutOfOrderSeq) {
		t.Fatalf("retry of a batch out of the window: %v", err)
	}
	if _, _, err := prepareBatch(p, 1, 0, 5, 2); !errors.Is(err, ErrOutOfOrderSeq) {
		t.Fatalf("same first sequence, other length: %v", err)
	}
	if _, _, err := prepareBatch(p, 1, 1, 1, 1); !errors.Is(err, ErrOutOfOrderSeq) {
		t.Fatalf("new epoch not at sequence 0: %v", err)
	}
}

// Sequences wrap at MaxInt32 to 0.
func TestMutSequenceWrap(t *testing.T) {
	p, log := ready(t), &memLog{}
	if _, err := appendSynced(t, p, log, 2, 0, math.MaxInt32-1, 2); err != nil {
		t.Fatal(err)
	}
	if _, _, err := prepareBatch(p, 2, 0, 1, 1); !errors.Is(err, ErrOutOfOrderSeq) {
		t.Fatalf("sequence 1 after MaxInt32: %v", err)
	}
	if off, dup, err := prepareBatch(p, 2, 0, 0, 1); err != nil || dup || off != 2 {
		t.Fatalf("sequence 0 after MaxInt32: %d %v %v", off, dup, err)
	}
}

// A producer snapshot as of an offset holds the batches at or below it, none above, and
// counts the same producers SnapshotProducers announced.
func TestMutProducerSnapshotCut(t *testing.T) {
	p, log := ready(t), &memLog{}
	appendSynced(t, p, log, 1, 0, 0, 2) // [0,1]
	appendSynced(t, p, log, 2, 0, 0, 1) // [2]
	appendSynced(t, p, log, 1, 0, 2, 1) // [3]
	if s := p.ProducerSnapshot(-1); s != nil || p.SnapshotProducers(-1) != 0 {
		t.Fatalf("snapshot below every batch: %+v", s)
	}
	s := p.ProducerSnapshot(2)
	if s == nil || s.Offset != 3 || len(s.Producers) != 2 || p.SnapshotProducers(2) != 2 {
		t.Fatalf("snapshot through 2: %+v (count %d)", s, p.SnapshotProducers(2))
	}
	if b := s.Producers[0].Batches; s.Producers[0].ID != 1 || len(b) != 1 || b[0] != [3]int64{0, 1, 0} {
		t.Fatalf("producer 1 through 2: %+v", s.Producers[0])
	}
	if b := s.Producers[1].Batches; s.Producers[1].ID != 2 || len(b) != 1 || b[0] != [3]int64{0, 0, 2} {
		t.Fatalf("producer 2 through 2: %+v", s.Producers[1])
	}
	if n := p.SnapshotProducers(1); n != 1 {
		t.Fatalf("SnapshotProducers(1) = %d", n)
	}
	if s := p.ProducerSnapshot(0); s == nil || len(s.Producers) != 1 || len(s.Producers[0].Batches) != 1 {
		t.Fatalf("snapshot through 0 (inside the first batch's offsets): %+v", s)
	}
}

// A load takes the manifest's producer snapshot when it reaches exactly where the WAL
// data starts, and applies the WAL batches from the snapshot's offset on over it.
func TestMutRestoreSnapshotAtNeed(t *testing.T) {
	src, log := ready(t), &memLog{}
	for i := int32(0); i < 4; i++ {
		appendSynced(t, src, log, 3, 0, i, 1)
	}
	snap := src.ProducerSnapshot(1) // offset 2
	p := loadFrom(t, src, log, 1, 0, 2, snap)
	if off, dup, err := prepareBatch(p, 3, 0, 0, 1); err != nil || !dup || off != 0 {
		t.Fatalf("retry of a batch only the snapshot knows: %d %v %v", off, dup, err)
	}
	if off, dup, err := prepareBatch(p, 3, 0, 2, 1); err != nil || !dup || off != 2 {
		t.Fatalf("retry of the first batch after the snapshot: %d %v %v", off, dup, err)
	}
	if off, dup, err := prepareBatch(p, 3, 0, 3, 1); err != nil || !dup || off != 3 {
		t.Fatalf("retry of a batch only the WAL knows: %d %v %v", off, dup, err)
	}
	if off, dup, err := prepareBatch(p, 3, 0, 4, 1); err != nil || dup || off != 4 {
		t.Fatalf("next sequence after the load: %d %v %v", off, dup, err)
	}
}

// A batch at or beyond the end recorded for the range (a fenced writer's unacked tail) is
// never indexed, even when that end is offset 0; a batch collected twice (two WALs) is
// indexed once.
func TestMutLoadStopsAtWantEnd(t *testing.T) {
	src, log := ready(t), &memLog{}
	for i := 0; i < 3; i++ {
		put(t, src, log, 1, -1)
	}
	collect := func(p *Partition, bs []Batch) {
		for _, b := range bs {
			data := make([]byte, b.Size)
			if err := b.Src.ReadAt(data, b.Pos); err != nil {
				t.Fatal(err)
			}
			h, _ := recbatch.Parse(data)
			p.Collect(&h, log, b.Pos, int(b.Size))
		}
	}
	bs := src.Batches()
	p := New("t", metadata.TopicID{1}, 0, 4, 0)
	collect(p, append(bs, bs...))
	if gaps, err := p.FinishLoad(2, false, true); err != nil || len(gaps) != 0 {
		t.Fatal(gaps, err)
	}
	if p.End() != 2 || len(p.Batches()) != 2 {
		t.Fatalf("load to 2: end %d, %d batches", p.End(), len(p.Batches()))
	}
	q := New("t", metadata.TopicID{1}, 0, 4, 0)
	collect(q, bs)
	if gaps, err := q.FinishLoad(0, false, true); err != nil || len(gaps) != 0 {
		t.Fatal(gaps, err)
	}
	if q.End() != 0 || len(q.Batches()) != 0 {
		t.Fatalf("load to 0: end %d, %d batches", q.End(), len(q.Batches()))
	}
	// Without serve the index is built but nothing is served until Serve.
	r := New("t", metadata.TopicID{1}, 0, 4, 0)
	collect(r, bs)
	r.FinishLoad(-1, false, false)
	if r.State() != Loading || r.End() != 3 {
		t.Fatalf("load without serve: %v end %d", r.State(), r.End())
	}
	r.Serve()
	if r.State() != Ready {
		t.Fatal("Serve did not serve")
	}
	// Plain batches give no producer any state: producers 0 and 1 may start anywhere.
	for _, pid := range []int64{0, 1} {
		if off, dup, err := prepareBatch(r, pid, 0, 5, 1); err != nil || dup {
			t.Fatalf("producer %d after loading plain batches: %d %v %v", pid, off, dup, err)
		}
	}
}

// Dropping a partition pins this broker's WAL from the first batch object storage does
// not hold (a batch starting right at the uploaded end included) to the partition's end.
func TestMutDropPinsFirstUnuploaded(t *testing.T) {
	p, log := ready(t), &memLog{}
	put(t, p, log, 2, -1) // [0,1]
	second := put(t, p, log, 1, -1)
	put(t, p, log, 1, -1)
	p.MarkUploaded(NewTierObj(metadata.ObjectRange{Object: 1, FirstOffset: 0, LastOffset: 1}, "k", 10), log)
	pos, end, pin := p.Drop(log)
	if !pin || pos != second.loc.pos || end != 4 {
		t.Fatalf("drop: pin %v at %d end %d, want the second batch's position %d and end 4", pin, pos, end, second.loc.pos)
	}
	q, qlog := ready(t), &memLog{}
	put(t, q, qlog, 1, -1)
	q.MarkUploaded(NewTierObj(metadata.ObjectRange{Object: 1, FirstOffset: 0, LastOffset: 0}, "k", 10), qlog)
	if _, _, pin := q.Drop(qlog); pin {
		t.Fatal("a partition object storage holds whole pinned the WAL")
	}
	if _, _, pin := ready(t).Drop(nil); pin {
		t.Fatal("a drop without a WAL pinned")
	}
}

// The cache keeps batches up to its limit exactly, evicting oldest first; limit 0
// caches nothing.
func TestMutCacheLimitExact(t *testing.T) {
	p, log := ready(t), &memLog{}
	var prs []Prepared
	for i := 0; i < 3; i++ {
		prs = append(prs, put(t, p, log, 1, -1))
	}
	size := int64(prs[0].loc.size)
	c := NewCache(2 * size)
	for _, pr := range prs[:2] {
		c.Add(p, pr)
	}
	pieces, _, _, _ := p.Read(0, 1<<20, true, -1)
	if pieces[0].Data == nil || pieces[1].Data == nil {
		t.Fatal("a cache exactly as large as two batches evicted one of them")
	}
	c.Add(p, prs[2])
	pieces, _, _, _ = p.Read(0, 1<<20, true, -1)
	if pieces[0].Data != nil || pieces[1].Data == nil || pieces[2].Data == nil {
		t.Fatal("the third batch did not evict exactly the oldest")
	}
	c.Add(p, Prepared{}) // a duplicate has no location: nothing to cache
	q, qlog := ready(t), &memLog{}
	pr := put(t, q, qlog, 1, -1)
	NewCache(0).Add(q, pr)
	if pieces, _, _, _ := q.Read(0, 1<<20, true, -1); pieces[0].Data != nil {
		t.Fatal("a cache of limit 0 kept a batch")
	}
}

// A partition without a chain in its metadata is wholly the leader's, open-ended; each
// range holds [Start, End).
func TestMutChain(t *testing.T) {
	c := ChainOf(metadata.Partition{Leader: 7})
	if len(c) != 1 || c[0] != (LogRange{Broker: 7, Start: 0, End: -1}) {
		t.Fatalf("chain without logs: %+v", c)
	}
	if !c[0].Holds(0) || !c[0].Holds(1<<40) {
		t.Fatal("the open range does not hold everything")
	}
	// A leader that moved before any append owns an empty range: not even offset 0 (a
	// fenced writer's unacked batch there is in nobody's log).
	c = ChainOf(metadata.Partition{Leader: 2, Logs: []metadata.LogRange{{Broker: 1, StartOffset: 0}, {Broker: 2, StartOffset: 0}}})
	if c[0] != (LogRange{1, 0, 0}) || c[0].Holds(0) || !c[1].Holds(0) {
		t.Fatalf("empty first range: %+v holds 0: %v %v", c, c[0].Holds(0), c[1].Holds(0))
	}
	c = ChainOf(metadata.Partition{Leader: 2, Logs: []metadata.LogRange{{Broker: 1, StartOffset: 5}, {Broker: 2, StartOffset: 9}}})
	if len(c) != 2 || c[0] != (LogRange{1, 5, 9}) || c[1] != (LogRange{2, 9, -1}) {
		t.Fatalf("chain: %+v", c)
	}
	for off, want := range map[int64][2]bool{4: {false, false}, 5: {true, false}, 8: {true, false}, 9: {false, true}, 100: {false, true}} {
		if c[0].Holds(off) != want[0] || c[1].Holds(off) != want[1] {
			t.Fatalf("offset %d held %v %v, want %v", off, c[0].Holds(off), c[1].Holds(off), want)
		}
	}
}

// A batch record's prefix is checked against the shortest valid batch exactly.
func TestMutDecodeBatchRecLength(t *testing.T) {
	id := metadata.TopicID{9}
	rec := EncodeBatchRec(id, 3, make([]byte, recbatch.HeaderLen))
	gid, part, batch, err := DecodeBatchRec(rec)
	if err != nil || gid != id || part != 3 || len(batch) != recbatch.HeaderLen {
		t.Fatalf("shortest record: %v %d %d %v", gid, part, len(batch), err)
	}
	if _, _, _, err := DecodeBatchRec(rec[:len(rec)-1]); err == nil {
		t.Fatal("a record one byte short decoded")
	}
	if h := BatchRecHead(id, 3); string(h) != string(rec[:BatchRecHdr]) || binary.BigEndian.Uint32(h[16:]) != 3 {
		t.Fatalf("head %x", h)
	}
}

// A log start inside a batch only the WAL holds (DeleteRecords to the middle of a batch,
// then a new leader loads) keeps that batch: its offsets from the log start on were
// acked, so they stay readable and the next batch goes after it, not onto them.
func TestMutLoadKeepsBatchHoldingLogStart(t *testing.T) {
	src, log := ready(t), &memLog{}
	put(t, src, log, 4, -1) // [0,3]
	put(t, src, log, 1, -1) // [4]
	p := New("t", metadata.TopicID{1}, 0, 4, 2)
	for _, b := range src.Batches() {
		data := make([]byte, b.Size)
		if err := b.Src.ReadAt(data, b.Pos); err != nil {
			t.Fatal(err)
		}
		h, _ := recbatch.Parse(data)
		p.Collect(&h, log, b.Pos, int(b.Size))
	}
	if gaps, err := p.FinishLoad(-1, false, true); err != nil || len(gaps) != 0 {
		t.Fatal(gaps, err)
	}
	if p.End() != 5 {
		t.Fatalf("after the load the next offset is %d, want 5", p.End())
	}
	pieces, hw, ls, err := p.Read(2, 1<<20, true, -1)
	if err != nil || hw != 5 || ls != 2 {
		t.Fatalf("read at the log start: hw %d log start %d %v", hw, ls, err)
	}
	if got := pieceBases(t, pieces); !equalInts(got, []int64{0, 4}) {
		t.Fatalf("read at the log start served batches %v, want [0 4]", got)
	}
	// With only that batch in the WAL the next offset is past it, not the log start.
	q := New("t", metadata.TopicID{1}, 0, 4, 2)
	b := src.Batches()[0]
	data := make([]byte, b.Size)
	if err := b.Src.ReadAt(data, b.Pos); err != nil {
		t.Fatal(err)
	}
	h, _ := recbatch.Parse(data)
	q.Collect(&h, log, b.Pos, int(b.Size))
	if _, err := q.FinishLoad(-1, false, true); err != nil || q.End() != 4 {
		t.Fatalf("load of the one batch: end %d (%v), want 4: offsets 2 and 3 would be handed out again", q.End(), err)
	}
}

// A load rebuilds the window of producer 0 like any other's: its retry is a duplicate.
func TestMutLoadRebuildsProducerZero(t *testing.T) {
	src, log := ready(t), &memLog{}
	appendSynced(t, src, log, 0, 2, 0, 2)
	appendSynced(t, src, log, 0, 2, 2, 1)
	p := New("t", metadata.TopicID{1}, 0, 4, 0)
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
	if off, dup, err := prepareBatch(p, 0, 2, 0, 2); err != nil || !dup || off != 0 {
		t.Fatalf("retry of producer 0's first batch after a load: %d %v %v", off, dup, err)
	}
	if _, _, err := prepareBatch(p, 0, 2, 7, 1); err == nil {
		t.Fatal("producer 0's sequence gap accepted after a load")
	}
	if _, _, err := prepareBatch(p, 0, 1, 3, 1); err == nil {
		t.Fatal("producer 0's old epoch accepted after a load")
	}
}

// Fetches waiting for data are woken when the high watermark moves (or the partition is
// dropped), not when a batch is merely prepared; a waiter that gave up is not woken.
func TestMutWaitersWakeOnCommit(t *testing.T) {
	p, log := ready(t), &memLog{}
	c1, c2, c3 := make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{}, 1)
	p.Wait(c1)
	p.Wait(c2)
	p.Wait(c3)
	p.Unwait(c1)
	p.Unwait(make(chan struct{})) // never registered: nothing changes
	pr, b, err := prep(t, p, -1, -1, -1, 1, -1)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range []chan struct{}{c1, c2, c3} {
		if len(c) != 0 {
			t.Fatalf("waiter %d woken by a prepared batch", i+1)
		}
	}
	p.Commit(pr, log, log.add(b))
	if len(c1) != 0 || len(c2) != 1 || len(c3) != 1 {
		t.Fatalf("after the commit: woken %d %d %d, want 0 1 1", len(c1), len(c2), len(c3))
	}
	<-c2
	<-c3
	put(t, p, log, 1, -1)
	if len(c2) != 0 || len(c3) != 0 {
		t.Fatal("a waiter stayed registered after it was woken")
	}
	c4 := make(chan struct{}, 1)
	p.Wait(c4)
	p.Drop(nil)
	if len(c4) != 1 {
		t.Fatal("a drop did not wake its waiter")
	}
}

// A log start at a batch's last offset keeps that batch at a load; a log start past
// the local end (the metadata knows more than this log) moves the next offset and the
// high watermark to it, so no offset below it is handed out again.
func TestMutLogStartEdges(t *testing.T) {
	src, log := ready(t), &memLog{}
	put(t, src, log, 4, -1) // [0,3]
	p := New("t", metadata.TopicID{1}, 0, 4, 3)
	b := src.Batches()[0]
	data := make([]byte, b.Size)
	if err := b.Src.ReadAt(data, b.Pos); err != nil {
		t.Fatal(err)
	}
	h, _ := recbatch.Parse(data)
	p.Collect(&h, log, b.Pos, int(b.Size))
	if _, err := p.FinishLoad(-1, false, true); err != nil {
		t.Fatal(err)
	}
	if pieces, _, _, err := p.Read(3, 1<<20, true, -1); err != nil || len(pieces) != 1 {
		t.Fatalf("read of the log start, the batch's last offset: %d pieces %v", len(pieces), err)
	}
	p.SetLogStart(10)
	if ls, hw := p.Offsets(); ls != 10 || hw != 10 || p.End() != 10 {
		t.Fatalf("log start past the end: offsets %d %d end %d", ls, hw, p.End())
	}
	if pr, _, err := prep(t, p, -1, -1, -1, 1, -1); err != nil || pr.Base() != 10 {
		t.Fatalf("first append after the log start moved past the end at %d (%v)", pr.Base(), err)
	}
	p.SetLogStart(5) // backwards: ignored
	if ls, _ := p.Offsets(); ls != 10 {
		t.Fatalf("log start moved back to %d", ls)
	}
}

// A manifest snapshot holding more batches than the window keeps the newest five.
func TestMutSnapshotLongerThanWindow(t *testing.T) {
	src, log := ready(t), &memLog{}
	for i := int32(0); i < 6; i++ {
		appendSynced(t, src, log, 4, 0, i, 1)
	}
	snap := &metadata.ProducerSnapshot{Offset: 6, Producers: []metadata.ProducerState{{ID: 4, Epoch: 0}}}
	for i := int64(0); i < 6; i++ {
		snap.Producers[0].Batches = append(snap.Producers[0].Batches, [3]int64{i, i, i})
	}
	p := loadFrom(t, src, log, 5, 0, 6, snap)
	if _, _, err := prepareBatch(p, 4, 0, 0, 1); !errors.Is(err, ErrOutOfOrderSeq) {
		t.Fatalf("retry of the sixth-newest batch: %v", err)
	}
	if off, dup, err := prepareBatch(p, 4, 0, 1, 1); err != nil || !dup || off != 1 {
		t.Fatalf("retry of the fifth-newest batch: %d %v %v", off, dup, err)
	}
	if off, dup, err := prepareBatch(p, 4, 0, 6, 1); err != nil || dup || off != 6 {
		t.Fatalf("next sequence: %d %v %v", off, dup, err)
	}
}

// A view older than this broker's own upload (the watch lags the commit) keeps the
// manifest this broker knows, dropping only ranges wholly below its log start.
func TestMutStaleManifestView(t *testing.T) {
	p, log := tiered(t), &memLog{}
	put(t, p, log, 2, -1) // [12,13]
	p.MarkUploaded(NewTierObj(metadata.ObjectRange{Object: 7, FirstOffset: 12, LastOffset: 13}, "k7", 100), log)
	var objs []metadata.ObjectRange
	for i := int64(0); i < 6; i++ {
		objs = append(objs, metadata.ObjectRange{Object: uint64(i + 1), FirstOffset: 2 * i, LastOffset: 2*i + 1})
	}
	p.Apply(metadata.Partition{Leader: 1, LeaderEpoch: 5, LogStartOffset: 3, Logs: []metadata.LogRange{{Broker: 1}}, Objects: objs}, metadata.NewView(1, "c", 1, nil, nil), true)
	if p.Uploaded() != 14 {
		t.Fatalf("a stale view moved the uploaded end to %d", p.Uploaded())
	}
	if _, _, refs := p.ObjectSpan(); !equalInts(firstOffsets(refs), []int64{2, 4, 6, 8, 10, 12}) {
		t.Fatalf("manifest after a stale view with log start 3: %v", firstOffsets(refs))
	}
}

// The set holds partitions by topic and index; deleting a topic's last partition
// forgets the topic.
func TestMutSet(t *testing.T) {
	s := NewSet()
	a, b := New("a", metadata.TopicID{1}, 0, 1, 0), New("a", metadata.TopicID{1}, 1, 1, 0)
	s.Update(func(tx SetTx) { tx.Put(a); tx.Put(b) })
	if s.Len() != 2 || s.Get(a.id, 1) != b {
		t.Fatalf("set of %d", s.Len())
	}
	topics := func() int {
		n := 0
		s.Update(func(tx SetTx) { tx.Topics(func(metadata.TopicID, map[int32]*Partition) { n++ }) })
		return n
	}
	s.Update(func(tx SetTx) { tx.Delete(a) })
	if topics() != 1 || s.Get(a.id, 0) != nil {
		t.Fatal("deleting one of two partitions")
	}
	s.Update(func(tx SetTx) { tx.Delete(b) })
	if topics() != 0 || s.Len() != 0 {
		t.Fatal("deleting the last partition kept the topic")
	}
}
