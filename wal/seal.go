package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/weir-io/weir/internal/crc32c"
)

const (
	// SealFile is the name of the seal in a WAL directory.
	SealFile = "SEAL"
	// SealFormatVersion is written into every SEAL.
	SealFormatVersion = 1
	// SealSize is the size of a SEAL file.
	SealSize = 128

	sealCRCOff = SealSize - 4
	// sealTmpSuffix names a SEAL being written. It is not tmpSuffix, which Open removes
	// as a leftover: a writer opening the directory must not delete a taker's file.
	sealTmpSuffix = ".part"
	// sealAttempts bounds how often Seal rescans when records it saw are gone after
	// committing them (an NFS server that lost unstable writes).
	sealAttempts = 3
)

var sealMagic = [8]byte{'W', 'E', 'I', 'R', 'S', 'E', 'A', 'L'}

// SealInfo records where a sealed WAL directory ends. Every reader of a sealed
// directory (OpenReadOnly) stops at End, whatever a late, fenced writer appends.
type SealInfo struct {
	// End is the position just past the last record of the directory when it was
	// sealed (past the header of its last segment if that one had no records).
	End Pos
	// LastSegment is the base of the segment holding End; segments after it are never
	// read. Segments is the number of segments the sealer read (0: the directory had
	// none, and End is 0).
	LastSegment Pos
	Segments    int
	// Start is the base of the first segment when the directory was sealed and Records
	// the number of records from Start to End (diagnostics).
	Start   Pos
	Records int64
	// By names the taker that sealed (Seal's by) and Time is its wall clock then, in UTC
	// and to the nanosecond, so a SealInfo compares equal to the one read back.
	By   string
	Time time.Time
}

// MarshalBinary encodes s in the SEAL format (SealSize bytes).
func (s SealInfo) MarshalBinary() ([]byte, error) {
	if len(s.By) > MaxFenceName {
		return nil, fmt.Errorf("wal: seal name of %d bytes, at most %d", len(s.By), MaxFenceName)
	}
	if s.Segments < 0 || s.Segments > 1<<31 {
		return nil, fmt.Errorf("wal: seal of %d segments", s.Segments)
	}
	b := make([]byte, SealSize)
	copy(b[0:8], sealMagic[:])
	binary.LittleEndian.PutUint32(b[8:12], SealFormatVersion)
	binary.LittleEndian.PutUint32(b[12:16], uint32(s.Segments))
	binary.LittleEndian.PutUint64(b[16:24], uint64(s.End))
	binary.LittleEndian.PutUint64(b[24:32], uint64(s.LastSegment))
	binary.LittleEndian.PutUint64(b[32:40], uint64(s.Start))
	binary.LittleEndian.PutUint64(b[40:48], uint64(s.Records))
	binary.LittleEndian.PutUint64(b[48:56], uint64(unixNano(s.Time)))
	binary.LittleEndian.PutUint32(b[56:60], uint32(len(s.By)))
	copy(b[60:60+MaxFenceName], s.By)
	binary.LittleEndian.PutUint32(b[sealCRCOff:], crc32c.Checksum(b[:sealCRCOff]))
	return b, nil
}

