package wal_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/weir-io/weir/wal"
	"github.com/weir-io/weir/wal/waltest"
)

// fencedConfig is memConfig with the fence token on.
func fencedConfig(fs wal.FS) wal.Config {
	cfg := memConfig(fs)
	cfg.Fence = true
	cfg.Owner = "broker-1 epoch 7"
	return cfg
}

// Open writes the owner record, synced, before anything can be appended; the fence
// record stays empty.
func TestFenceOpenWritesOwnerRecord(t *testing.T) {
	mem := waltest.NewMemFS()
	fs := waltest.NewFaultFS(mem)
	w, err := wal.Open(fencedConfig(fs))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	fi, ok, err := wal.ReadFence(mem.CrashClone(), testDir) // durable, not only written
	if err != nil || !ok {
		t.Fatalf("ReadFence after a crash: %v %v", ok, err)
	}
	if fi.Fenced || fi.Owner.State != wal.FenceOpen || fi.Owner.Who != "broker-1 epoch 7" || fi.Owner.Time.IsZero() {
		t.Fatalf("FENCE after Open: %+v", fi)
	}
	if _, err := w.Replay(nil); err != nil {
		t.Fatal(err)
	}
	var opens, reads atomic.Int64
	fs.SetHook(func(op waltest.Op, name string, _ int64, _ int) error {
		if filepath.Base(name) == wal.FenceFile {
			switch op {
			case waltest.OpOpen:
				opens.Add(1)
			case waltest.OpRead:
				reads.Add(1)
			}
		}
		return nil
	})
	for i := range 5 {
		mustAppend(t, w, 1, payload(i, 10))
	}
	// One fresh open (and read) of FENCE per group commit, never a cached descriptor.
	if opens.Load() != 5 || reads.Load() != 5 {
		t.Fatalf("%d opens and %d reads of FENCE for 5 group commits, want 5 each", opens.Load(), reads.Load())
	}
}

// After a taker's Fence, the next group fails with ErrFenced (and ErrFailed): its
// Done never reports success, nothing more is written, and synced records stay readable.
func TestFenceStopsAcks(t *testing.T) {
	fs := waltest.NewFaultFS(waltest.NewMemFS())
	w, _, _ := openWAL(t, fencedConfig(fs))
	var ok []record
	for i := range 5 {
		ok = append(ok, mustAppend(t, w, 1, payload(i, 40)))
	}
	end := w.End()
	if err := wal.Fence(fs, testDir, "broker-2"); err != nil {
		t.Fatal(err)
	}
	_, err := w.AppendSync(context.Background(), 1, []byte("not acked"))
	if !errors.Is(err, wal.ErrFenced) || !errors.Is(err, wal.ErrFailed) || !strings.Contains(err.Error(), "broker-2") {
		t.Fatalf("append after the fence: %v, want ErrFenced and ErrFailed naming the taker", err)
	}
	if !errors.Is(w.Err(), wal.ErrFenced) {
		t.Fatalf("Err = %v", w.Err())
	}
	writes := fs.Count(waltest.OpWrite, ".wal")
	for range 3 {
		if _, err := w.AppendSync(context.Background(), 1, []byte("x")); !errors.Is(err, wal.ErrFenced) {
			t.Fatalf("append after the failure: %v", err)
		}
	}
	if fs.Count(waltest.OpWrite, ".wal") != writes {
		t.Fatal("a fenced WAL kept writing")
	}
	// The fenced group is written and synced but never published.
	if w.End() != end {
		t.Fatalf("End moved from %d to %d", end, w.End())
	}
	checkReadAt(t, w, ok)
	fi, _, _ := wal.ReadFence(fs, testDir)
	if !fi.Fenced || fi.By.Who != "broker-2" || fi.By.State != wal.FenceFenced || fi.Owner.Who != "broker-1 epoch 7" {
		t.Fatalf("FENCE: %+v", fi)
	}
}

// A fenced or sealed directory is refused by Open, with or without Config.Fence,
// before anything in it changes (the leftover temporary segment stays).
func TestOpenRefusesFencedAndSealed(t *testing.T) {
	for _, sealed := range []bool{false, true} {
		mem := waltest.NewMemFS()
		w, _, _ := openWAL(t, memConfig(mem))
		mustAppend(t, w, 1, []byte("r"))
		w.Close()
		f, _ := mem.OpenFile(testDir+"/segment-9.tmp", os.O_CREATE|os.O_RDWR, 0o644)
		f.Close()
		var err error
		if sealed {
			_, err = wal.Seal(mem, testDir, "taker")
		} else {
			err = wal.Fence(mem, testDir, "taker")
		}
		if err != nil {
			t.Fatal(err)
		}
		files := memFiles(t, mem)
		for _, cfg := range []wal.Config{fencedConfig(mem), memConfig(mem)} {
			if _, err := wal.Open(cfg); !errors.Is(err, wal.ErrFenced) || !strings.Contains(err.Error(), testDir) {
				t.Fatalf("sealed %v, Fence %v: Open: %v, want ErrFenced", sealed, cfg.Fence, err)
			}
		}
		sameFiles(t, "refused Open", files, memFiles(t, mem))
	}
}

// A second Open of the same directory (the same identity started twice) writes its own
// owner record; the first writer's next check finds another's and stops acking.
func TestSecondOpenFencesTheFirst(t *testing.T) {
	mem := waltest.NewMemFS()
	w1, _, _ := openWAL(t, fencedConfig(mem))
	mustAppend(t, w1, 1, []byte("first"))
	w2, err := wal.Open(fencedConfig(mem))
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	if _, err := w1.AppendSync(context.Background(), 1, []byte("x")); !errors.Is(err, wal.ErrFenced) {
		t.Fatalf("first writer after a second Open: %v", err)
	}
}

