package wal_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/weir-io/weir/wal"
)

// The golden segments in testdata/segments-v<FormatVersion>/ are committed fixtures, not
// build outputs. They are written only by
//
//	go test ./wal/ -run Golden -update
//
// which rewrites the current version's directory and never an older one: a build must
// keep reading every older directory (or refuse it with ErrVersion), so a format change
// bumps FormatVersion and adds a directory instead of rewriting one.
var update = flag.Bool("update", false, "rewrite the golden files of the current format version in testdata/")

// goldenSegmentSize keeps the preallocated segments, zero tails included, at 512 bytes.
const goldenSegmentSize = 512

// goldenV1 is what testdata/segments-v1/ holds: records of several types and sizes (an
// empty payload, a one-byte zero payload, one that does not fit in the first segment)
// with the positions format version 1 gives them. Written with goldenSegmentSize.
var goldenV1 = struct {
	dir      string
	segments []string // file names, each goldenSegmentSize bytes
	records  []record
	end      wal.Pos
}{
	dir:      "testdata/segments-v1",
	segments: []string{"00000000000000000000.wal", "00000000000000000490.wal"},
	records: []record{
		{1, []byte("weir golden record 0"), 33},
		{2, []byte{}, 62},
		{3, goldenPayload(3, 300), 71},
		{255, []byte{0}, 380},
		{1, goldenPayload(5, 100), 390},
		// 9+64 bytes do not fit after offset 490: a new segment starts at 490, whose
		// 24-byte header and 9-byte frame put the payload at 523.
		{4, goldenPayload(6, 64), 523},
	},
	end: 587,
}

// goldenPayload is a fixed byte pattern; it must never change (the golden files hold it).
func goldenPayload(seed, n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(seed*31 + i*7 + 1)
	}
	return p
}

// copyGolden copies a golden directory to a fresh temporary one, since Replay truncates
// and creates segments and testdata must never change in a test run.
func copyGolden(t *testing.T, dir string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "wal")
	if err := os.CopyFS(dst, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	return dst
}

func goldenConfig(dir string) wal.Config {
	cfg := wal.DefaultConfig(dir)
	cfg.SegmentSize = goldenSegmentSize
	return cfg
}

