package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/weir-io/weir/internal/crc32c"
)

// The fence token: see doc.go, Fencing, for the drawing and the argument.
const (
	// FenceFile is the name of the fence token in a WAL directory.
	FenceFile = "FENCE"
	// FenceFormatVersion is written into every FENCE record.
	FenceFormatVersion = 1
	// FenceRecordSize is the size of one FENCE record; the file holds two, the fence
	// record at offset 0 (written by takers) and the owner record after it (written by
	// the owner's Open).
	FenceRecordSize = 128
	// MaxFenceName is the longest owner or taker name a FENCE record (or a SEAL) holds.
	MaxFenceName = 64
)

const (
	fenceFileSize = 2 * FenceRecordSize
	fenceSlotOff  = 0               // the fence record: takers write here
	ownerSlotOff  = FenceRecordSize // the owner record: only the owner's Open writes here
	fenceCRCOff   = FenceRecordSize - 4
)

var fenceMagic = [8]byte{'W', 'E', 'I', 'R', 'F', 'N', 'C', 'E'}

// FenceState is the state a FENCE record declares.
type FenceState uint32

const (
	// FenceOpen: an owner record; the writer whose Instance it holds may ack.
	FenceOpen FenceState = 1
	// FenceFenced: a fence record; no writer may ack anything any more.
	FenceFenced FenceState = 2
)

func (s FenceState) String() string {
	switch s {
	case FenceOpen:
		return "open"
	case FenceFenced:
		return "fenced"
	}
	return fmt.Sprintf("FenceState(%d)", uint32(s))
}

// FenceRecord is one 128-byte record of a FENCE file.
type FenceRecord struct {
	State FenceState
	// Instance is random per Open (or per Fence call): the owner checks that the owner
	// record is still its own, so a second process opening the same directory makes the
	// first one stop acking.
	Instance uint64
	// Time is the writer's wall clock when it wrote the record (diagnostics only).
	Time time.Time
	// Who names the writer (Config.Owner, or Seal's by), at most MaxFenceName bytes.
	Who string
}

// MarshalBinary encodes r in the FENCE record format (FenceRecordSize bytes).
func (r FenceRecord) MarshalBinary() ([]byte, error) {
	if len(r.Who) > MaxFenceName {
		return nil, fmt.Errorf("wal: fence name of %d bytes, at most %d", len(r.Who), MaxFenceName)
	}
	b := make([]byte, FenceRecordSize)
	copy(b[0:8], fenceMagic[:])
	binary.LittleEndian.PutUint32(b[8:12], FenceFormatVersion)
	binary.LittleEndian.PutUint32(b[12:16], uint32(r.State))
	binary.LittleEndian.PutUint64(b[16:24], r.Instance)
	binary.LittleEndian.PutUint64(b[24:32], uint64(unixNano(r.Time)))
	binary.LittleEndian.PutUint32(b[32:36], uint32(len(r.Who)))
	copy(b[36:36+MaxFenceName], r.Who)
	binary.LittleEndian.PutUint32(b[fenceCRCOff:], crc32c.Checksum(b[:fenceCRCOff]))
	return b, nil
}

// UnmarshalBinary decodes a FENCE record. Errors wrap ErrTorn (too short), ErrCorrupt
// (magic, checksum, impossible field) or ErrVersion (intact, another format version).
func (r *FenceRecord) UnmarshalBinary(b []byte) error {
	if len(b) < FenceRecordSize {
		return fmt.Errorf("%w: FENCE record of %d bytes, want %d", ErrTorn, len(b), FenceRecordSize)
	}
	b = b[:FenceRecordSize]
	if [8]byte(b[0:8]) != fenceMagic {
		return fmt.Errorf("%w: bad FENCE magic %q", ErrCorrupt, b[0:8])
	}
	if got, want := crc32c.Checksum(b[:fenceCRCOff]), binary.LittleEndian.Uint32(b[fenceCRCOff:]); got != want {
		return fmt.Errorf("%w: FENCE record checksum mismatch", ErrCorrupt)
	}
	if v := binary.LittleEndian.Uint32(b[8:12]); v != FenceFormatVersion {
		return fmt.Errorf("%w: FENCE version %d (this build reads %d)", ErrVersion, v, FenceFormatVersion)
	}
	n := binary.LittleEndian.Uint32(b[32:36])
	if n > MaxFenceName {
		return fmt.Errorf("%w: FENCE name length %d", ErrCorrupt, n)
	}
	st := FenceState(binary.LittleEndian.Uint32(b[12:16]))
	if st != FenceOpen && st != FenceFenced {
		return fmt.Errorf("%w: FENCE state %d", ErrCorrupt, uint32(st))
	}
	*r = FenceRecord{
		State:    st,
		Instance: binary.LittleEndian.Uint64(b[16:24]),
		Time:     fromUnixNano(int64(binary.LittleEndian.Uint64(b[24:32]))),
		Who:      string(b[36 : 36+n]),
	}
	return nil
}