// UnmarshalBinary decodes a SEAL. Errors wrap ErrTorn (too short), ErrCorrupt (magic,
// checksum, impossible field) or ErrVersion (intact, another format version).
func (s *SealInfo) UnmarshalBinary(b []byte) error {
	if len(b) < SealSize {
		return fmt.Errorf("%w: SEAL of %d bytes, want %d", ErrTorn, len(b), SealSize)
	}
	b = b[:SealSize]
	if [8]byte(b[0:8]) != sealMagic {
		return fmt.Errorf("%w: bad SEAL magic %q", ErrCorrupt, b[0:8])
	}
	if got, want := crc32c.Checksum(b[:sealCRCOff]), binary.LittleEndian.Uint32(b[sealCRCOff:]); got != want {
		return fmt.Errorf("%w: SEAL checksum mismatch", ErrCorrupt)
	}
	if v := binary.LittleEndian.Uint32(b[8:12]); v != SealFormatVersion {
		return fmt.Errorf("%w: SEAL version %d (this build reads %d)", ErrVersion, v, SealFormatVersion)
	}
	n := binary.LittleEndian.Uint32(b[56:60])
	info := SealInfo{
		Segments:    int(binary.LittleEndian.Uint32(b[12:16])),
		End:         Pos(binary.LittleEndian.Uint64(b[16:24])),
		LastSegment: Pos(binary.LittleEndian.Uint64(b[24:32])),
		Start:       Pos(binary.LittleEndian.Uint64(b[32:40])),
		Records:     int64(binary.LittleEndian.Uint64(b[40:48])),
		Time:        fromUnixNano(int64(binary.LittleEndian.Uint64(b[48:56]))),
	}
	switch {
	case n > MaxFenceName:
		return fmt.Errorf("%w: SEAL name length %d", ErrCorrupt, n)
	case info.End < 0 || info.LastSegment < 0 || info.Start < 0 || info.Records < 0 || info.Segments < 0:
		return fmt.Errorf("%w: SEAL with a negative field", ErrCorrupt)
	case info.Segments > 0 && (info.End < info.LastSegment+HeaderSize || info.Start > info.LastSegment):
		return fmt.Errorf("%w: SEAL end %d, last segment %d, start %d", ErrCorrupt, info.End, info.LastSegment, info.Start)
	}
	info.By = string(b[60 : 60+n])
	*s = info
	return nil
}

// ReadSeal reads the SEAL of dir uncached (ReadUncached); fs nil means the OS file
// system. ok is false if dir is not sealed.
func ReadSeal(fsys FS, dir string) (info SealInfo, ok bool, err error) {
	if fsys == nil {
		fsys = OSFS()
	}
	path := filepath.Join(dir, SealFile)
	b, err := ReadUncached(fsys, path, uncachedAlign)
	if errors.Is(err, os.ErrNotExist) {
		return SealInfo{}, false, nil
	}
	if err != nil {
		return SealInfo{}, false, fmt.Errorf("wal: reading %s: %w", path, err)
	}
	if err := info.UnmarshalBinary(b); err != nil {
		return SealInfo{}, false, fmt.Errorf("wal: %s: %w", path, err)
	}
	return info, true, nil
}

// Seal is the taker's side of a failover: it makes sure the writer of the WAL
// directory dir can ack nothing more and records where the directory ends, so that
// every reader stops there. by names the taker (at most MaxFenceName bytes); fs nil
// means the OS file system.
//
//  1. Fence: write FENCE's fence record, synced (creating FENCE for a directory whose
//     writer never wrote one). From here on the writer acks nothing whose fence check
//     starts later.
//  2. If dir is already sealed, return that seal: the first seal wins.
//  3. Read the directory to its end with fresh opens (no cached size or page), checking
//     every record; a bad record before the last segment is an error (ErrCorrupt), in
//     the last one it is the torn or unsynced tail and ends the log.
//  4. Commit every segment read, then read the last one again up to the end found: on
//     NFS a record the writer wrote but never committed may be served by the server
//     and then vanish if it restarts, so nothing is sealed (and then served) below the
//     end until it is on stable storage. If records vanished, start again at 3.
//  5. Write SEAL: a temporary file, synced, hard-linked to SEAL (exclusive: if another
//     taker hard-linked first, return its seal), the temporary file removed, the directory
//     synced.
//
// Seal is idempotent and safe to run from several takers at once: all get the same
// SealInfo. It never changes a record.
func Seal(fsys FS, dir, by string) (SealInfo, error) {
	if fsys == nil {
		fsys = OSFS()
	}
	if err := Fence(fsys, dir, by); err != nil {
		return SealInfo{}, err
	}
	if info, ok, err := ReadSeal(fsys, dir); err != nil || ok {
		return info, err
	}
	var res dirScan
	for attempt := 1; ; attempt++ {
		var err error
		if res, err = scanDir(fsys, dir, nil, nil, nil); err != nil {
			return SealInfo{}, fmt.Errorf("wal: sealing %s: %w", dir, err)
		}
		if err := commitSegments(fsys, dir, res.segs); err != nil {
			return SealInfo{}, fmt.Errorf("wal: sealing %s: %w", dir, err)
		}
		if !res.hasLast {
			break
		}
		// Everything the scan read from the last segment was on the server before the
		// commit, so it is stable now unless the server lost it meanwhile: check.
		bound := &SealInfo{End: res.end, LastSegment: res.last, Segments: 1}
		_, err = scanDir(fsys, dir, []Pos{res.last}, bound, nil)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrCorrupt) || attempt == sealAttempts {
			return SealInfo{}, fmt.Errorf("wal: sealing %s: records read before committing them are gone: %w", dir, err)
		}
	}
	info := SealInfo{End: res.end, Segments: len(res.segs), Records: res.records, By: by, Time: time.Now().UTC()}
	if res.hasLast {
		info.LastSegment = res.last
		info.Start = res.segs[0]
	} else {
		info.Segments = 0 // no segment with a valid header: nothing to read
	}
	return publishSeal(fsys, dir, info)
}

