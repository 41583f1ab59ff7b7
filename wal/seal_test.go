package wal_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/weir-io/weir/wal"
	"github.com/weir-io/weir/wal/waltest"
)

// ownedLog writes n records over several segments with a fenced WAL on fs and
// returns them; the WAL stays open (a live or dead owner, as the test decides).
func ownedLog(t *testing.T, fs wal.FS, n int) (*wal.WAL, []record) {
	t.Helper()
	cfg := fencedConfig(fs)
	cfg.SegmentSize = 1024
	w, _, _ := openWAL(t, cfg)
	var recs []record
	for i := range n {
		recs = append(recs, mustAppend(t, w, byte(i), payload(i, 20+i%90)))
	}
	return w, recs
}

// scanAll reads every record of dir through a new ReadOnly on fs.
func scanAll(t *testing.T, fs wal.FS, dir string) ([]record, wal.Pos) {
	t.Helper()
	r, err := wal.OpenReadOnly(dir, fs)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var recs []record
	end, err := r.Scan(func(typ byte, p []byte, pos wal.Pos) error {
		recs = append(recs, record{typ, bytes.Clone(p), pos})
		return nil
	})
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	return recs, end
}

func TestSealRecordsTheEnd(t *testing.T) {
	mem := waltest.NewMemFS()
	w, recs := ownedLog(t, mem, 60)
	end := w.End()
	info, err := wal.Seal(mem, testDir, "broker-2")
	if err != nil {
		t.Fatal(err)
	}
	segs := segmentNames(mem)
	if info.End != end || info.Records != 60 || info.By != "broker-2" || info.Time.IsZero() ||
		info.Start != 0 || info.Segments != len(segs) || info.LastSegment != baseOf(segs[len(segs)-1]) {
		t.Fatalf("seal %+v; owner end %d, segments %v", info, end, segs)
	}
	got, ok, err := wal.ReadSeal(mem.CrashClone(), testDir) // durable
	if err != nil || !ok || got != info {
		t.Fatalf("ReadSeal after a crash: %+v %v %v, want %+v", got, ok, err, info)
	}
	for _, name := range mem.Names() {
		if strings.HasSuffix(name, ".part") {
			t.Fatalf("temporary %s left", name)
		}
	}
	scanned, scanEnd := scanAll(t, mem, testDir)
	sameRecords(t, scanned, recs)
	if scanEnd != end {
		t.Fatalf("sealed scan ends at %d, want %d", scanEnd, end)
	}
	// The owner is fenced: it acks nothing more.
	if _, err := w.AppendSync(t.Context(), 1, []byte("late")); !errors.Is(err, wal.ErrFenced) {
		t.Fatalf("owner after the seal: %v", err)
	}
	// The first seal wins: a later Seal returns it unchanged.
	again, err := wal.Seal(mem, testDir, "broker-3")
	if err != nil || again != info {
		t.Fatalf("second Seal: %+v %v, want the first %+v", again, err, info)
	}
}

func baseOf(path string) wal.Pos {
	var b int64
	fmt.Sscanf(filepath.Base(path), "%d.wal", &b)
	return wal.Pos(b)
}

// Several takers sealing at once over their own clients all get the one seal that
// was published.
func TestSealConcurrentTakers(t *testing.T) {
	for round := range 20 {
		mem := waltest.NewMemFS()
		_, recs := ownedLog(t, mem, 30)
		var wg sync.WaitGroup
		infos := make([]wal.SealInfo, 4)
		errs := make([]error, 4)
		for i := range infos {
			wg.Add(1)
			go func() {
				defer wg.Done()
				infos[i], errs[i] = wal.Seal(waltest.NewStaleFS(mem), testDir, fmt.Sprintf("taker-%d", i))
			}()
		}
		wg.Wait()
		for i := range infos {
			if errs[i] != nil || infos[i] != infos[0] {
				t.Fatalf("round %d: taker %d got %+v, %v; taker 0 got %+v", round, i, infos[i], errs[i], infos[0])
			}
		}
		on, _, _ := wal.ReadSeal(mem, testDir)
		if on != infos[0] || on.Records != int64(len(recs)) {
			t.Fatalf("round %d: SEAL holds %+v, takers got %+v", round, on, infos[0])
		}
	}
}

