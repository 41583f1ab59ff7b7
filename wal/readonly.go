package wal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
)

// ReadOnly reads another broker's WAL directory on the shared file system: a new
// partition leader scans the previous leader's records of that partition and serves their
// bytes from there, so nothing is copied. It never writes, truncates or removes anything,
// so it is safe while the owner is still appending: a scan stops at the first record of
// the last segment that is incomplete or corrupt, which for a live owner is its unsynced
// tail. Callers must only rely on records they know were synced (e.g. below an offset the
// owner handed off at), or on a sealed directory (Seal), where every read stops at the
// seal's End.
//
// Scan opens every segment afresh each time, so it sees what the owner synced before it
// started even on NFS, where a descriptor opened earlier may keep returning the size and
// pages its client cached. ReadAt keeps descriptors open to stay cheap: the bytes it
// returns are only trusted below a bound the caller got from a Scan of this ReadOnly (whose
// fresh opens revalidated the client's cache of those files) or from the seal, never from
// elsewhere (such as a position the owner sent) without a Scan after it.
type ReadOnly struct {
	dir string
	fs  FS

	mu   sync.RWMutex
	segs []*roSegment // by base, for ReadAt
	seal *SealInfo    // set once the directory is known to be sealed
}

type roSegment struct {
	base Pos
	path string
	f    File
}

// OpenReadOnly opens dir for reading; fs nil means the OS file system. If dir is sealed,
// every Scan and ReadAt stops at the seal's End.
func OpenReadOnly(dir string, fs FS) (*ReadOnly, error) {
	if fs == nil {
		fs = OSFS()
	}
	r := &ReadOnly{dir: dir, fs: fs}
	if _, err := r.sealed(); err != nil {
		return nil, err
	}
	if err := r.refresh(); err != nil {
		return nil, err
	}
	return r, nil
}

// Sealed returns the seal of the directory if this reader has seen one (OpenReadOnly
// and every Scan look for it).
func (r *ReadOnly) Sealed() (SealInfo, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.seal == nil {
		return SealInfo{}, false
	}
	return *r.seal, true
}

// sealed returns the directory's seal, reading SEAL with a fresh open until there is
// one. When it first appears, the descriptors opened before are replaced: their client
// may cache pages from before the seal's records were written.
func (r *ReadOnly) sealed() (*SealInfo, error) {
	r.mu.RLock()
	s := r.seal
	r.mu.RUnlock()
	if s != nil {
		return s, nil
	}
	info, ok, err := ReadSeal(r.fs, r.dir)
	if err != nil || !ok {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seal == nil {
		r.seal = &info
		for _, s := range r.segs {
			_ = s.f.Close() // a ReadAt racing with this fails once and retries
		}
		r.segs = nil
	}
	return r.seal, nil
}

// refresh opens the segments created since the last look, for ReadAt.
func (r *ReadOnly) refresh() error {
	bases, err := listSegments(r.fs, r.dir)
	if err != nil {
		return err
	}
	r.mu.RLock()
	seal := r.seal
	r.mu.RUnlock()
	if seal != nil && seal.Segments > 0 && !slices.Contains(bases, seal.LastSegment) {
		// A stale listing (NFS) may not show it; a lookup by name is fresh.
		bases = append(bases, seal.LastSegment)
	}
	return r.open(bases)
}

// open opens the segments of bases this reader has not opened yet (a base that does not
// exist is skipped: trimmed meanwhile). Scan passes the segments it found by name: a
// stale listing may miss the newest ones, and ReadAt must never serve a position of a
// segment it does not know from the one before, whose file may hold other bytes there
// (zeros of preallocation, or the late bytes of a failed write).
func (r *ReadOnly) open(bases []Pos) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	have := make(map[Pos]bool, len(r.segs))
	for _, s := range r.segs {
		have[s.base] = true
	}
	for _, base := range bases {
		if have[base] || r.seal != nil && base > r.seal.LastSegment {
			continue
		}
		path := filepath.Join(r.dir, segmentName(base))
		f, err := r.fs.OpenFile(path, os.O_RDONLY, 0)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // trimmed meanwhile
			}
			return fmt.Errorf("wal: opening %s: %w", path, err)
		}
		r.segs = append(r.segs, &roSegment{base: base, path: path, f: f})
	}
	sort.Slice(r.segs, func(i, j int) bool { return r.segs[i].base < r.segs[j].base })
	return nil
}