// fromUnixNano is the inverse of unixNano, in UTC so that decoded records compare equal
// wherever they are read.
func fromUnixNano(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// FenceInfo is what a FENCE file says.
type FenceInfo struct {
	// Fenced: a taker wrote the fence record. A fence record that cannot be decoded
	// (damage, a torn write, a newer format) also counts as fenced, so that no damage
	// can ever unfence a directory; then By is zero.
	Fenced bool
	By     FenceRecord
	// Owner is the owner record of the last Open with Config.Fence; zero if there is
	// none or it cannot be decoded.
	Owner FenceRecord
}

// parseFence interprets the bytes of a FENCE file (short files read as zeros after
// their end: a taker that created FENCE wrote only the fence record).
func parseFence(b []byte) FenceInfo {
	var fi FenceInfo
	slot := func(off int) []byte {
		s := make([]byte, FenceRecordSize)
		if off < len(b) {
			copy(s, b[off:])
		}
		return s
	}
	if f := slot(fenceSlotOff); !allZero(f) {
		fi.Fenced = true
		var r FenceRecord
		if r.UnmarshalBinary(f) == nil && r.State == FenceFenced {
			fi.By = r
		}
	}
	if o := slot(ownerSlotOff); !allZero(o) {
		var r FenceRecord
		if r.UnmarshalBinary(o) == nil && r.State == FenceOpen {
			fi.Owner = r
		}
	}
	return fi
}

// readFenceFile reads FENCE uncached (ReadUncached): a fresh open, on NFS, revalidates
// the client's cache only if it believes another client changed the file, which its own
// write of the owner record can hide.
func readFenceFile(fs FS, dir string) ([]byte, error) {
	b, err := ReadUncached(fs, filepath.Join(dir, FenceFile), uncachedAlign)
	if err != nil {
		return nil, err
	}
	return b[:min(len(b), fenceFileSize)], nil
}

// readUpTo reads the first n bytes of f, fewer if the file is shorter.
func readUpTo(f File, n int) ([]byte, error) {
	b := make([]byte, n)
	m, err := f.ReadAt(b, 0)
	if err != nil && err != io.EOF {
		return nil, err
	}
	return b[:m], nil
}

// ReadFence reads the FENCE file of dir uncached; fs nil means the OS file
// system. ok is false if there is none.
func ReadFence(fs FS, dir string) (info FenceInfo, ok bool, err error) {
	if fs == nil {
		fs = OSFS()
	}
	b, err := readFenceFile(fs, dir)
	if errors.Is(err, os.ErrNotExist) {
		return FenceInfo{}, false, nil
	}
	if err != nil {
		return FenceInfo{}, false, fmt.Errorf("wal: reading %s: %w", filepath.Join(dir, FenceFile), err)
	}
	return parseFence(b), true, nil
}

// Fence fences the WAL directory dir on behalf of by (at most MaxFenceName bytes):
// it writes the fence record of FENCE in place (creating the file, and dir, if the
// owner never did) and syncs it. From the moment Fence returns, the owner's next fence
// check fails, so it acks nothing whose check starts later, and its Open refuses the
// directory. A directory that is already fenced keeps its first fence record, which is
// rewritten as it is so this call's sync has something to commit. Seal calls Fence
// first; call it alone to stop a writer without reading its log yet.
func Fence(fs FS, dir, by string) error {
	if fs == nil {
		fs = OSFS()
	}
	if len(by) > MaxFenceName {
		return fmt.Errorf("wal: fence name of %d bytes, at most %d", len(by), MaxFenceName)
	}
	if err := fs.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("wal: creating %s: %w", dir, err)
	}
	path := filepath.Join(dir, FenceFile)
	// Never O_TRUNC and never a rename: the owner record after ours must survive, and
	// an NFS client that has FENCE open could keep reading a replaced inode.
	f, err := fs.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return ioError("opening "+path, err)
	}
	old, err := readUpTo(f, FenceRecordSize)
	if err != nil {
		f.Close()
		return ioError("reading "+path, err)
	}
	var rec []byte
	var prev FenceRecord
	if prev.UnmarshalBinary(old) == nil && prev.State == FenceFenced {
		rec = old[:FenceRecordSize] // the first taker's record stays
	} else if rec, err = (FenceRecord{State: FenceFenced, Instance: rand.Uint64(), Time: time.Now().UTC(), Who: by}).MarshalBinary(); err != nil {
		f.Close()
		return err
	}
	if _, err := f.WriteAt(rec, fenceSlotOff); err != nil {
		f.Close()
		return ioError("writing "+path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return ioError("syncing "+path, err)
	}
	if err := f.Close(); err != nil {
		return ioError("closing "+path, err)
	}
	if err := fs.SyncDir(dir); err != nil {
		return ioError("syncing directory "+dir, err)
	}
	return nil
}