// TestGoldenSegmentsWrite writes the golden records with today's WAL and compares the
// segment files byte for byte with the committed ones, so that an accidental change of
// the segment header, the record framing, the roll rule or the preallocation fails here.
// It runs first so that -update rewrites the files before the other tests read them.
func TestGoldenSegmentsWrite(t *testing.T) {
	g := goldenV1
	if wal.FormatVersion != 1 {
		t.Fatalf("FormatVersion is %d: add the golden records of the new version and compare against those", wal.FormatVersion)
	}
	dir := filepath.Join(t.TempDir(), "wal")
	w, err := wal.Open(goldenConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Replay(nil); err != nil {
		t.Fatal(err)
	}
	for i, r := range g.records {
		pos, err := w.AppendSync(context.Background(), r.typ, r.payload)
		if err != nil {
			t.Fatal(err)
		}
		if pos != r.pos {
			t.Fatalf("record %d written at %d, golden position %d", i, pos, r.pos)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, g.segments) {
		t.Fatalf("wrote segments %v, golden %v", names, g.segments)
	}

	if *update {
		if err := os.RemoveAll(g.dir); err != nil {
			t.Fatal(err)
		}
		if err := os.CopyFS(g.dir, os.DirFS(dir)); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote %s", g.dir)
	}
	for _, name := range g.segments {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(g.dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: today's WAL writes different bytes than %s (first difference at byte %d). "+
				"If the format change is deliberate, bump wal.FormatVersion, keep %s and add the new "+
				"version's golden files with go test ./wal/ -run Golden -update",
				name, g.dir, firstDiff(got, want), g.dir)
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestGoldenSegmentsLayout decodes the golden files by hand, following the drawing in
// doc.go rather than the package's decoder, and checks that AppendRecord frames the
// records exactly as they are stored.
func TestGoldenSegmentsLayout(t *testing.T) {
	g := goldenV1
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	next := 0 // next golden record
	for _, name := range g.segments {
		b, err := os.ReadFile(filepath.Join(g.dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != goldenSegmentSize {
			t.Fatalf("%s: %d bytes, want the preallocated %d", name, len(b), goldenSegmentSize)
		}
		base := binary.LittleEndian.Uint64(b[12:20])
		switch {
		case string(b[0:8]) != "WEIR-WAL":
			t.Fatalf("%s: magic %q", name, b[0:8])
		case binary.LittleEndian.Uint32(b[8:12]) != 1:
			t.Fatalf("%s: version %d in a version 1 file", name, binary.LittleEndian.Uint32(b[8:12]))
		case fmt.Sprintf("%020d.wal", base) != name:
			t.Fatalf("%s: header base %d", name, base)
		case binary.LittleEndian.Uint32(b[20:24]) != crc32.Checksum(b[0:20], castagnoli):
			t.Fatalf("%s: header checksum", name)
		}
		// The records of this segment are those whose position falls in it.
		off := wal.HeaderSize
		for next < len(g.records) && int(g.records[next].pos)-int(base) < goldenSegmentSize {
			r := g.records[next]
			frame := wal.AppendRecord(nil, r.typ, r.payload)
			if !bytes.Equal(b[off:off+len(frame)], frame) {
				t.Fatalf("%s: record %d at offset %d is not AppendRecord's framing", name, next, off)
			}
			length := binary.LittleEndian.Uint32(b[off:])
			crc := binary.LittleEndian.Uint32(b[off+4:])
			if int(length) != 1+len(r.payload) || b[off+8] != r.typ ||
				crc != crc32.Checksum(b[off+8:off+9+len(r.payload)], castagnoli) ||
				int(base)+off+wal.RecordHeaderSize != int(r.pos) {
				t.Fatalf("%s: record %d frame: length %d type %d crc %08x at offset %d", name, next, length, b[off+8], crc, off)
			}
			off += len(frame)
			next++
		}
		if tail := b[off:]; !bytes.Equal(tail, make([]byte, len(tail))) {
			t.Fatalf("%s: %d bytes after the records are not the preallocated zeros", name, len(tail))
		}
	}
	if next != len(g.records) {
		t.Fatalf("found %d of %d golden records", next, len(g.records))
	}
}

// TestGoldenSegmentsReplay replays the golden segments with today's code: every record's
// type, payload and position, a clean end, and appends continuing after it.
func TestGoldenSegmentsReplay(t *testing.T) {
	g := goldenV1
	cfg := goldenConfig(copyGolden(t, g.dir))
	w, recs, info := openWAL(t, cfg)
	sameRecords(t, recs, g.records)
	if info.Records != len(g.records) || info.End != g.end || info.Torn || len(info.DroppedSegments) > 0 {
		t.Fatalf("replay info %+v, want %d records ending at %d, not torn", info, len(g.records), g.end)
	}
	checkReadAt(t, w, recs)
	// Replay starts a new segment at the end; its first record follows its header.
	if r := mustAppend(t, w, 9, []byte("after")); r.pos != g.end+wal.HeaderSize+wal.RecordHeaderSize {
		t.Fatalf("append after replay at %d", r.pos)
	}
}

// TestGoldenSegmentsReadOnly scans the golden segments as a new partition leader reads
// another broker's WAL.
func TestGoldenSegmentsReadOnly(t *testing.T) {
	g := goldenV1
	r, err := wal.OpenReadOnly(copyGolden(t, g.dir), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var recs []record
	end, err := r.Scan(func(typ byte, payload []byte, pos wal.Pos) error {
		recs = append(recs, record{typ, bytes.Clone(payload), pos})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sameRecords(t, recs, g.records)
	if end != g.end {
		t.Fatalf("scan ends at %d, want %d", end, g.end)
	}
}

// setSegmentVersion rewrites the version of a segment header, with a valid checksum, as
// a build writing another format version would.
func setSegmentVersion(t *testing.T, path string, v uint32) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint32(b[8:12], v)
	binary.LittleEndian.PutUint32(b[20:24], crc32.Checksum(b[0:20], crc32.MakeTable(crc32.Castagnoli)))
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// readDir returns the contents of every file in dir by name.
func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

// TestGoldenSegmentUnknownVersion: a segment of a newer format is refused with
// ErrVersion naming the file, and the log is left exactly as it was (a corrupt header
// would cut the log there and remove the later segments).
func TestGoldenSegmentUnknownVersion(t *testing.T) {
	g := goldenV1
	for i, name := range g.segments {
		t.Run(name, func(t *testing.T) {
			dir := copyGolden(t, g.dir)
			path := filepath.Join(dir, name)
			setSegmentVersion(t, path, wal.FormatVersion+1)
			before := readDir(t, dir)

			w, err := wal.Open(goldenConfig(dir))
			if err != nil {
				t.Fatal(err)
			}
			var n int
			_, err = w.Replay(func(byte, []byte, wal.Pos) error { n++; return nil })
			w.Close()
			if !errors.Is(err, wal.ErrVersion) || !strings.Contains(err.Error(), path) ||
				!strings.Contains(err.Error(), fmt.Sprint(wal.FormatVersion+1)) {
				t.Fatalf("Replay: %v, want ErrVersion naming %s and version %d", err, path, wal.FormatVersion+1)
			}
			// Replay refuses the segment when it reaches it, after the earlier ones.
			if want := []int{0, 5}[i]; n != want {
				t.Fatalf("%d records replayed before the refused segment, want %d", n, want)
			}
			after := readDir(t, dir)
			if len(after) != len(before) {
				t.Fatalf("files %d before, %d after a refused replay", len(before), len(after))
			}
			for f, b := range before {
				if !bytes.Equal(after[f], b) {
					t.Fatalf("%s changed by a refused replay", f)
				}
			}

			r, err := wal.OpenReadOnly(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if _, err := r.Scan(func(byte, []byte, wal.Pos) error { return nil }); !errors.Is(err, wal.ErrVersion) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Scan: %v, want ErrVersion naming %s", err, path)
			}
		})
	}
}
