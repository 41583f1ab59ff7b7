package wal_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/weir-io/weir/wal"
	"github.com/weir-io/weir/wal/waltest"
)

// The golden FENCE and SEAL files in testdata/ are fixtures like the golden segments
// (see golden_test.go): rewritten only by go test ./wal/ -run Golden -update, for the
// current format versions, and read by every later build.

var goldenTime = time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)

// goldenFence is testdata/fence-v1.bin: a FENCE whose owner opened it and a taker
// fenced it.
var goldenFence = struct {
	path         string
	fence, owner wal.FenceRecord
}{
	path:  "testdata/fence-v1.bin",
	fence: wal.FenceRecord{State: wal.FenceFenced, Instance: 0x0123456789abcdef, Time: goldenTime.Add(time.Second), Who: "broker-2 epoch 9"},
	owner: wal.FenceRecord{State: wal.FenceOpen, Instance: 0xfedcba9876543210, Time: goldenTime, Who: "broker-1 epoch 7"},
}

// goldenSeal is testdata/seal-v1.bin.
var goldenSeal = struct {
	path string
	info wal.SealInfo
}{
	path: "testdata/seal-v1.bin",
	info: wal.SealInfo{End: 587, LastSegment: 490, Segments: 2, Start: 0, Records: 6, By: "broker-2 epoch 9", Time: goldenTime},
}

func goldenFile(t *testing.T, path string, got []byte) []byte {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote %s", path)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return want
}

func crc32c(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }

// TestGoldenFence: today's encoder writes the golden FENCE byte for byte; decoding it by
// hand, following the drawing in doc.go, gives the golden records; ReadFence reads it
// and a writer's Open refuses the directory.
func TestGoldenFence(t *testing.T) {
	g := goldenFence
	if wal.FenceFormatVersion != 1 {
		t.Fatalf("FenceFormatVersion is %d: add the new version's golden FENCE", wal.FenceFormatVersion)
	}
	f, err := g.fence.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	o, err := g.owner.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	got := append(f, o...)
	want := goldenFile(t, g.path, got)
	if !bytes.Equal(got, want) {
		t.Fatalf("today's FENCE encoding differs from %s at byte %d. If deliberate, bump wal.FenceFormatVersion "+
			"and add the new version's golden file", g.path, firstDiff(got, want))
	}

	if len(want) != 2*wal.FenceRecordSize {
		t.Fatalf("%d bytes", len(want))
	}
	for i, r := range []wal.FenceRecord{g.fence, g.owner} {
		b := want[i*wal.FenceRecordSize : (i+1)*wal.FenceRecordSize]
		n := binary.LittleEndian.Uint32(b[32:36])
		switch {
		case string(b[0:8]) != "WEIRFNCE":
			t.Fatalf("record %d: magic %q", i, b[0:8])
		case binary.LittleEndian.Uint32(b[8:12]) != 1:
			t.Fatalf("record %d: version", i)
		case binary.LittleEndian.Uint32(b[12:16]) != uint32(r.State):
			t.Fatalf("record %d: state", i)
		case binary.LittleEndian.Uint64(b[16:24]) != r.Instance:
			t.Fatalf("record %d: instance", i)
		case int64(binary.LittleEndian.Uint64(b[24:32])) != r.Time.UnixNano():
			t.Fatalf("record %d: time", i)
		case string(b[36:36+n]) != r.Who || !bytes.Equal(b[36+n:124], make([]byte, 124-36-int(n))):
			t.Fatalf("record %d: name %q", i, b[36:36+n])
		case binary.LittleEndian.Uint32(b[124:128]) != crc32c(b[:124]):
			t.Fatalf("record %d: checksum", i)
		}
		var back wal.FenceRecord
		if err := back.UnmarshalBinary(b); err != nil || back != r {
			t.Fatalf("record %d decodes to %+v, %v", i, back, err)
		}
	}

	mem := waltest.NewMemFS()
	mem.MkdirAll(testDir, 0o755)
	writeMemFile(t, mem, testDir+"/"+wal.FenceFile, want)
	fi, ok, err := wal.ReadFence(mem, testDir)
	if err != nil || !ok || fi != (wal.FenceInfo{Fenced: true, By: g.fence, Owner: g.owner}) {
		t.Fatalf("ReadFence: %+v %v %v", fi, ok, err)
	}
	if _, err := wal.Open(fencedConfig(mem)); !errors.Is(err, wal.ErrFenced) {
		t.Fatalf("Open of the golden fenced directory: %v", err)
	}

	// A fence record of another version (checksum intact) is not read, and counts as fenced.
	b := bytes.Clone(want)
	binary.LittleEndian.PutUint32(b[8:12], 2)
	binary.LittleEndian.PutUint32(b[124:128], crc32c(b[:124]))
	var r wal.FenceRecord
	if err := r.UnmarshalBinary(b); !errors.Is(err, wal.ErrVersion) {
		t.Fatalf("version 2 record: %v, want ErrVersion", err)
	}
	writeMemFile(t, mem, testDir+"/"+wal.FenceFile, b)
	if fi, _, _ := wal.ReadFence(mem, testDir); !fi.Fenced || fi.By != (wal.FenceRecord{}) {
		t.Fatalf("a fence record of version 2: %+v, want fenced", fi)
	}
}