// openFence is Open's part with Config.Fence: refuse a fenced directory, else write
// this writer's owner record (only the owner slot: a taker's fence record written
// between our read and our write survives, and our first check sees it), synced.
func openFence(cfg Config, instance uint64) error {
	path := filepath.Join(cfg.Dir, FenceFile)
	f, err := cfg.FS.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return ioError("opening "+path, err)
	}
	b, err := readFenceFile(cfg.FS, cfg.Dir)
	if err != nil {
		f.Close()
		return ioError("reading "+path, err)
	}
	if fi := parseFence(b); fi.Fenced {
		f.Close()
		return fmt.Errorf("%w: %s: %s", ErrFenced, cfg.Dir, fi.describe())
	}
	rec, err := FenceRecord{State: FenceOpen, Instance: instance, Time: time.Now().UTC(), Who: cfg.Owner}.MarshalBinary()
	if err != nil {
		f.Close()
		return err
	}
	if _, err := f.WriteAt(rec, ownerSlotOff); err != nil {
		f.Close()
		return ioError("writing "+path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return ioError("syncing "+path, err)
	}
	if err := f.Close(); err != nil {
		return ioError("closing "+path, err)
	}
	if err := cfg.FS.SyncDir(cfg.Dir); err != nil {
		return ioError("syncing directory "+cfg.Dir, err)
	}
	return nil
}

func (fi FenceInfo) describe() string {
	if fi.By.State != FenceFenced {
		return "fence record set but unreadable (counts as fenced)"
	}
	return fmt.Sprintf("fenced by %q at %s", fi.By.Who, fi.By.Time.Format(time.RFC3339Nano))
}

// checkFence is the committer's check after a group's fdatasync: a fresh open and
// read of FENCE (never a cached descriptor, size or page), which must still hold this
// writer's owner record and no fence record. Any failure to read it counts as fenced.
// The read is uncached (O_DIRECT) unless the directory is on a local file system with
// one page cache for every reader (fenceCached: sharedPageCache), where a cached page
// is never stale and O_DIRECT would add a device read to every group commit (63 µs
// against 6 µs on this project's test machine; BenchmarkFenceCheck).
func (w *WAL) checkFence() error {
	start := time.Now()
	var b []byte
	var err error
	if w.fenceCached {
		b, err = readCached(w.fs, filepath.Join(w.cfg.Dir, FenceFile), fenceFileSize)
	} else {
		b, err = readFenceFile(w.fs, w.cfg.Dir)
	}
	w.m.fenceChecked(time.Since(start).Seconds())
	if err != nil {
		return fmt.Errorf("%w: cannot read %s: %w", ErrFenced, FenceFile, err)
	}
	fi := parseFence(b)
	switch {
	case fi.Fenced:
		return fmt.Errorf("%w: %s", ErrFenced, fi.describe())
	case fi.Owner.State != FenceOpen || fi.Owner.Instance != w.instance:
		return fmt.Errorf("%w: %s no longer holds this writer's owner record (another Open of %s, or damage; owner record now %q %016x)",
			ErrFenced, FenceFile, w.cfg.Dir, fi.Owner.Who, fi.Owner.Instance)
	}
	return nil
}

// checkEpochFence is Open's last check with Config.EpochFence, after the owner record is
// written: refuse if the token fences this epoch (or cannot be read). A refused
// directory is fenced on the way out: Open's MkdirAll may have recreated a directory
// the WAL directory GC removed, and nobody must ever write there.
func checkEpochFence(cfg Config) error {
	if cfg.EpochFence == "" {
		return nil
	}
	ef, err := ReadEpochFence(cfg.FS, cfg.EpochFence)
	if err != nil {
		return fmt.Errorf("%w: epoch fence token unreadable: %w", ErrFenced, err)
	}
	if !ef.Fenced(cfg.Epoch) {
		return nil
	}
	ferr := Fence(cfg.FS, cfg.Dir, "epoch fence token")
	return errors.Join(fmt.Errorf("%w: %s: epoch %d is fenced by %s (fenced up to epoch %d)", ErrFenced, cfg.Dir, cfg.Epoch, cfg.EpochFence, ef.Max), ferr)
}