// A directory whose writer never wrote FENCE (an older build, or a crash before Open
// finished) is fenced by Seal, which creates FENCE.
func TestSealLegacyDirectory(t *testing.T) {
	mem := waltest.NewMemFS()
	w, _, _ := openWAL(t, memConfig(mem))
	var recs []record
	for i := range 10 {
		recs = append(recs, mustAppend(t, w, 1, payload(i, 50)))
	}
	w.Close()
	if _, ok, _ := wal.ReadFence(mem, testDir); ok {
		t.Fatal("FENCE without Config.Fence")
	}
	info, err := wal.Seal(mem, testDir, "taker")
	if err != nil {
		t.Fatal(err)
	}
	fi, ok, err := wal.ReadFence(mem.CrashClone(), testDir)
	if err != nil || !ok || !fi.Fenced || fi.By.Who != "taker" {
		t.Fatalf("FENCE after Seal: %+v %v %v", fi, ok, err)
	}
	got, end := scanAll(t, mem, testDir)
	sameRecords(t, got, recs)
	if end != info.End {
		t.Fatalf("end %d, seal %d", end, info.End)
	}
}

// An empty (or never created) directory seals at 0 with no segments; a segment a late
// writer creates there afterwards is never read.
func TestSealEmptyDirectory(t *testing.T) {
	mem := waltest.NewMemFS()
	info, err := wal.Seal(mem, testDir, "taker")
	if err != nil {
		t.Fatal(err)
	}
	if info.End != 0 || info.Segments != 0 || info.Records != 0 {
		t.Fatalf("seal of an empty directory: %+v", info)
	}
	lateSegment(t, mem, 0, []byte("late"))
	if got, end := scanAll(t, mem, testDir); len(got) != 0 || end != 0 {
		t.Fatalf("sealed empty directory scans %d records to %d", len(got), end)
	}
}

// Seal commits every segment: it rewrites each header unchanged and syncs the file (on
// NFS that makes the client send a COMMIT for the whole file). No record changes.
func TestSealCommitsEverySegment(t *testing.T) {
	mem := waltest.NewMemFS()
	ownedLog(t, mem, 60)
	files := memFiles(t, mem)
	fs := waltest.NewFaultFS(mem)
	var mu sync.Mutex
	writes := map[string][2]int64{}
	syncs := map[string]int{}
	fs.SetHook(func(op waltest.Op, name string, off int64, n int) error {
		mu.Lock()
		defer mu.Unlock()
		if filepath.Ext(name) == ".wal" {
			switch op {
			case waltest.OpWrite:
				writes[name] = [2]int64{off, int64(n)}
			case waltest.OpSync:
				syncs[name]++
			}
		}
		return nil
	})
	if _, err := wal.Seal(fs, testDir, "taker"); err != nil {
		t.Fatal(err)
	}
	for _, s := range segmentNames(mem) {
		if writes[s] != [2]int64{0, wal.HeaderSize} || syncs[s] != 1 {
			t.Fatalf("%s: write %v, %d syncs; want the header rewritten and one sync", s, writes[s], syncs[s])
		}
		if !bytes.Equal(memFiles(t, mem)[s], files[s]) {
			t.Fatalf("%s changed", s)
		}
	}
}

