package wal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// ReplayInfo describes what Replay found.
type ReplayInfo struct {
	// Records is the number of valid records passed to fn.
	Records int
	// End is the position just past the last valid record; appends continue
	// in a new segment starting there.
	End Pos
	// Torn is set if replay stopped at a torn or corrupt record or segment
	// header before the end of the last segment, and cut the log there.
	Torn bool
	// Corruption is set if that cut was in a segment followed by others, which only
	// happens with Config.AcceptCorruption: synced records after it were deleted.
	Corruption bool
	// TornAt is the position of the first byte of the bad record (or the base
	// of the segment with the bad header); the log was cut there.
	TornAt Pos
	// TornSegment is the path of the segment file holding the bad record.
	TornSegment string
	// Reason says what was wrong; Err is the same as an error wrapping ErrTorn
	// or ErrCorrupt.
	Reason string
	Err    error
	// DroppedSegments are the paths of the segment files after the cut, which
	// Replay removed.
	DroppedSegments []string
}

// scanned is a segment file read by Replay.
type scanned struct {
	base Pos
	path string
	f    File // nil if never opened
	size int64
	end  int64 // offset just past the last valid record
}

// Replay reads all segments in order and calls fn for each valid record; the
// payload is only valid during the call. A torn or corrupt record (or segment
// header) in the last segment is a torn tail: Replay stops there, reports it in
// ReplayInfo and cuts the log there (the rest of that segment is truncated).
// Appends then continue in a new segment. A bad record in an earlier segment is
// corruption of synced data: Replay returns an error wrapping ErrCorrupt naming
// the segment file and offset and leaves the log untouched, unless
// Config.AcceptCorruption is set, which cuts there as for a torn tail and removes
// the later segments. With Config.Fence, Replay first checks the fence token and
// returns ErrFenced, touching nothing, if the directory was fenced.
//
// Replay must succeed once before records can be appended; fn may be nil. An
// error from fn stops Replay and is returned (wrapped) with the log untouched.
// I/O errors are returned as they are, and a segment of a format version this
// build does not read as an error wrapping ErrVersion; neither is treated as a
// torn log. After a failed Replay the WAL should be closed.
func (w *WAL) Replay(fn func(typ byte, payload []byte, pos Pos) error) (ReplayInfo, error) {
	w.replayMu.Lock()
	defer w.replayMu.Unlock()
	if w.replayClosed {
		return ReplayInfo{}, ErrClosed
	}
	if w.replayed {
		return ReplayInfo{}, errors.New("wal: Replay called twice")
	}
	if w.cfg.Fence {
		// Replay truncates and removes files: a fenced writer must leave a directory
		// that a taker may be reading alone.
		if err := w.checkFence(); err != nil {
			return ReplayInfo{}, err
		}
	}
	var info ReplayInfo
	segs := make([]*scanned, len(w.found))
	for i, base := range w.found {
		segs[i] = &scanned{base: base, path: filepath.Join(w.cfg.Dir, segmentName(base))}
	}
	closeAll := func() {
		for _, s := range segs {
			if s.f != nil {
				_ = s.f.Close()
				s.f = nil
			}
		}
	}
	keep, err := w.scan(segs, fn, &info)
	if err == nil {
		err = w.cut(segs, keep, &info)
	}
	if err != nil {
		closeAll()
		return info, err
	}
	return info, nil
}

// scan reads the segments and returns how many of them to keep.
func (w *WAL) scan(segs []*scanned, fn func(byte, []byte, Pos) error, info *ReplayInfo) (int, error) {
	hdr := make([]byte, HeaderSize)
	for i, s := range segs {
		f, err := w.fs.OpenFile(s.path, os.O_RDWR, 0)
		if err != nil {
			return 0, fmt.Errorf("wal: opening %s: %w", s.path, err)
		}
		s.f = f
		st, err := f.Stat()
		if err != nil {
			return 0, fmt.Errorf("wal: stat %s: %w", s.path, err)
		}
		s.size = st.Size()
		last := i == len(segs)-1
		limit := s.size // records may extend up to here
		if !last {
			limit = int64(segs[i+1].base - s.base)
		}

		n, err := f.ReadAt(hdr, 0)
		if err != nil && err != io.EOF {
			return 0, fmt.Errorf("wal: reading %s: %w", s.path, err)
		}
		base, herr := decodeSegmentHeader(hdr[:n])
		switch {
		case errors.Is(herr, ErrVersion):
			return 0, fmt.Errorf("wal: replay %s: %w", s.path, herr)
		case herr != nil:
		case base != s.base:
			herr = fmt.Errorf("%w: segment header says base %d, file name says %d", ErrCorrupt, base, s.base)
		case limit < HeaderSize:
			herr = fmt.Errorf("%w: next segment starts %d bytes after this one", ErrCorrupt, limit)
		}
		if herr != nil {
			return w.damaged(info, s, last, s.base, i, herr)
		}

		r := NewReader(io.NewSectionReader(f, HeaderSize, limit-HeaderSize), limit-HeaderSize)
		for {
			off := HeaderSize + r.Offset()
			typ, payload, err := r.Next()
			if err == io.EOF {
				s.end = off
				if last || off == limit {
					break
				}
				why := "zeros"
				if off >= s.size {
					why = "the end of the file"
				}
				return w.damaged(info, s, false, s.base+Pos(off), i+1, fmt.Errorf(
					"records end (%s) at offset %d but the next segment starts at offset %d", why, off, limit))
			}
			if errors.Is(err, ErrTorn) || errors.Is(err, ErrCorrupt) {
				s.end = off
				return w.damaged(info, s, last, s.base+Pos(off), i+1, err)
			}
			if err != nil {
				return 0, fmt.Errorf("wal: reading %s at %d: %w", s.path, off, err)
			}
			info.Records++
			if fn != nil {
				pos := s.base + Pos(off+RecordHeaderSize)
				if err := fn(typ, payload, pos); err != nil {
					return 0, fmt.Errorf("wal: replay callback at %d: %w", pos, err)
				}
			}
		}
	}
	return len(segs), nil
}

