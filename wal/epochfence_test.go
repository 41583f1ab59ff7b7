package wal_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/weir-io/weir/wal"
	"github.com/weir-io/weir/wal/waltest"
)

const testToken = "/FENCED-EPOCH"

// epochConfig is fencedConfig writing registration epoch e under the token testToken.
func epochConfig(fs wal.FS, e int64) wal.Config {
	cfg := fencedConfig(fs)
	cfg.EpochFence, cfg.Epoch = testToken, e
	return cfg
}

// A taker that fences epoch 5 by the token before the owner of epoch 5 opened its
// directory (the owner stalled between registering and wal.Open) stops that owner:
// Open refuses and leaves the directory fenced. A later epoch opens.
func TestEpochFenceRefusesOpen(t *testing.T) {
	fs := waltest.NewMemFS()
	if err := wal.MarkEpochs(fs, testToken, wal.EpochMark{Epoch: 5, State: wal.EpochFenced}); err != nil {
		t.Fatal(err)
	}
	for _, e := range []int64{1, 4, 5} {
		_, err := wal.Open(epochConfig(fs, e))
		if !errors.Is(err, wal.ErrFenced) {
			t.Fatalf("Open of epoch %d under a token fenced up to 5: %v, want ErrFenced", e, err)
		}
	}
	if fi, ok, err := wal.ReadFence(fs, testDir); err != nil || !ok || !fi.Fenced {
		t.Fatalf("the refused directory is not fenced: %+v %v %v", fi, ok, err)
	}
	cfg := epochConfig(fs, 6)
	cfg.Dir = "/wal6"
	w, _, _ := openWAL(t, cfg)
	mustAppend(t, w, 1, []byte("epoch 6"))
}

// The race: the taker marks the token first, then fences the directory by name; the
// owner writes its owner record first, then reads the token. A mark that lands between
// the owner record and the token read is seen by the read.
func TestEpochFenceBetweenOwnerRecordAndTokenRead(t *testing.T) {
	mem := waltest.NewMemFS()
	fs := waltest.NewFaultFS(mem)
	fs.SetHook(func(op waltest.Op, name string, _ int64, _ int) error {
		if op == waltest.OpOpen && name == testToken {
			fi, _, _ := wal.ReadFence(mem, testDir)
			if fi.Owner.State != wal.FenceOpen {
				t.Errorf("token read before the owner record was written: %+v", fi)
			}
			if err := wal.MarkEpochs(mem, testToken, wal.EpochMark{Epoch: 3, State: wal.EpochFenced}); err != nil {
				t.Error(err)
			}
		}
		return nil
	})
	if _, err := wal.Open(epochConfig(fs, 3)); !errors.Is(err, wal.ErrFenced) {
		t.Fatalf("Open: %v, want ErrFenced", err)
	}
}

