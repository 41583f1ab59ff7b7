package partlog

import (
	"errors"
	"os"
	"testing"

	"github.com/weir-io/weir/internal/kafkatest"
	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/wal"
	"github.com/weir-io/weir/wal/waltest"
)

// walAt opens (and replays) a WAL in dir of fs.
func walAt(t *testing.T, fs wal.FS, dir string) *wal.WAL {
	t.Helper()
	cfg := wal.DefaultConfig(dir)
	cfg.FS, cfg.SegmentSize = fs, 1<<20
	w, err := wal.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Replay(nil); err != nil {
		t.Fatal(err)
	}
	return w
}

// batchAt is a batch of n records with offsets assigned from base in leader epoch 1.
func batchAt(base int64, n int) []byte {
	vals := make([][]byte, n)
	for i := range vals {
		vals[i] = []byte{byte(i)}
	}
	b := kafkatest.Batch(-1, -1, -1, vals...)
	recbatch.SetOffsetEpoch(b, base, 1)
	return b
}

// A load reads every WAL directory of each chain range's broker (up to MaxEpoch), takes
// from each only the batches whose base offset falls in that broker's ranges — not a
// fenced writer's tail past its range's end, not other partitions, not proxied batches —
// indexes them as read through the directory's own Reader when it has one, hands other
// records to Other and counts what it scanned.
func TestMutLoaderReadsChainDirectories(t *testing.T) {
	fs := waltest.NewMemFS()
	id, other := metadata.TopicID{9}, metadata.TopicID{8}
	w := walAt(t, fs, "/wal/b1/e1")
	appendRec(t, w, RecBatch, EncodeBatchRec(id, 0, batchAt(0, 2)))      // [0,1]
	appendRec(t, w, RecBatch, EncodeBatchRec(other, 0, batchAt(0, 1)))   // another topic
	appendRec(t, w, RecOffsets, []byte(`{"g":"x"}`))                     // legacy offsets
	appendRec(t, w, RecProxyBatch, EncodeBatchRec(id, 0, batchAt(0, 1))) // never linked
	w.Close()
	w = walAt(t, fs, "/wal/b1/e2")
	appendRec(t, w, RecBatch, EncodeBatchRec(id, 0, batchAt(2, 1))) // [2]
	appendRec(t, w, RecBatch, EncodeBatchRec(id, 0, batchAt(3, 1))) // past broker 1's range: unacked tail
	w.Close()
	w = walAt(t, fs, "/wal/b1/e3") // a later registration a recovery must not read
	appendRec(t, w, RecBatch, EncodeBatchRec(id, 0, batchAt(9, 1)))
	w.Close()
	w = walAt(t, fs, "/wal/b2/e1")
	appendRec(t, w, RecBatch, EncodeBatchRec(id, 0, batchAt(3, 2))) // [3,4]
	w.Close()
	own := &memLog{b: make([]byte, 1<<12)}
	dirs := func(b int32) ([]Source, error) {
		switch b {
		case 1:
			return []Source{{Broker: 1, Epoch: 1, Dir: "/wal/b1/e1"}, {Broker: 1, Epoch: 2, Dir: "/wal/b1/e2"}, {Broker: 1, Epoch: 3, Dir: "/wal/b1/e3"}}, nil
		case 2:
			return []Source{{Broker: 2, Epoch: 1, Dir: "/wal/b2/e1", Reader: own}}, nil
		}
		return nil, errors.New("no such broker")
	}
	read := map[int32]int{}
	ld := NewLoader(fs, dirs, func(b int32, n int) { read[b] += n })
	defer ld.Close()
	p := New("t", id, 0, 1, 0)
	ranges := map[*Partition][]LogRange{p: {{Broker: 1, Start: 0, End: 3}, {Broker: 2, Start: 3, End: -1}}}
	var others []Source
	st, err := ld.Load([]*Partition{p}, ranges, LoadOptions{
		MaxEpoch: map[int32]int64{1: 2},
		Other:    func(src Source, typ byte, _ []byte) error { others = append(others, src); return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.Dirs != 3 || st.Records != 7 || st.Bytes <= 0 || int64(read[1]+read[2]) != st.Bytes || read[2] == 0 {
		t.Fatalf("stats %+v, bytes read per broker %v", st, read)
	}
	if len(others) != 1 || others[0].Dir != "/wal/b1/e1" {
		t.Fatalf("other records: %+v", others)
	}
	if _, err := p.FinishLoad(-1, false, true); err != nil {
		t.Fatal(err)
	}
	if p.End() != 5 {
		t.Fatalf("end %d, want 5", p.End())
	}
	bs := p.Batches()
	if len(bs) != 3 || bs[0].Base != 0 || bs[1].Base != 2 || bs[2].Base != 3 {
		t.Fatalf("indexed %+v", bs)
	}
	for _, b := range bs[:2] { // read back where the index says: the batch itself
		data := make([]byte, b.Size)
		if err := b.Src.ReadAt(data, b.Pos); err != nil {
			t.Fatal(err)
		}
		if h, err := recbatch.Parse(data); err != nil || h.BaseOffset != b.Base || !recbatch.CRCOK(data) {
			t.Fatalf("batch %d read back: base %d %v", b.Base, h.BaseOffset, err)
		}
	}
	if bs[2].Src != Reader(own) || bs[0].Src == Reader(own) {
		t.Fatal("a batch of a directory with its own Reader is not read through it (or others are)")
	}
	// A view forgotten (its directory removed) is opened afresh next time.
	v1, err := ld.View("/wal/b1/e1")
	if err != nil {
		t.Fatal(err)
	}
	ld.Forget("/wal/b1/e1")
	ld.Forget("/wal/none")
	if v2, err := ld.View("/wal/b1/e1"); err != nil || v2 == v1 {
		t.Fatalf("view after Forget: same %v, %v", v2 == v1, err)
	}
	// A failure listing a broker's directories fails the load.
	q := New("t", id, 0, 1, 0)
	if _, err := ld.Load([]*Partition{q}, map[*Partition][]LogRange{q: {{Broker: 7, Start: 0, End: -1}}}, LoadOptions{}); err == nil {
		t.Fatal("a broker without directories loaded")
	}
}

// A damaged record in a sealed WAL fails the load (wal.ErrCorrupt), unless the
// operator accepted the loss: then the load goes on with the other directories, names the
// skipped one, and the partition's load finds the gap.
func TestMutLoaderCorruptDirectory(t *testing.T) {
	fs := waltest.NewMemFS()
	id := metadata.TopicID{9}
	w := walAt(t, fs, "/wal/b1/e1")
	pos := appendRec(t, w, RecBatch, EncodeBatchRec(id, 0, batchAt(0, 1)))
	appendRec(t, w, RecBatch, EncodeBatchRec(id, 0, batchAt(1, 1)))
	appendRec(t, w, RecBatch, EncodeBatchRec(id, 0, batchAt(2, 1)))
	w.Close()
	w = walAt(t, fs, "/wal/b1/e2")
	appendRec(t, w, RecBatch, EncodeBatchRec(id, 0, batchAt(3, 1)))
	w.Close()
	// Sealed, the directory must hold its records up to the seal: a bad one is damage,
	// not a torn tail.
	if _, err := wal.Seal(fs, "/wal/b1/e1", "test"); err != nil {
		t.Fatal(err)
	}
	f, err := fs.OpenFile("/wal/b1/e1/00000000000000000000.wal", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	at := int64(pos) + int64(wal.RecordHeaderSize) + BatchRecHdr + 30
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, at); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, at); err != nil {
		t.Fatal(err)
	}
	f.Close()
	dirs := func(int32) ([]Source, error) {
		return []Source{{Broker: 1, Epoch: 1, Dir: "/wal/b1/e1"}, {Broker: 1, Epoch: 2, Dir: "/wal/b1/e2"}}, nil
	}
	ld := NewLoader(fs, dirs, nil)
	defer ld.Close()
	p := New("t", id, 0, 1, 0)
	ranges := map[*Partition][]LogRange{p: {{Broker: 1, Start: 0, End: -1}}}
	if _, err := ld.Load([]*Partition{p}, ranges, LoadOptions{}); !errors.Is(err, wal.ErrCorrupt) {
		t.Fatalf("load of a damaged WAL: %v", err)
	}
	p = New("t", id, 0, 1, 0)
	ranges = map[*Partition][]LogRange{p: {{Broker: 1, Start: 0, End: -1}}}
	st, err := ld.Load([]*Partition{p}, ranges, LoadOptions{AcceptCorruption: true})
	if err != nil || len(st.Skipped) != 1 || st.Dirs != 2 {
		t.Fatalf("accepted corruption: %+v %v", st, err)
	}
	gaps, err := p.FinishLoad(-1, false, true)
	if !errors.Is(err, ErrLoadIncomplete) || len(gaps) != 1 || gaps[0] != "[0, 3)" {
		t.Fatalf("gaps %v %v, want [0, 3)", gaps, err)
	}
}