// damaged handles a bad record or segment header at position at of segment s;
// keep is how many segments to keep if the log is cut there. In the last segment
// it is a torn tail (a write cut short by a crash, never acked): cut. In an earlier
// segment it cannot be: a segment is created only after every record before it was
// synced, so the bad bytes are damage to synced (maybe acked) data, and cutting
// would delete the later segments' records too. Replay refuses then, leaving the
// log as it is, unless Config.AcceptCorruption says to cut anyway.
func (w *WAL) damaged(info *ReplayInfo, s *scanned, last bool, at Pos, keep int, cause error) (int, error) {
	if last {
		w.torn(info, s, at, cause)
		return keep, nil
	}
	err := corruptionError(s.path, int64(at-s.base), at, cause)
	if !w.cfg.AcceptCorruption {
		return 0, fmt.Errorf("%w; replay refused and the log left untouched (Config.AcceptCorruption would cut it there, deleting every later record)", err)
	}
	info.Corruption = true
	w.torn(info, s, at, err)
	return keep, nil
}

// corruptionError describes a bad record (or header, or early end) in a segment that
// is followed by another, which is never a torn tail.
func corruptionError(path string, off int64, at Pos, cause error) error {
	return fmt.Errorf("%w in %s at offset %d (position %d), before the next segment starts: %v",
		ErrCorrupt, path, off, at, cause)
}

func (w *WAL) torn(info *ReplayInfo, s *scanned, at Pos, err error) {
	info.Torn, info.TornAt, info.TornSegment, info.Reason, info.Err = true, at, s.path, err.Error(), err
	if info.Corruption {
		w.cfg.Logger.Error("wal: corrupt record before the last segment; Config.AcceptCorruption is set, so the log is cut there and synced records after it are deleted",
			"segment", s.path, "offset", int64(at-s.base), "pos", int64(at), "reason", err.Error())
		return
	}
	w.cfg.Logger.Warn("wal: replay stopped at a torn record in the last segment; cutting the log there",
		"segment", s.path, "offset", int64(at-s.base), "pos", int64(at), "reason", err.Error())
}

// cut applies the outcome of scan: it removes the segments after the kept
// ones, truncates the last kept segment after its last record and starts a new
// active segment there. Then the WAL is ready for appends.
func (w *WAL) cut(segs []*scanned, keep int, info *ReplayInfo) error {
	for _, s := range segs[keep:] {
		if s.f != nil {
			_ = s.f.Close()
			s.f = nil
		}
		if err := w.fs.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("wal: removing %s: %w", s.path, err)
		}
		info.DroppedSegments = append(info.DroppedSegments, s.path)
	}
	if len(info.DroppedSegments) > 0 {
		if info.Corruption {
			w.cfg.Logger.Error("wal: removed segments after the cut (AcceptCorruption)", "segments", info.DroppedSegments)
		} else {
			w.cfg.Logger.Warn("wal: removed segments after the cut", "segments", info.DroppedSegments)
		}
		if err := w.fs.SyncDir(w.cfg.Dir); err != nil {
			return fmt.Errorf("wal: syncing directory %s: %w", w.cfg.Dir, err)
		}
	}
	kept := segs[:keep]
	w.found = w.found[:keep]

	var base Pos
	if len(segs) > 0 {
		base = segs[0].base
	}
	if keep > 0 {
		last := kept[keep-1]
		base = last.base + Pos(last.end)
		if last.size > last.end {
			// Drop preallocated space and anything after the last record, so
			// the file ends with its records.
			if err := last.f.Truncate(last.end); err != nil {
				return fmt.Errorf("wal: truncating %s: %w", last.path, err)
			}
			if err := last.f.Sync(); err != nil {
				return fmt.Errorf("wal: syncing %s: %w", last.path, err)
			}
			last.size = last.end
		}
		if last.end == HeaderSize {
			// No records: the new segment replaces it (same base, renamed over it).
			base = last.base
			_ = last.f.Close()
			last.f = nil
			kept = kept[:keep-1]
		}
	}
	info.End = base

	active, err := w.newSegment(base, w.cfg.SegmentSize)
	if err != nil {
		return err
	}
	live := make([]*segment, 0, len(kept)+1)
	for _, s := range kept {
		seg := &segment{base: s.base, path: s.path, f: s.f}
		seg.end.Store(s.end)
		live = append(live, seg)
	}
	live = append(live, active)

	w.segMu.Lock()
	w.segs = live
	w.segMu.Unlock()
	w.m.setSegments(len(live))
	w.active, w.capacity, w.writeOff, w.mustRoll = active, w.cfg.SegmentSize, HeaderSize, false
	w.end.Store(int64(base))
	w.found = nil
	w.replayed = true
	w.qmu.Lock()
	w.ready = true
	w.qmu.Unlock()
	return nil
}