// A FENCE that cannot be read, or whose fence record is damaged, counts as fenced:
// no damage can unfence a directory.
func TestFenceUnreadableCountsAsFenced(t *testing.T) {
	damages := map[string]func(fs *waltest.MemFS){
		"removed": func(fs *waltest.MemFS) { fs.Remove(testDir + "/" + wal.FenceFile) },
		"fence record garbage": func(fs *waltest.MemFS) {
			f, _ := fs.OpenFile(testDir+"/"+wal.FenceFile, os.O_RDWR, 0)
			f.WriteAt([]byte("garbage"), 10)
			f.Close()
		},
		"owner record damaged": func(fs *waltest.MemFS) {
			xorByte(t, fs, testDir+"/"+wal.FenceFile, wal.FenceRecordSize+40, 1)
		},
	}
	for name, damage := range damages {
		t.Run(name, func(t *testing.T) {
			mem := waltest.NewMemFS()
			w, _, _ := openWAL(t, fencedConfig(mem))
			mustAppend(t, w, 1, []byte("ok"))
			damage(mem)
			if _, err := w.AppendSync(context.Background(), 1, []byte("x")); !errors.Is(err, wal.ErrFenced) {
				t.Fatalf("append: %v, want ErrFenced", err)
			}
		})
	}
}

// The race the two-record layout exists for: a taker fences between the owner's Open
// reading FENCE (not fenced yet) and writing its owner record. The owner writes only
// its own record, so the fence survives and the owner acks nothing (its Replay already
// refuses).
func TestFenceBetweenOpenReadAndWrite(t *testing.T) {
	mem := waltest.NewMemFS()
	fs := waltest.NewFaultFS(mem)
	var fenced atomic.Bool
	fs.SetHook(func(op waltest.Op, name string, off int64, _ int) error {
		if op == waltest.OpWrite && filepath.Base(name) == wal.FenceFile && fenced.CompareAndSwap(false, true) {
			if err := wal.Fence(mem, testDir, "taker"); err != nil {
				t.Error(err)
			}
		}
		return nil
	})
	w, err := wal.Open(fencedConfig(fs))
	if err != nil {
		t.Fatal(err) // it could not know
	}
	defer w.Close()
	if _, err := w.Replay(nil); !errors.Is(err, wal.ErrFenced) {
		t.Fatalf("Replay after the fence: %v, want ErrFenced", err)
	}
	fi, _, _ := wal.ReadFence(mem, testDir)
	if !fi.Fenced || fi.By.Who != "taker" {
		t.Fatalf("the owner's Open overwrote the fence: %+v", fi)
	}
}

// Replay of a directory fenced after Open refuses and changes nothing (it would
// truncate and create segments in a directory a taker is reading).
func TestReplayRefusesFenced(t *testing.T) {
	mem := waltest.NewMemFS()
	w, _, _ := openWAL(t, memConfig(mem))
	for i := range 3 {
		mustAppend(t, w, 1, payload(i, 30))
	}
	w.Close()
	w, err := wal.Open(fencedConfig(mem))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := wal.Fence(mem, testDir, "taker"); err != nil {
		t.Fatal(err)
	}
	files := memFiles(t, mem)
	if _, err := w.Replay(nil); !errors.Is(err, wal.ErrFenced) {
		t.Fatalf("Replay: %v", err)
	}
	sameFiles(t, "refused replay", files, memFiles(t, mem))
}

// Fence keeps the first taker's record; a second Fence rewrites it unchanged.
func TestFenceKeepsFirstTaker(t *testing.T) {
	mem := waltest.NewMemFS()
	openWAL(t, fencedConfig(mem))
	if err := wal.Fence(mem, testDir, "first"); err != nil {
		t.Fatal(err)
	}
	before, _, _ := wal.ReadFence(mem, testDir)
	if err := wal.Fence(mem, testDir, "second"); err != nil {
		t.Fatal(err)
	}
	after, _, _ := wal.ReadFence(mem, testDir)
	if after != before || after.By.Who != "first" {
		t.Fatalf("fence record %+v after a second Fence, was %+v", after.By, before.By)
	}
	if err := wal.Fence(mem, testDir, strings.Repeat("x", wal.MaxFenceName+1)); err == nil {
		t.Fatal("a name longer than MaxFenceName was accepted")
	}
	cfg := fencedConfig(waltest.NewMemFS())
	cfg.Owner = strings.Repeat("x", wal.MaxFenceName+1)
	if err := cfg.Validate(); err == nil {
		t.Fatal("Validate accepted an Owner longer than MaxFenceName")
	}
}

// Fence of a directory nobody created yet creates it fenced, so a writer starting late
// is refused.
func TestFenceBeforeTheWriterStarts(t *testing.T) {
	mem := waltest.NewMemFS()
	if err := wal.Fence(mem, testDir, "controller"); err != nil {
		t.Fatal(err)
	}
	if _, err := wal.Open(fencedConfig(mem)); !errors.Is(err, wal.ErrFenced) {
		t.Fatalf("Open of a directory fenced before it existed: %v", err)
	}
	if !slices.Contains(mem.Names(), testDir+"/"+wal.FenceFile) {
		t.Fatal("no FENCE")
	}
}
