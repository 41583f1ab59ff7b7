package wal_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/weir-io/weir/wal"
	"github.com/weir-io/weir/wal/waltest"
)

// tornLog is a closed log of records in one segment file.
type tornLog struct {
	fs      *waltest.MemFS
	cfg     wal.Config
	recs    []record
	seg     string // path of the segment file
	starts  []int64
	dataEnd int64 // file offset after the last record
}

// recordSize avoids payload sizes whose length field has a 0x5a byte, which
// the flip test's XOR would turn into a length of 0 (a clean end).
func recordSize(i int) int {
	n := (i * 37) % 120
	if (n+1)&0xff == 0x5a {
		n++
	}
	return n
}

func buildTornLog(t *testing.T, prealloc bool, n int) tornLog {
	t.Helper()
	fs := waltest.NewMemFS()
	cfg := memConfig(fs)
	cfg.SegmentSize = 16 << 10
	cfg.Preallocate = prealloc
	w, _, _ := openWAL(t, cfg)
	l := tornLog{fs: fs, cfg: cfg, seg: filepath.Join(testDir, fmt.Sprintf("%020d.wal", 0))}
	for i := range n {
		r := mustAppend(t, w, byte(i), payload(i, recordSize(i)))
		l.recs = append(l.recs, r)
		l.starts = append(l.starts, int64(r.pos)-wal.RecordHeaderSize)
		l.dataEnd = int64(r.pos) + int64(len(r.payload))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return l
}

// intact returns how many records lie entirely before file offset c.
func (l tornLog) intact(c int64) int {
	n := 0
	for _, r := range l.recs {
		if int64(r.pos)+int64(len(r.payload)) <= c {
			n++
		}
	}
	return n
}

// check replays a damaged copy of the log and expects the first k records,
// a torn report at file offset tornAt (or none if tornAt < 0), then appends
// and replays again.
func (l tornLog) check(t *testing.T, fs *waltest.MemFS, k int, tornAt int64, what string) {
	t.Helper()
	cfg := l.cfg
	cfg.FS = fs
	w, got, info := openWAL(t, cfg)
	if len(got) != k || info.Records != k {
		t.Fatalf("%s: replayed %d records (info %d), want %d; %+v", what, len(got), info.Records, k, info)
	}
	sameRecords(t, got, l.recs[:k])
	if (tornAt >= 0) != info.Torn {
		t.Fatalf("%s: Torn = %v, want %v (%s)", what, info.Torn, tornAt >= 0, info.Reason)
	}
	wantEnd := wal.Pos(0) // with no records left, the segment is replaced
	if k > 0 {
		wantEnd = l.recs[k-1].pos + wal.Pos(len(l.recs[k-1].payload))
	}
	if tornAt >= 0 {
		if info.TornAt != wal.Pos(tornAt) || info.TornSegment != l.seg || info.Reason == "" ||
			!(errors.Is(info.Err, wal.ErrTorn) || errors.Is(info.Err, wal.ErrCorrupt)) {
			t.Fatalf("%s: TornAt %d in %s (%v), want %d in %s", what, info.TornAt, info.TornSegment, info.Err, tornAt, l.seg)
		}
	}
	if info.End != wantEnd || w.End() != wantEnd {
		t.Fatalf("%s: End %d (WAL %d), want %d", what, info.End, w.End(), wantEnd)
	}
	if k > 0 { // the segment was cut right after its last record
		f, err := fs.OpenFile(l.seg, os.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		f.Close()
		if st.Size() != int64(wantEnd) {
			t.Fatalf("%s: segment is %d bytes after replay, want %d", what, st.Size(), wantEnd)
		}
	}
	// Appends continue from a clean position; a second replay sees the old
	// prefix and the new records, with nothing torn.
	want := slices.Clone(l.recs[:k])
	for i := range 3 {
		r := mustAppend(t, w, 0xee, payload(1000+i, 30+i))
		if r.pos <= wantEnd {
			t.Fatalf("%s: new record at %d, not after End %d", what, r.pos, wantEnd)
		}
		want = append(want, r)
	}
	w, got, info = reopen(t, w, cfg)
	sameRecords(t, got, want)
	if info.Torn {
		t.Fatalf("%s: second replay: %+v", what, info)
	}
	w.Close()
}

func truncateFile(t *testing.T, fs wal.FS, path string, size int64) {
	t.Helper()
	f, err := fs.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
}

func xorByte(t *testing.T, fs wal.FS, path string, off int64, x byte) {
	t.Helper()
	f, err := fs.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= x
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func TestReplayTornTail(t *testing.T) {
	for _, prealloc := range []bool{true, false} {
		t.Run(fmt.Sprintf("prealloc=%v", prealloc), func(t *testing.T) {
			l := buildTornLog(t, prealloc, 30)
			boundary := map[int64]bool{wal.HeaderSize: true, l.dataEnd: true}
			for _, s := range l.starts {
				boundary[s] = true
			}
			cases := 0
			for c := int64(0); c <= l.dataEnd+20; c++ {
				near := boundary[c] || boundary[c-1] || boundary[c+1] || boundary[c+wal.RecordHeaderSize]
				if !near && c%4 != 0 {
					continue // every 4th byte and everything around record edges
				}
				if !prealloc && c > l.dataEnd {
					break
				}
				cases++
				fs := l.fs.Clone()
				truncateFile(t, fs, l.seg, c)
				k := l.intact(c)
				tornAt := int64(-1)
				switch {
				case c < wal.HeaderSize:
					tornAt, k = 0, 0
				case k < len(l.recs) && c > l.starts[k]:
					tornAt = l.starts[k]
				}
				l.check(t, fs, k, tornAt, fmt.Sprintf("cut at %d", c))
			}
			t.Logf("%d cut positions", cases)
		})
	}
}

func TestReplayFlippedBytes(t *testing.T) {
	l := buildTornLog(t, true, 30)
	cases := 0
	for p := int64(0); p < l.dataEnd+12; p += 3 {
		cases++
		fs := l.fs.Clone()
		xorByte(t, fs, l.seg, p, 0x5a)
		k, tornAt := len(l.recs), int64(-1)
		switch {
		case p < wal.HeaderSize:
			k, tornAt = 0, 0
		case p < l.dataEnd:
			k = l.intact(p)
			tornAt = l.starts[k]
		case p < l.dataEnd+4: // the zero length after the last record
			tornAt = l.dataEnd
		}
		l.check(t, fs, k, tornAt, fmt.Sprintf("byte %d flipped", p))
	}
	t.Logf("%d flipped positions", cases)
}

// multiSegmentLog builds a closed log over several segments and returns the
// records with the segment path of each.
func multiSegmentLog(t *testing.T) (*waltest.MemFS, wal.Config, []record, []string) {
	fs := waltest.NewMemFS()
	cfg := memConfig(fs)
	cfg.SegmentSize = 512
	w, _, _ := openWAL(t, cfg)
	var recs []record
	for i := range 40 {
		recs = append(recs, mustAppend(t, w, byte(i), payload(i, 100)))
	}
	w.Close()
	var segs []string
	for _, name := range fs.Names() {
		if strings.HasSuffix(name, ".wal") {
			segs = append(segs, name)
		}
	}
	return fs, cfg, recs, segs
}

// segmentOf returns the index of the segment holding pos.
func segmentOf(segs []string, pos wal.Pos) int {
	i := 0
	for j, s := range segs {
		var base int64
		fmt.Sscanf(filepath.Base(s), "%d.wal", &base)
		if wal.Pos(base) <= pos {
			i = j
		}
	}
	return i
}

// memFiles returns the contents of every file of fs by path.
func memFiles(t *testing.T, fs *waltest.MemFS) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, name := range fs.Names() {
		f, err := fs.OpenFile(name, os.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		b := make([]byte, st.Size())
		f.ReadAt(b, 0)
		f.Close()
		out[name] = b
	}
	return out
}

func sameFiles(t *testing.T, what string, before, after map[string][]byte) {
	t.Helper()
	if len(before) != len(after) {
		t.Fatalf("%s: %d files before, %d after", what, len(before), len(after))
	}
	for name, b := range before {
		if !bytes.Equal(after[name], b) {
			t.Fatalf("%s: %s changed", what, name)
		}
	}
}

// TestReplayCutInMiddleSegment damages a record (or the header) of a segment that is
// followed by others. That is never a torn tail: the later segments were created after
// every record before them was synced. Replay refuses with ErrCorrupt naming the file
// and offset and leaves every file as it was; with AcceptCorruption it cuts there and
// removes the later segments, as an operator asked.
func TestReplayCutInMiddleSegment(t *testing.T) {
	base, cfg, recs, segs := multiSegmentLog(t)
	if len(segs) < 6 {
		t.Fatalf("only %d segments", len(segs))
	}
	victim := recs[20]
	si := segmentOf(segs, victim.pos)
	var segBase int64
	fmt.Sscanf(filepath.Base(segs[si]), "%d.wal", &segBase)
	recStart := int64(victim.pos) - wal.RecordHeaderSize - segBase // file offset

	damages := map[string]func(fs wal.FS){
		"truncated": func(fs wal.FS) { truncateFile(t, fs, segs[si], recStart+20) },
		"flipped":   func(fs wal.FS) { xorByte(t, fs, segs[si], recStart+12, 1) },
		"zeroed": func(fs wal.FS) { // records end before the next segment starts
			f, _ := fs.OpenFile(segs[si], os.O_RDWR, 0)
			f.WriteAt(make([]byte, 20), recStart)
			f.Close()
		},
		"bad header": func(fs wal.FS) { xorByte(t, fs, segs[si], 3, 1) },
	}
	// Records before the damage: those of earlier segments, and for a bad record the
	// earlier ones of its segment.
	before := func(name string) int {
		if name != "bad header" {
			return 20
		}
		k := 0
		for _, r := range recs {
			if segmentOf(segs, r.pos) < si {
				k++
			}
		}
		return k
	}
	for name, damage := range damages {
		badAt, badOff := victim.pos-wal.RecordHeaderSize, recStart
		if name == "bad header" {
			badAt, badOff = wal.Pos(segBase), 0
		}
		t.Run(name+"/refused", func(t *testing.T) {
			fs := base.Clone()
			damage(fs)
			files := memFiles(t, fs)
			cfg := cfg
			cfg.FS = fs
			w, err := wal.Open(cfg)
			if err != nil {
				t.Fatal(err)
			}
			var n int
			info, err := w.Replay(func(byte, []byte, wal.Pos) error { n++; return nil })
			if !errors.Is(err, wal.ErrCorrupt) || errors.Is(err, wal.ErrTorn) ||
				!strings.Contains(err.Error(), segs[si]) || !strings.Contains(err.Error(), fmt.Sprintf("offset %d ", badOff)) {
				t.Fatalf("Replay: %v, want ErrCorrupt naming %s and offset %d", err, segs[si], badOff)
			}
			if info.Torn || len(info.DroppedSegments) > 0 || n != before(name) {
				t.Fatalf("info %+v after %d records, want no cut after %d", info, n, before(name))
			}
			if _, err := w.AppendSync(context.Background(), 1, []byte("x")); !errors.Is(err, wal.ErrNotReplayed) {
				t.Fatalf("append after a refused replay: %v", err)
			}
			w.Close()
			sameFiles(t, "refused replay", files, memFiles(t, fs))
		})
		t.Run(name+"/accepted", func(t *testing.T) {
			fs := base.Clone()
			damage(fs)
			cfg := cfg
			cfg.FS = fs
			cfg.AcceptCorruption = true
			w, got, info := openWAL(t, cfg)
			k := before(name)
			sameRecords(t, got, recs[:k])
			dropped := segs[si+1:]
			if name == "bad header" {
				dropped = segs[si:]
			}
			if !info.Torn || !info.Corruption || info.TornSegment != segs[si] || info.TornAt != badAt ||
				!errors.Is(info.Err, wal.ErrCorrupt) {
				t.Fatalf("info %+v", info)
			}
			if !slices.Equal(info.DroppedSegments, dropped) {
				t.Fatalf("dropped %v, want %v", info.DroppedSegments, dropped)
			}
			for _, s := range dropped {
				if s == segs[si] {
					continue // the new active segment starts at its base, under its name
				}
				if _, err := fs.OpenFile(s, os.O_RDONLY, 0); err == nil {
					t.Fatalf("%s was not removed", s)
				}
			}
			want := append(slices.Clone(recs[:k]), mustAppend(t, w, 1, []byte("new")))
			_, got, info = reopen(t, w, cfg)
			sameRecords(t, got, want)
			if info.Torn {
				t.Fatalf("second replay %+v", info)
			}
		})
	}
}

// TestReplayCorruptFirstOfTwoSegments is the smallest case of the rule: a bad record in
// the first of two segments. The code before the rule cut the log there and deleted the
// second segment, synced records and all.
func TestReplayCorruptFirstOfTwoSegments(t *testing.T) {
	fs := waltest.NewMemFS()
	cfg := memConfig(fs)
	cfg.SegmentSize = 1024
	w, _, _ := openWAL(t, cfg)
	var recs []record
	for i := 0; len(segmentNames(fs)) < 2 || len(recs) < 12; i++ {
		recs = append(recs, mustAppend(t, w, 1, payload(i, 150)))
	}
	w.Close()
	segs := segmentNames(fs)
	if len(segs) != 2 {
		t.Fatalf("segments %v", segs)
	}
	xorByte(t, fs, segs[0], int64(recs[2].pos)+5, 0xff) // the third record's payload
	files := memFiles(t, fs)

	w, err := wal.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.Replay(nil)
	w.Close()
	if !slices.Equal(segmentNames(fs), segs) {
		t.Fatalf("segments after replay: %v, were %v: replay deleted synced records (err %v)", segmentNames(fs), segs, err)
	}
	off := int64(recs[2].pos) - wal.RecordHeaderSize
	if !errors.Is(err, wal.ErrCorrupt) || !strings.Contains(err.Error(), segs[0]) ||
		!strings.Contains(err.Error(), fmt.Sprintf("offset %d ", off)) {
		t.Fatalf("Replay: %v, want ErrCorrupt naming %s at offset %d", err, segs[0], off)
	}
	sameFiles(t, "refused replay", files, memFiles(t, fs))

	// A bad record in the last segment is still a torn tail.
	fs2 := waltest.NewMemFS()
	cfg2 := memConfig(fs2)
	cfg2.SegmentSize = 1024
	w, _, _ = openWAL(t, cfg2)
	recs = recs[:0]
	for i := range 3 {
		recs = append(recs, mustAppend(t, w, 1, payload(i, 150)))
	}
	w.Close()
	last := segmentNames(fs2)
	xorByte(t, fs2, last[len(last)-1], int64(recs[2].pos)+5, 0xff)
	_, got, info := openWAL(t, cfg2)
	sameRecords(t, got, recs[:2])
	if !info.Torn || info.Corruption || info.TornAt != recs[2].pos-wal.RecordHeaderSize {
		t.Fatalf("torn tail: %+v", info)
	}
}

// segmentNames returns the segment files of fs, sorted.
func segmentNames(fs *waltest.MemFS) []string {
	var segs []string
	for _, name := range fs.Names() {
		if strings.HasSuffix(name, ".wal") {
			segs = append(segs, name)
		}
	}
	return segs
}

func TestOpenRemovesLeftoverTempFiles(t *testing.T) {
	fs := waltest.NewMemFS()
	fs.MkdirAll(testDir, 0o755)
	f, _ := fs.OpenFile(testDir+"/segment-7.tmp", os.O_CREATE|os.O_RDWR, 0o644)
	f.WriteAt([]byte("junk"), 0)
	f.Close()
	openWAL(t, memConfig(fs))
	if slices.Contains(fs.Names(), testDir+"/segment-7.tmp") {
		t.Fatal("leftover temporary file not removed")
	}
}