// A bad record before the last segment is an error for Seal and Scan, never an end;
// in the last segment it is the torn tail and ends the log there.
func TestSealAndScanCorruption(t *testing.T) {
	mem := waltest.NewMemFS()
	w, recs := ownedLog(t, mem, 60)
	w.Close()
	segs := segmentNames(mem)
	if len(segs) < 3 {
		t.Fatalf("segments %v", segs)
	}
	// A record of the first segment, and one in the middle of the last.
	var inFirst, inLast record
	var lastIdx int
	for i, r := range recs {
		if r.pos < baseOf(segs[1]) && i == 2 {
			inFirst = r
		}
		if r.pos > baseOf(segs[len(segs)-1]) && inLast.payload == nil && i+2 < len(recs) {
			inLast, lastIdx = r, i
		}
	}

	t.Run("non-last", func(t *testing.T) {
		fs := mem.Clone()
		xorByte(t, fs, segs[0], int64(inFirst.pos)+3, 0x10)
		off := int64(inFirst.pos) - wal.RecordHeaderSize
		r, err := wal.OpenReadOnly(testDir, fs)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		_, err = r.Scan(func(byte, []byte, wal.Pos) error { return nil })
		if !errors.Is(err, wal.ErrCorrupt) || !strings.Contains(err.Error(), segs[0]) || !strings.Contains(err.Error(), fmt.Sprintf("offset %d ", off)) {
			t.Fatalf("Scan: %v, want ErrCorrupt naming %s at offset %d", err, segs[0], off)
		}
		if _, err := wal.Seal(fs, testDir, "taker"); !errors.Is(err, wal.ErrCorrupt) {
			t.Fatalf("Seal: %v, want ErrCorrupt", err)
		}
		if _, ok, _ := wal.ReadSeal(fs, testDir); ok {
			t.Fatal("a corrupt directory was sealed")
		}
	})
	t.Run("last", func(t *testing.T) {
		fs := mem.Clone()
		xorByte(t, fs, segs[len(segs)-1], int64(inLast.pos-baseOf(segs[len(segs)-1]))+3, 0x10)
		info, err := wal.Seal(fs, testDir, "taker")
		if err != nil {
			t.Fatal(err)
		}
		if want := inLast.pos - wal.RecordHeaderSize; info.End != want || info.Records != int64(lastIdx) {
			t.Fatalf("seal %+v, want the end at the torn record %d after %d records", info, want, lastIdx)
		}
		got, _ := scanAll(t, fs, testDir)
		sameRecords(t, got, recs[:lastIdx])
	})
}

func TestReadSealDamaged(t *testing.T) {
	mem := waltest.NewMemFS()
	ownedLog(t, mem, 5)
	if _, ok, err := wal.ReadSeal(mem, testDir); ok || err != nil {
		t.Fatalf("unsealed: %v %v", ok, err)
	}
	if _, err := wal.Seal(mem, testDir, "taker"); err != nil {
		t.Fatal(err)
	}
	xorByte(t, mem, testDir+"/"+wal.SealFile, 20, 1)
	if _, _, err := wal.ReadSeal(mem, testDir); !errors.Is(err, wal.ErrCorrupt) {
		t.Fatalf("damaged SEAL: %v", err)
	}
	if _, err := wal.OpenReadOnly(testDir, mem); !errors.Is(err, wal.ErrCorrupt) {
		t.Fatalf("OpenReadOnly of a damaged SEAL: %v", err)
	}
}

// Seal and sealed reads on the real file system (hard link, directory sync).
func TestSealOSFS(t *testing.T) {
	dir := t.TempDir()
	cfg := wal.DefaultConfig(dir)
	cfg.SegmentSize = 64 << 10
	cfg.Fence = true
	w, _, _ := openWAL(t, cfg)
	var recs []record
	for i := range 200 {
		recs = append(recs, mustAppend(t, w, 3, payload(i, 1000)))
	}
	info, err := wal.Seal(nil, dir, "taker")
	if err != nil {
		t.Fatal(err)
	}
	if info.End != w.End() {
		t.Fatalf("seal end %d, owner end %d", info.End, w.End())
	}
	if _, err := w.AppendSync(t.Context(), 1, []byte("x")); !errors.Is(err, wal.ErrFenced) {
		t.Fatalf("owner after the seal: %v", err)
	}
	got, end := scanAll(t, nil, dir)
	sameRecords(t, got, recs)
	if end != info.End {
		t.Fatalf("end %d", end)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".part") {
			t.Fatalf("temporary %s left", e.Name())
		}
	}
	if again, err := wal.Seal(nil, dir, "other"); err != nil || again != info {
		t.Fatalf("second seal %+v %v", again, err)
	}
}
