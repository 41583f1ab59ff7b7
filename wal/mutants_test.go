package wal_test

// WAL behaviour at the boundaries the mutation run found unpinned (docs/MUTATION.md).

import (
	"errors"
	"strings"
	"testing"

	"github.com/weir-io/weir/wal"
	"github.com/weir-io/weir/wal/waltest"
)

// Every limit of a config is inclusive: the limit itself is valid, one past it is not;
// zero numeric fields are valid (defaults).
func TestMutConfigLimits(t *testing.T) {
	ok := func(what string, f func(*wal.Config)) {
		t.Helper()
		c := wal.DefaultConfig("/d")
		f(&c)
		if err := c.Validate(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	bad := func(what string, f func(*wal.Config)) {
		t.Helper()
		c := wal.DefaultConfig("/d")
		f(&c)
		if err := c.Validate(); err == nil {
			t.Fatalf("%s: valid", what)
		}
	}
	ok("defaults", func(*wal.Config) {})
	ok("zero fields", func(c *wal.Config) { *c = wal.Config{Dir: "/d"} })
	bad("no dir", func(c *wal.Config) { c.Dir = "" })
	ok("minimum segment", func(c *wal.Config) { c.SegmentSize = wal.MinSegmentSize })
	bad("segment below the minimum", func(c *wal.Config) { c.SegmentSize = wal.MinSegmentSize - 1 })
	bad("negative group bytes", func(c *wal.Config) { c.MaxGroupBytes = -1 })
	bad("negative queue depth", func(c *wal.Config) { c.QueueDepth = -1 })
	ok("largest record size", func(c *wal.Config) { c.MaxRecordSize = wal.MaxPayloadSize })
	bad("record size beyond the format", func(c *wal.Config) { c.MaxRecordSize = wal.MaxPayloadSize + 1 })
	bad("negative record size", func(c *wal.Config) { c.MaxRecordSize = -1 })
	ok("longest owner", func(c *wal.Config) { c.Owner = strings.Repeat("o", wal.MaxFenceName) })
	bad("owner too long", func(c *wal.Config) { c.Owner = strings.Repeat("o", wal.MaxFenceName+1) })
}

// A record of exactly MaxRecordSize bytes (head and payload) is written and replayed;
// one byte more fails with ErrTooLarge alone, its group's other records are written.
func TestMutMaxRecordSizeExact(t *testing.T) {
	fs := waltest.NewMemFS()
	cfg := memConfig(fs)
	cfg.MaxRecordSize = 100
	w, _, _ := openWAL(t, cfg)
	type res struct {
		pos wal.Pos
		err error
	}
	ch := make(chan res, 3)
	done := func(pos wal.Pos, err error) { ch <- res{pos, err} }
	w.Append(wal.Entry{Type: 1, Head: make([]byte, 10), Payload: payload(1, 90), Done: done})
	w.Append(wal.Entry{Type: 2, Head: make([]byte, 10), Payload: payload(2, 91), Done: done})
	w.Append(wal.Entry{Type: 3, Payload: payload(3, 100), Done: done})
	var got []res
	for i := 0; i < 3; i++ {
		got = append(got, <-ch)
	}
	if got[0].err != nil || got[2].err != nil {
		t.Fatalf("records of exactly the limit: %v, %v", got[0].err, got[2].err)
	}
	if !errors.Is(got[1].err, wal.ErrTooLarge) {
		t.Fatalf("record one byte over the limit: %v", got[1].err)
	}
	w.Close()
	_, recs, _ := openWAL(t, cfg)
	if len(recs) != 2 || recs[0].typ != 1 || len(recs[0].payload) != 100 || recs[1].typ != 3 || recs[1].pos != got[2].pos {
		t.Fatalf("replayed %v", recs)
	}
}

// segmentFiles returns the sizes of the segment files of fs, by name.
func segmentFiles(t *testing.T, fs *waltest.MemFS) map[string]int {
	t.Helper()
	out := map[string]int{}
	for name, b := range memFiles(t, fs) {
		if strings.HasSuffix(name, ".wal") {
			out[name] = len(b)
		}
	}
	return out
}

// Records fill a segment up to its size exactly, never past it: two records that fit
// exactly share a segment, a third (of exactly MaxRecordSize bytes) goes into the next.
// The same with records larger than MaxGroupBytes (each a group of its own).
func TestMutSegmentFillsExactly(t *testing.T) {
	for _, groupBytes := range []int{0, 64} {
		fs := waltest.NewMemFS()
		cfg := memConfig(fs)
		cfg.MaxRecordSize, cfg.MaxGroupBytes = 100, groupBytes
		cfg.SegmentSize = wal.HeaderSize + 2*int64(wal.FrameSize(100))
		w, _, _ := openWAL(t, cfg)
		var recs []record
		for i := 0; i < 3; i++ {
			recs = append(recs, mustAppend(t, w, byte(i+1), payload(i, 100)))
		}
		first := wal.Pos(wal.HeaderSize + wal.RecordHeaderSize)
		if recs[0].pos != first || recs[1].pos != first+wal.Pos(wal.FrameSize(100)) {
			t.Fatalf("group bytes %d: the first two records at %d and %d, want %d and %d", groupBytes, recs[0].pos, recs[1].pos, first, first+wal.Pos(wal.FrameSize(100)))
		}
		if want := wal.Pos(cfg.SegmentSize + wal.HeaderSize + wal.RecordHeaderSize); recs[2].pos != want {
			t.Fatalf("group bytes %d: the third record at %d, want %d (first record of the second segment)", groupBytes, recs[2].pos, want)
		}
		w.Close()
		segs := segmentFiles(t, fs)
		if len(segs) != 2 {
			t.Fatalf("group bytes %d: segments %v, want 2", groupBytes, segs)
		}
		for name, size := range segs {
			if int64(size) > cfg.SegmentSize {
				t.Fatalf("%s is %d bytes, larger than the segment size %d", name, size, cfg.SegmentSize)
			}
		}
		_, got, _ := openWAL(t, cfg)
		sameRecords(t, got, recs)
	}
}

// A group that needs a new segment takes only as many queued records as that segment
// holds: the segment is filled exactly and the rest go into the next one, so no segment
// grows past its size however many records wait.
func TestMutGroupAfterRollFitsSegment(t *testing.T) {
	fs := waltest.NewMemFS()
	cfg := memConfig(fs)
	frame := int64(wal.FrameSize(10))
	cfg.SegmentSize = wal.HeaderSize + 5*frame
	w, _, _ := openWAL(t, cfg)
	var want []record
	for i := 0; i < 4; i++ {
		want = append(want, mustAppend(t, w, 1, payload(i, 10)))
	}
	// The fifth record fills the first segment; while it is being prepared eight more
	// queue up, to be taken together.
	release, preparing := make(chan struct{}), make(chan struct{})
	type res struct {
		i   int
		pos wal.Pos
		err error
	}
	ch := make(chan res, 9)
	w.Append(wal.Entry{Type: 1, Payload: payload(4, 10),
		Prepare: func([]byte) error { close(preparing); <-release; return nil },
		Done:    func(pos wal.Pos, err error) { ch <- res{4, pos, err} }})
	<-preparing
	for i := 5; i < 13; i++ {
		i := i
		w.Append(wal.Entry{Type: 1, Payload: payload(i, 10), Done: func(pos wal.Pos, err error) { ch <- res{i, pos, err} }})
	}
	close(release)
	pos := map[int]wal.Pos{}
	for i := 0; i < 9; i++ {
		r := <-ch
		if r.err != nil {
			t.Fatal(r.err)
		}
		pos[r.i] = r.pos
	}
	for i := 4; i < 13; i++ {
		want = append(want, record{1, payload(i, 10), pos[i]})
	}
	w.Close()
	segs := segmentFiles(t, fs)
	if len(segs) != 3 {
		t.Fatalf("segments %v, want 3", segs)
	}
	for name, size := range segs {
		if int64(size) > cfg.SegmentSize {
			t.Fatalf("%s is %d bytes, larger than the segment size %d", name, size, cfg.SegmentSize)
		}
	}
	_, got, _ := openWAL(t, cfg)
	sameRecords(t, got, want)
}

// Group commit: records queued together up to MaxGroupBytes exactly share one
// write and fdatasync; a group in which nothing is written (every Prepare refused: duplicates)
// costs none.
func TestMutGroupSyncs(t *testing.T) {
	fs := waltest.NewFaultFS(waltest.NewMemFS())
	cfg := memConfig(fs)
	cfg.MaxGroupBytes = 2 * wal.FrameSize(10)
	cfg.Preallocate = false
	w, _, _ := openWAL(t, cfg)
	mustAppend(t, w, 1, payload(0, 10))
	release, preparing := make(chan struct{}), make(chan struct{})
	errs := make(chan error, 6)
	done := func(_ wal.Pos, err error) { errs <- err }
	w.Append(wal.Entry{Type: 1, Payload: payload(1, 10), Done: done,
		Prepare: func([]byte) error { close(preparing); <-release; return nil }})
	<-preparing
	fs.ResetCounts()
	for i := 2; i < 5; i++ {
		w.Append(wal.Entry{Type: 1, Payload: payload(i, 10), Done: done})
	}
	close(release)
	for i := 0; i < 4; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// The blocked record's group, then the three queued behind it: two of them fill
	// MaxGroupBytes exactly, the third is a group of its own. Three writes (the syncer
	// may cover several written groups with one fdatasync: one to three).
	if n := fs.Count(waltest.OpWrite, ".wal"); n != 3 {
		t.Fatalf("%d writes for a group and three records (two of exactly MaxGroupBytes), want 3", n)
	}
	if n := fs.Count(waltest.OpSync, ".wal"); n < 1 || n > 3 {
		t.Fatalf("%d fdatasyncs for three groups, want 1 to 3", n)
	}
	fs.ResetCounts()
	dup := errors.New("duplicate")
	w.Append(wal.Entry{Type: 1, Payload: payload(5, 10), Prepare: func([]byte) error { return dup }, Done: done})
	if err := <-errs; !errors.Is(err, dup) {
		t.Fatalf("refused record: %v", err)
	}
	if n := fs.Count(waltest.OpSync, ".wal") + fs.Count(waltest.OpWrite, ".wal"); n != 0 {
		t.Fatalf("a group with nothing to write cost %d writes and syncs", n)
	}
}

// A preallocated segment is exactly SegmentSize bytes, also when that is not a multiple
// of the zero-fill step (disk use is what the config says).
func TestMutPreallocatedSize(t *testing.T) {
	fs := waltest.NewMemFS()
	cfg := memConfig(fs)
	cfg.SegmentSize = 300 << 10
	w, _, _ := openWAL(t, cfg)
	mustAppend(t, w, 1, payload(0, 10))
	w.Close()
	segs := segmentFiles(t, fs)
	if len(segs) != 1 {
		t.Fatalf("segments %v", segs)
	}
	for name, size := range segs {
		if int64(size) != cfg.SegmentSize {
			t.Fatalf("%s is %d bytes, want %d", name, size, cfg.SegmentSize)
		}
	}
}