// commitSegments makes every byte of the given segments stable on the server. A sync
// of a file this client never wrote may send nothing to an NFS server (a Linux client
// sends COMMIT only for its own unstable writes, and then for the whole file), so the
// segment header is rewritten as it is first: the client then has a write to commit,
// and its COMMIT covers the whole file, including the old writer's unstable writes.
// The header never changes after a segment is named, so rewriting it races with
// nothing; a segment whose header cannot be decoded is only synced.
func commitSegments(fsys FS, dir string, bases []Pos) error {
	hdr := make([]byte, HeaderSize)
	for _, base := range bases {
		path := filepath.Join(dir, segmentName(base))
		f, err := fsys.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return ioError("opening "+path+" to commit it", err)
		}
		n, _ := f.ReadAt(hdr, 0)
		if b, err := decodeSegmentHeader(hdr[:n]); err == nil && b == base {
			if _, err := f.WriteAt(hdr, 0); err != nil {
				f.Close()
				return ioError("rewriting the header of "+path, err)
			}
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return ioError("committing "+path, err)
		}
		if err := f.Close(); err != nil {
			return ioError("closing "+path, err)
		}
	}
	return nil
}

// publishSeal creates SEAL holding info, exclusively: write and sync a temporary file,
// then hard-link it to SEAL. A hard link fails if SEAL exists, on NFS too (a rename would
// replace it), so of two takers exactly one seal is ever published; the loser returns
// the winner's. After a lost reply the NFS client may retry a LINK (hard link) that succeeded and
// report that SEAL exists: reading SEAL then returns our own seal, which is right too.
func publishSeal(fsys FS, dir string, info SealInfo) (SealInfo, error) {
	b, err := info.MarshalBinary()
	if err != nil {
		return SealInfo{}, err
	}
	path := filepath.Join(dir, SealFile)
	tmp := filepath.Join(dir, fmt.Sprintf("%s.%016x%s", SealFile, rand.Uint64(), sealTmpSuffix))
	f, err := fsys.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return SealInfo{}, ioError("creating "+tmp, err)
	}
	_, err = f.WriteAt(b, 0)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = fsys.Remove(tmp)
		return SealInfo{}, ioError("writing "+tmp, err)
	}
	lerr := fsys.HardLink(tmp, path)
	// Ignored: SEAL (ours or theirs) holds the data; a leftover name is harmless.
	_ = fsys.Remove(tmp)
	if errors.Is(lerr, fs.ErrExist) {
		theirs, ok, err := ReadSeal(fsys, dir)
		if err != nil {
			return SealInfo{}, err
		}
		if !ok {
			return SealInfo{}, fmt.Errorf("%w: %s existed when hard-linking, then not", ErrIO, path)
		}
		return theirs, nil
	}
	if lerr != nil {
		return SealInfo{}, ioError("hard-linking "+path, lerr)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return SealInfo{}, ioError("syncing directory "+dir, err)
	}
	return info, nil
}