// Scan calls fn for each valid record in log order and returns the position just past
// the last one. The payload is only valid during the call. An error from fn stops the
// scan and is returned, and so does a segment of a format version this build does not
// read (ErrVersion) and a bad record in a segment followed by another (ErrCorrupt,
// naming the file and offset: not a torn tail but damage to synced data). In a sealed
// directory Scan returns exactly the records below the seal's End, and anything short
// of End is ErrCorrupt.
//
// Each Scan opens the segment files afresh (see ReadOnly), so scanning again after the
// owner synced more records returns them.
func (r *ReadOnly) Scan(fn func(typ byte, payload []byte, pos Pos) error) (Pos, error) {
	seal, err := r.sealed()
	if err != nil {
		return 0, err
	}
	if err := r.refresh(); err != nil {
		return 0, err
	}
	res, err := scanDir(r.fs, r.dir, nil, seal, fn)
	if err == nil {
		err = r.open(res.segs)
	}
	return res.end, err
}

// ReadAt reads len(p) payload bytes at pos (in a sealed directory, below the seal's End).
// A miss rescans the directory once and reopens the segment, since the owner may have
// rolled to segments this reader has not opened yet, or written past the size its
// descriptor saw. See ReadOnly for which bytes to trust.
func (r *ReadOnly) ReadAt(p []byte, pos Pos) error {
	err := r.readAt(p, pos)
	if err == nil || errors.Is(err, ErrOutOfRange) && r.beyondSeal(p, pos) {
		return err
	}
	if _, err := r.sealed(); err != nil {
		return err
	}
	if err := r.refresh(); err != nil {
		return err
	}
	if err := r.reopen(pos); err != nil {
		return err
	}
	return r.readAt(p, pos)
}

// Revalidate drops what this reader cached of the segment holding pos (and learns of new
// segments and a seal): the next ReadAt there reads through a fresh open. A caller that
// can check what it read (a batch CRC a link recorded) uses it to trust bytes at a
// position the owner sent without scanning first.
func (r *ReadOnly) Revalidate(pos Pos) error {
	if _, err := r.sealed(); err != nil {
		return err
	}
	if err := r.refresh(); err != nil {
		return err
	}
	return r.reopen(pos)
}

// beyondSeal reports whether [pos, pos+len(p)) reaches past the seal (no retry helps).
func (r *ReadOnly) beyondSeal(p []byte, pos Pos) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.seal != nil && (pos+Pos(len(p)) > r.seal.End || pos < 0)
}

func (r *ReadOnly) readAt(p []byte, pos Pos) error {
	r.mu.RLock()
	seal := r.seal
	r.mu.RUnlock()
	if seal != nil && pos+Pos(len(p)) > seal.End {
		return fmt.Errorf("%w: [%d, %d) reaches past the end %d at which %s is sealed",
			ErrOutOfRange, pos, int64(pos)+int64(len(p)), seal.End, r.dir)
	}
	s := r.find(pos)
	if s == nil {
		return fmt.Errorf("%w: %d is not in %s", ErrOutOfRange, pos, r.dir)
	}
	off := int64(pos - s.base)
	if off < HeaderSize {
		return fmt.Errorf("%w: %d is inside a segment header", ErrOutOfRange, pos)
	}
	if n, err := s.f.ReadAt(p, off); n != len(p) {
		return fmt.Errorf("wal: reading %s at %d: %w", s.path, off, err)
	}
	return nil
}

// reopen replaces the descriptor of the segment holding pos with a fresh one.
func (r *ReadOnly) reopen(pos Pos) error {
	s := r.find(pos)
	if s == nil {
		return nil
	}
	f, err := r.fs.OpenFile(s.path, os.O_RDONLY, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil // trimmed: the retry reports it
		}
		return fmt.Errorf("wal: opening %s: %w", s.path, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, t := range r.segs {
		if t == s {
			r.segs[i] = &roSegment{base: s.base, path: s.path, f: f}
			_ = s.f.Close() // a ReadAt racing with this fails once and retries
			return nil
		}
	}
	f.Close() // replaced meanwhile
	return nil
}

func (r *ReadOnly) find(pos Pos) *roSegment {
	r.mu.RLock()
	defer r.mu.RUnlock()
	i := sort.Search(len(r.segs), func(i int) bool { return r.segs[i].base > pos }) - 1
	if i < 0 {
		return nil
	}
	return r.segs[i]
}

// Close closes the open segment files.
func (r *ReadOnly) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var first error
	for _, s := range r.segs {
		if err := s.f.Close(); err != nil && first == nil {
			first = err
		}
	}
	r.segs = nil
	return first
}
