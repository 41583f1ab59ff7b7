package wal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
)

// ReadOnly reads another broker's WAL directory on the shared file system: a new
// partition leader scans the previous leader's records of that partition and serves their
// bytes from there, so nothing is copied. It never writes, truncates or removes anything,
// so it is safe while the owner is still appending: a scan stops at the first record that
// is incomplete or corrupt, which for a live owner is its unsynced tail. Callers must only
// rely on records they know were synced (e.g. below an offset the owner handed off at).
type ReadOnly struct {
	dir string
	fs  FS

	mu   sync.RWMutex
	segs []*roSegment // by base
}

type roSegment struct {
	base Pos
	path string
	f    File
}

// OpenReadOnly opens dir for reading; fs nil means the OS file system.
func OpenReadOnly(dir string, fs FS) (*ReadOnly, error) {
	if fs == nil {
		fs = OSFS()
	}
	r := &ReadOnly{dir: dir, fs: fs}
	if err := r.refresh(); err != nil {
		return nil, err
	}
	return r, nil
}

// refresh picks up segments created since the last look.
func (r *ReadOnly) refresh() error {
	ents, err := r.fs.ReadDir(r.dir)
	if err != nil {
		return fmt.Errorf("wal: reading directory %s: %w", r.dir, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	have := make(map[Pos]bool, len(r.segs))
	for _, s := range r.segs {
		have[s.base] = true
	}
	for _, e := range ents {
		base, ok := parseSegmentName(e.Name())
		if !ok || have[base] {
			continue
		}
		path := filepath.Join(r.dir, e.Name())
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
// read (ErrVersion).
func (r *ReadOnly) Scan(fn func(typ byte, payload []byte, pos Pos) error) (Pos, error) {
	if err := r.refresh(); err != nil {
		return 0, err
	}
	r.mu.RLock()
	segs := append([]*roSegment(nil), r.segs...)
	r.mu.RUnlock()
	hdr := make([]byte, HeaderSize)
	var end Pos
	for i, s := range segs {
		st, err := s.f.Stat()
		if err != nil {
			return end, fmt.Errorf("wal: stat %s: %w", s.path, err)
		}
		limit := st.Size()
		if i < len(segs)-1 {
			// Records of a segment end where the next one starts; anything after that
			// is the remains of a failed write.
			limit = min(limit, int64(segs[i+1].base-s.base))
		}
		n, err := s.f.ReadAt(hdr, 0)
		if err != nil && err != io.EOF {
			return end, fmt.Errorf("wal: reading %s: %w", s.path, err)
		}
		base, err := decodeSegmentHeader(hdr[:n])
		if errors.Is(err, ErrVersion) {
			// Not damage: stopping quietly would hide the newer build's records.
			return end, fmt.Errorf("wal: scan %s: %w", s.path, err)
		}
		if err != nil || base != s.base || limit < HeaderSize {
			return end, nil // a segment still being installed, or damaged: stop here
		}
		rd := NewReader(io.NewSectionReader(s.f, HeaderSize, limit-HeaderSize), limit-HeaderSize)
		for {
			off := HeaderSize + rd.Offset()
			typ, payload, err := rd.Next()
			if err == io.EOF || errors.Is(err, ErrTorn) || errors.Is(err, ErrCorrupt) {
				end = s.base + Pos(off)
				break
			}
			if err != nil {
				return end, fmt.Errorf("wal: reading %s at %d: %w", s.path, off, err)
			}
			pos := s.base + Pos(off+RecordHeaderSize)
			if err := fn(typ, payload, pos); err != nil {
				return end, err
			}
			end = pos + Pos(len(payload))
		}
	}
	return end, nil
}

// ReadAt reads len(p) payload bytes at pos. A miss rescans the directory once, since the
// owner may have rolled to segments this reader has not opened yet.
func (r *ReadOnly) ReadAt(p []byte, pos Pos) error {
	err := r.readAt(p, pos)
	if err == nil {
		return nil
	}
	if rerr := r.refresh(); rerr != nil {
		return rerr
	}
	return r.readAt(p, pos)
}

func (r *ReadOnly) readAt(p []byte, pos Pos) error {
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