// The token's format: slot e at 16*e, the header in slot 0; a torn slot counts as
// fenced; nothing set above an epoch leaves it unfenced; another version is refused.
func TestEpochFenceFormat(t *testing.T) {
	fs := waltest.NewMemFS()
	if err := wal.MarkEpochs(fs, testToken, wal.EpochMark{Epoch: 2, State: wal.EpochFenced | wal.EpochSealed}, wal.EpochMark{Epoch: 3, State: wal.EpochFenced}); err != nil {
		t.Fatal(err)
	}
	b, err := wal.ReadUncached(fs, testToken, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 4*wal.EpochSlotSize || string(b[0:8]) != "WEIRFEPO" || binary.LittleEndian.Uint32(b[8:12]) != 1 ||
		binary.LittleEndian.Uint32(b[12:16]) != crc32c(b[0:12]) || !bytes.Equal(b[16:32], make([]byte, 16)) ||
		binary.LittleEndian.Uint64(b[32:40]) != 2 || binary.LittleEndian.Uint32(b[40:44]) != 3 || binary.LittleEndian.Uint32(b[44:48]) != crc32c(b[32:44]) {
		t.Fatalf("token bytes %x", b)
	}
	ef, err := wal.ParseEpochFence(b)
	if err != nil || ef.Max != 3 || !ef.Fenced(1) || ef.Fenced(4) || ef.State(2) != wal.EpochFenced|wal.EpochSealed || ef.State(1) != wal.EpochFenced {
		t.Fatalf("parsed %+v %v", ef, err)
	}
	torn := append(bytes.Clone(b), make([]byte, 5*wal.EpochSlotSize)...)
	torn[8*wal.EpochSlotSize+3] = 0x7f // slot 8: set, not decodable
	if ef, err := wal.ParseEpochFence(torn); err != nil || ef.Max != 8 || ef.State(8) != wal.EpochFenced {
		t.Fatalf("torn slot: %+v %v", ef, err)
	}
	bad := bytes.Clone(b)
	bad[9] ^= 1 // damaged (torn first write): ignored, the slots still count
	if ef, err := wal.ParseEpochFence(bad); err != nil || ef.Max != 3 {
		t.Fatalf("damaged header: %+v %v", ef, err)
	}
	v2 := bytes.Clone(b)
	binary.LittleEndian.PutUint32(v2[8:12], 2)
	binary.LittleEndian.PutUint32(v2[12:16], crc32c(v2[0:12]))
	if _, err := wal.ParseEpochFence(v2); !errors.Is(err, wal.ErrVersion) {
		t.Fatalf("an intact header of version 2: %v, want ErrVersion", err)
	}
	if ef, err := wal.ReadEpochFence(fs, "/none"); err != nil || ef.Max != 0 {
		t.Fatalf("missing token: %+v %v", ef, err)
	}
}

// TestGoldenEpochFence: the encoder writes testdata/epochfence-v1.bin byte for byte.
func TestGoldenEpochFence(t *testing.T) {
	fs := waltest.NewMemFS()
	if err := wal.MarkEpochs(fs, testToken, wal.EpochMark{Epoch: 1, State: wal.EpochFenced | wal.EpochSealed | wal.EpochCollected}, wal.EpochMark{Epoch: 3, State: wal.EpochFenced}); err != nil {
		t.Fatal(err)
	}
	got, err := wal.ReadUncached(fs, testToken, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := goldenFile(t, "testdata/epochfence-v1.bin", got)
	if !bytes.Equal(got, want) {
		t.Fatalf("token %x, golden %x", got, want)
	}
	ef, err := wal.ParseEpochFence(want)
	if err != nil || ef.Max != 3 || ef.State(1) != wal.EpochFenced|wal.EpochSealed|wal.EpochCollected || ef.State(2) != wal.EpochFenced {
		t.Fatalf("golden parsed %+v %v", ef, err)
	}
}

// NFS weak cache consistency: a client that wrote FENCE itself (the owner record) can
// keep its cached page across a fresh open after another client fenced the file. The
// owner's check reads FENCE uncached, so the taker's fence still stops the next ack.
// The same holds for the epoch fence token a host wrote itself.
func TestFenceAndTokenReadUncachedAfterOwnWrite(t *testing.T) {
	server := waltest.NewMemFS()
	owner, taker := waltest.NewStaleFS(server), waltest.NewStaleFS(server)
	owner.SetOwnWriteStale(true)
	w, _, _ := openWAL(t, fencedConfig(owner))
	mustAppend(t, w, 1, []byte("acked before the fence")) // the check caches FENCE's page
	if err := wal.Fence(taker, testDir, "broker-2"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.AppendSync(context.Background(), 1, []byte("after the fence")); !errors.Is(err, wal.ErrFenced) {
		t.Fatalf("append after the fence: %v, want ErrFenced", err)
	}

	if err := wal.MarkEpochs(owner, testToken, wal.EpochMark{Epoch: 2, State: wal.EpochFenced}); err != nil {
		t.Fatal(err)
	}
	if ef, err := wal.ReadEpochFence(owner, testToken); err != nil || ef.Max != 2 {
		t.Fatalf("own token: %+v %v", ef, err)
	}
	plainRead := func() wal.EpochFence {
		f, err := owner.OpenFile(testToken, os.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		b := make([]byte, 3*wal.EpochSlotSize)
		f.ReadAt(b, 0)
		ef, _ := wal.ParseEpochFence(b)
		return ef
	}
	plainRead() // the owner's cache now holds the token's page
	if err := wal.MarkEpochs(taker, testToken, wal.EpochMark{Epoch: 1, State: wal.EpochFenced | wal.EpochSealed}); err != nil {
		t.Fatal(err)
	}
	ef, err := wal.ReadEpochFence(owner, testToken)
	if err != nil || ef.State(1)&wal.EpochSealed == 0 {
		t.Fatalf("token after another host marked epoch 1 sealed: %+v %v (a stale page)", ef, err)
	}
	// The model is real: a plain fresh open by the owner returns the stale page.
	if ef := plainRead(); ef.State(1)&wal.EpochSealed != 0 {
		t.Fatal("StaleFS did not keep the stale page: the test shows nothing")
	}
}

// ReadUncached on the OS file system: O_DIRECT where the file system allows it, a
// plain read where it refuses; either way the file's bytes, whole, at any size.
func TestReadUncachedOS(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []int{0, 1, 256, 4096, 4097, 20000} {
		p := filepath.Join(dir, "f")
		want := payload(n, n)
		if err := os.WriteFile(p, want, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := wal.ReadUncached(nil, p, 0)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%d bytes: got %d bytes, %v", n, len(got), err)
		}
	}
	if _, err := wal.ReadUncached(nil, filepath.Join(dir, "none"), 0); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}