// TestGoldenSeal: as TestGoldenFence, for SEAL; the golden seal also bounds a ReadOnly
// of the golden segments.
func TestGoldenSeal(t *testing.T) {
	g := goldenSeal
	if wal.SealFormatVersion != 1 {
		t.Fatalf("SealFormatVersion is %d: add the new version's golden SEAL", wal.SealFormatVersion)
	}
	got, err := g.info.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	want := goldenFile(t, g.path, got)
	if !bytes.Equal(got, want) {
		t.Fatalf("today's SEAL encoding differs from %s at byte %d. If deliberate, bump wal.SealFormatVersion "+
			"and add the new version's golden file", g.path, firstDiff(got, want))
	}
	b := want
	n := binary.LittleEndian.Uint32(b[56:60])
	switch {
	case len(b) != wal.SealSize:
		t.Fatalf("%d bytes", len(b))
	case string(b[0:8]) != "WEIRSEAL":
		t.Fatalf("magic %q", b[0:8])
	case binary.LittleEndian.Uint32(b[8:12]) != 1:
		t.Fatal("version")
	case binary.LittleEndian.Uint32(b[12:16]) != uint32(g.info.Segments):
		t.Fatal("segments")
	case wal.Pos(binary.LittleEndian.Uint64(b[16:24])) != g.info.End:
		t.Fatal("end")
	case wal.Pos(binary.LittleEndian.Uint64(b[24:32])) != g.info.LastSegment:
		t.Fatal("last segment")
	case wal.Pos(binary.LittleEndian.Uint64(b[32:40])) != g.info.Start:
		t.Fatal("start")
	case int64(binary.LittleEndian.Uint64(b[40:48])) != g.info.Records:
		t.Fatal("records")
	case int64(binary.LittleEndian.Uint64(b[48:56])) != g.info.Time.UnixNano():
		t.Fatal("time")
	case string(b[60:60+n]) != g.info.By || !bytes.Equal(b[60+n:124], make([]byte, 124-60-int(n))):
		t.Fatalf("name %q", b[60:60+n])
	case binary.LittleEndian.Uint32(b[124:128]) != crc32c(b[:124]):
		t.Fatal("checksum")
	}

	// The golden segments sealed by the golden SEAL, plus a late record after its end.
	dir := copyGolden(t, goldenV1.dir)
	if err := os.WriteFile(filepath.Join(dir, wal.SealFile), want, 0o644); err != nil {
		t.Fatal(err)
	}
	info, ok, err := wal.ReadSeal(nil, dir)
	if err != nil || !ok || info != g.info {
		t.Fatalf("ReadSeal: %+v %v %v", info, ok, err)
	}
	last := filepath.Join(dir, goldenV1.segments[1])
	seg, _ := os.ReadFile(last)
	copy(seg[g.info.End-g.info.LastSegment:], wal.AppendRecord(nil, 1, []byte("late")))
	os.WriteFile(last, seg, 0o644)
	r, err := wal.OpenReadOnly(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var recs []record
	end, err := r.Scan(func(typ byte, p []byte, pos wal.Pos) error {
		recs = append(recs, record{typ, bytes.Clone(p), pos})
		return nil
	})
	if err != nil || end != g.info.End {
		t.Fatalf("sealed scan: end %d, %v", end, err)
	}
	sameRecords(t, recs, goldenV1.records)

	// Another version (checksum intact) is refused with ErrVersion.
	b = bytes.Clone(want)
	binary.LittleEndian.PutUint32(b[8:12], 2)
	binary.LittleEndian.PutUint32(b[124:128], crc32c(b[:124]))
	os.WriteFile(filepath.Join(dir, wal.SealFile), b, 0o644)
	if _, _, err := wal.ReadSeal(nil, dir); !errors.Is(err, wal.ErrVersion) {
		t.Fatalf("SEAL version 2: %v, want ErrVersion", err)
	}
}

func writeMemFile(t *testing.T, fs wal.FS, path string, b []byte) {
	t.Helper()
	f, err := fs.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, 0); err != nil {
		t.Fatal(err)
	}
}
