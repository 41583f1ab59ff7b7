package wal_test

import (
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
	}
	for name, damage := range damages {
		t.Run(name, func(t *testing.T) {
			fs := base.Clone()
			damage(fs)
			cfg := cfg
			cfg.FS = fs
			w, got, info := openWAL(t, cfg)
			sameRecords(t, got, recs[:20])
			if !info.Torn || info.TornSegment != segs[si] || info.TornAt != victim.pos-wal.RecordHeaderSize {
				t.Fatalf("info %+v", info)
			}
			if !slices.Equal(info.DroppedSegments, segs[si+1:]) {
				t.Fatalf("dropped %v, want %v", info.DroppedSegments, segs[si+1:])
			}
			for _, s := range segs[si+1:] {
				if _, err := fs.OpenFile(s, os.O_RDONLY, 0); err == nil {
					t.Fatalf("%s was not removed", s)
				}
			}
			want := append(slices.Clone(recs[:20]), mustAppend(t, w, 1, []byte("new")))
			_, got, info = reopen(t, w, cfg)
			sameRecords(t, got, want)
			if info.Torn {
				t.Fatalf("second replay %+v", info)
			}
		})
	}

	t.Run("bad header", func(t *testing.T) {
		fs := base.Clone()
		xorByte(t, fs, segs[si], 3, 1)
		cfg := cfg
		cfg.FS = fs
		_, got, info := openWAL(t, cfg)
		k := 0
		for _, r := range recs {
			if segmentOf(segs, r.pos) < si {
				k++
			}
		}
		sameRecords(t, got, recs[:k])
		if !info.Torn || !errors.Is(info.Err, wal.ErrCorrupt) || !slices.Equal(info.DroppedSegments, segs[si:]) {
			t.Fatalf("info %+v", info)
		}
	})
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
