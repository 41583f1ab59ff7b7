package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/weir-io/weir/internal/crc32c"
)

// The epoch fence token: one file per broker, next to its WAL directories (package
// wal/walhome names it), saying which registration epochs of the broker are fenced. A
// FENCE fences one directory, and only if the taker finds the directory; the token
// fences epochs by number, so an owner that registered epoch N but has not created its
// directory yet, or whose directory a taker's stale listing did not show, or that the
// WAL directory GC removed, still cannot write there: Open (Config.EpochFence) refuses
// an epoch the token fences. See doc.go, Fencing.
//
//	FENCED-EPOCH: 16-byte slots, little endian; slot e at offset 16*e
//	slot 0, header  | magic "WEIRFEPO" (8) | version u32 = 1 | crc32c of 0..12 |
//	slot e >= 1     | epoch u64 (= e)      | state u32       | crc32c of 0..12 |
//
// A slot is written whole by one pwrite and synced (slots of different writers may
// share a page: an NFS client sends only the bytes it wrote, not the page); nothing is ever renamed, truncated
// or removed, so no writer can undo another's slot, and a writer never reads before it
// writes (no read-modify-write to race). Slot e set (any nonzero bytes) means every
// epoch <= e is fenced: the token fences up to the highest set slot. A slot that is set
// but does not decode (a torn write, damage) counts as fenced with no other state. An
// intact header of another version makes the token unreadable (ErrVersion), which Open
// takes as fenced; a damaged header is ignored: every write writes the same header
// bytes, so only a torn first write can damage it, and the next write repairs it.
//
// The other state bits only save work and are safe to lose (two writers of one slot
// may race; the fenced bit is in every write): EpochSealed says the directory of that
// epoch has a SEAL (walhome seals it by name otherwise), EpochCollected that the WAL
// directory GC removed it (loaders then do not look for it).

// EpochFenceVersion is the format version of the epoch fence token.
const EpochFenceVersion = 1

// EpochSlotSize is the size of one slot of the token.
const EpochSlotSize = 16

var epochFenceMagic = [8]byte{'W', 'E', 'I', 'R', 'F', 'E', 'P', 'O'}

// EpochState is the state a token slot records for one epoch.
type EpochState uint32

const (
	// EpochFenced: this epoch and every lower one are fenced.
	EpochFenced EpochState = 1 << iota
	// EpochSealed: the epoch's directory is sealed (a hint).
	EpochSealed
	// EpochCollected: the epoch's directory was removed by the WAL directory GC (a hint).
	EpochCollected
)

// EpochMark is one slot to write.
type EpochMark struct {
	Epoch int64
	State EpochState
}

// EpochFence is what a token says.
type EpochFence struct {
	// Max is the highest fenced epoch (0: none).
	Max   int64
	state map[int64]EpochState
}

// Fenced reports whether epoch e is fenced.
func (f EpochFence) Fenced(e int64) bool { return e >= 1 && e <= f.Max }

// State is the state recorded for epoch e: EpochFenced if e <= Max, plus the hints its
// own slot holds.
func (f EpochFence) State(e int64) EpochState {
	st := f.state[e]
	if f.Fenced(e) {
		st |= EpochFenced
	}
	return st
}

func encodeEpochSlot(b []byte, e int64, st EpochState) {
	if e == 0 {
		copy(b[0:8], epochFenceMagic[:])
		binary.LittleEndian.PutUint32(b[8:12], EpochFenceVersion)
	} else {
		binary.LittleEndian.PutUint64(b[0:8], uint64(e))
		binary.LittleEndian.PutUint32(b[8:12], uint32(st))
	}
	binary.LittleEndian.PutUint32(b[12:16], crc32c.Checksum(b[:12]))
}

// ParseEpochFence decodes a token's bytes.
func ParseEpochFence(b []byte) (EpochFence, error) {
	f := EpochFence{state: map[int64]EpochState{}}
	if len(b) >= EpochSlotSize {
		// Only an intact header of another version is refused; a damaged one (a torn
		// first write: every later write rewrites it) is ignored, the slots check
		// themselves.
		h := b[:EpochSlotSize]
		if [8]byte(h[0:8]) == epochFenceMagic && crc32c.Checksum(h[:12]) == binary.LittleEndian.Uint32(h[12:16]) {
			if v := binary.LittleEndian.Uint32(h[8:12]); v != EpochFenceVersion {
				return EpochFence{}, fmt.Errorf("%w: epoch fence token version %d (this build reads %d)", ErrVersion, v, EpochFenceVersion)
			}
		}
	}
	for off := EpochSlotSize; off < len(b); off += EpochSlotSize {
		s := make([]byte, EpochSlotSize)
		copy(s, b[off:])
		if allZero(s) {
			continue
		}
		e := int64(off / EpochSlotSize)
		f.Max = max(f.Max, e)
		st := EpochFenced // set but not decodable: fenced, no hints
		if binary.LittleEndian.Uint64(s[0:8]) == uint64(e) && crc32c.Checksum(s[:12]) == binary.LittleEndian.Uint32(s[12:16]) {
			st |= EpochState(binary.LittleEndian.Uint32(s[8:12]))
		}
		f.state[e] = st
	}
	return f, nil
}

// ReadEpochFence reads the token at path uncached (ReadUncached). A token that does
// not exist fences nothing.
func ReadEpochFence(fsys FS, path string) (EpochFence, error) {
	b, err := ReadUncached(fsys, path, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return EpochFence{state: map[int64]EpochState{}}, nil
	}
	if err != nil {
		return EpochFence{}, ioError("reading "+path, err)
	}
	f, err := ParseEpochFence(b)
	if err != nil {
		return EpochFence{}, fmt.Errorf("wal: %s: %w", path, err)
	}
	return f, nil
}

// MarkEpochs writes the given slots of the token at path (creating it and its
// directory), and the header, then syncs it: after it returns, every epoch up to the
// highest marked one is fenced for every later Open. Every mark must include
// EpochFenced.
func MarkEpochs(fsys FS, path string, marks ...EpochMark) error {
	if fsys == nil {
		fsys = OSFS()
	}
	if err := fsys.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("wal: creating %s: %w", filepath.Dir(path), err)
	}
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return ioError("opening "+path, err)
	}
	slot := make([]byte, EpochSlotSize)
	write := func(e int64, st EpochState) error {
		encodeEpochSlot(slot, e, st)
		_, err := f.WriteAt(slot, e*EpochSlotSize)
		return err
	}
	err = write(0, 0)
	for _, m := range marks {
		if err != nil {
			break
		}
		if m.Epoch < 1 || m.State&EpochFenced == 0 {
			err = fmt.Errorf("wal: epoch mark %d state %d: want an epoch >= 1, fenced", m.Epoch, m.State)
			break
		}
		err = write(m.Epoch, m.State)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return ioError("writing "+path, err)
	}
	return fsys.SyncDir(filepath.Dir(path))
}
