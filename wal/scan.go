package wal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// dirScan is what scanDir found.
type dirScan struct {
	end     Pos   // just past the last valid record (a segment without records: just past its header)
	segs    []Pos // bases of the segments opened, in order
	last    Pos   // base of the last segment whose header was valid
	hasLast bool
	records int64
}

// scanDir reads the segments of dir in log order with fresh opens, calling fn (if not
// nil) for each valid record, and never trusts a descriptor, size or page cached
// before: on NFS each open revalidates the client's cache (close-to-open), so the scan
// sees everything the owner synced before it started.
//
// bases lists the segments to read; nil lists the directory. A listing may be stale
// on NFS, where a lookup by name is not, and a segment always starts exactly where the
// records of the one before end: so where records end before the next listed segment,
// and after the last one, the scan opens the segment named after that position and, if
// there is one, reads it next.
//
// Within a segment followed by another, records must run exactly to the next one's
// base; anything else is corruption (ErrCorrupt, naming the file and offset), never an
// end. Only in the last segment is a bad record a torn tail (for a live owner, its
// unsynced tail), which ends the scan.
//
// With seal non-nil the scan reads only what the seal covers: segments up to
// seal.LastSegment, and that one up to seal.End, which it must reach exactly (anything
// short is corruption: those records were there when the directory was sealed).
// Whatever a late, fenced writer appended after End or in later segments is never read.
func scanDir(fs FS, dir string, bases []Pos, seal *SealInfo, fn func(typ byte, payload []byte, pos Pos) error) (dirScan, error) {
	var res dirScan
	if seal != nil && seal.Segments == 0 {
		res.end = seal.End
		return res, nil
	}
	if bases == nil {
		var err error
		if bases, err = listSegments(fs, dir); err != nil {
			return res, err
		}
	}
	if seal != nil {
		bases = slices.DeleteFunc(bases, func(b Pos) bool { return b > seal.LastSegment })
		if len(bases) == 0 || bases[len(bases)-1] != seal.LastSegment {
			bases = append(bases, seal.LastSegment) // the listing predates it
		}
	}
	hdr := make([]byte, HeaderSize)
	for i := 0; i < len(bases); i++ {
		base := bases[i]
		path := filepath.Join(dir, segmentName(base))
		// need is where this segment's records must end: the next segment's base, or
		// in a sealed directory the seal's end. -1: the last segment, which may be torn.
		need := int64(-1)
		if i+1 < len(bases) {
			need = int64(bases[i+1] - base)
		}
		sealedLast := seal != nil && base == seal.LastSegment
		if sealedLast {
			need = int64(seal.End - base)
		}
		f, err := fs.OpenFile(path, os.O_RDONLY, 0)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) && len(res.segs) == 0 && !sealedLast {
				continue // trimmed since the listing
			}
			return res, fmt.Errorf("wal: opening %s: %w", path, err)
		}
		res.segs = append(res.segs, base)
		out, err := scanSegment(f, path, base, need, hdr, fn, &res)
		f.Close()
		if err != nil {
			return res, err
		}
		if out.header != nil {
			if need >= 0 {
				return res, corruptionError(path, 0, base, out.header)
			}
			return res, nil // a segment still being installed, or a torn one: the end
		}
		end := base + Pos(out.end)
		if need >= 0 && out.end != need {
			// The listing may not show the segment that starts here.
			if !sealedLast && end > base && (seal == nil || end < seal.LastSegment) {
				ok, err := exists(fs, filepath.Join(dir, segmentName(end)))
				if err != nil {
					return res, err
				}
				if ok {
					bases = slices.Insert(bases, i+1, end)
					continue
				}
			}
			return res, corruptionError(path, out.end, end, out.why(need))
		}
		if sealedLast {
			return res, nil
		}
		if need < 0 && seal == nil {
			// Follow the chain past a listing that may not show the newest segment yet.
			ok, err := exists(fs, filepath.Join(dir, segmentName(end)))
			if err != nil {
				return res, err
			}
			if ok {
				bases = append(bases, end)
			}
		}
	}
	if seal != nil && res.end != seal.End {
		return res, fmt.Errorf("%w: %s is sealed at position %d but its records end at %d",
			ErrCorrupt, dir, seal.End, res.end)
	}
	return res, nil
}

// segmentScan is how scanSegment ended.
type segmentScan struct {
	header error // the segment header is bad (then nothing else is set)
	end    int64 // offset just past the last valid record
	size   int64 // size of the file
	stop   error // the bad record there (ErrTorn, ErrCorrupt), nil at a clean end
}

func (s segmentScan) why(need int64) error {
	if s.stop != nil {
		return s.stop
	}
	return fmt.Errorf("records end at offset %d of a %d-byte file, %d bytes before offset %d", s.end, s.size, need-s.end, need)
}

// scanSegment reads the records of one open segment, up to need if need >= 0,
// calling fn and counting them in res. Errors are I/O errors, a segment of another
// format version, and fn's.
func scanSegment(f File, path string, base Pos, need int64, hdr []byte,
	fn func(byte, []byte, Pos) error, res *dirScan) (segmentScan, error) {
	st, err := f.Stat()
	if err != nil {
		return segmentScan{}, fmt.Errorf("wal: stat %s: %w", path, err)
	}
	out := segmentScan{size: st.Size()}
	limit := out.size
	if need >= 0 {
		limit = min(limit, need)
	}
	n, err := f.ReadAt(hdr, 0)
	if err != nil && err != io.EOF {
		return out, fmt.Errorf("wal: reading %s: %w", path, err)
	}
	hbase, herr := decodeSegmentHeader(hdr[:n])
	switch {
	case errors.Is(herr, ErrVersion):
		// Not damage: stopping quietly would hide the newer build's records.
		return out, fmt.Errorf("wal: scan %s: %w", path, herr)
	case herr != nil:
	case hbase != base:
		herr = fmt.Errorf("%w: segment header says base %d, file name says %d", ErrCorrupt, hbase, base)
	case need >= 0 && need < HeaderSize:
		herr = fmt.Errorf("%w: records must end %d bytes into the segment", ErrCorrupt, need)
	}
	if herr != nil {
		out.header = herr
		return out, nil
	}
	res.last, res.hasLast = base, true
	res.end = base + HeaderSize

	avail := max(limit-HeaderSize, 0)
	rd := NewReader(io.NewSectionReader(f, HeaderSize, avail), avail)
	for {
		off := HeaderSize + rd.Offset()
		typ, payload, err := rd.Next()
		if err == io.EOF || errors.Is(err, ErrTorn) || errors.Is(err, ErrCorrupt) {
			out.end = off
			if err != io.EOF {
				out.stop = err
			}
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("wal: reading %s at %d: %w", path, off, err)
		}
		pos := base + Pos(off+RecordHeaderSize)
		if fn != nil {
			if err := fn(typ, payload, pos); err != nil {
				return out, err
			}
		}
		res.records++
		res.end = pos + Pos(len(payload))
	}
}

// listSegments returns the bases of the segment files in dir, sorted.
func listSegments(fs FS, dir string) ([]Pos, error) {
	ents, err := fs.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("wal: reading directory %s: %w", dir, err)
	}
	var bases []Pos
	for _, e := range ents {
		if base, ok := parseSegmentName(e.Name()); ok && !e.IsDir() {
			bases = append(bases, base)
		}
	}
	slices.Sort(bases)
	return bases, nil
}

// exists opens path to learn whether it exists: on NFS a lookup by name goes to the
// server (mounted with lookupcache=positive or none), where a listing may be stale. An
// error other than "does not exist" is returned: guessing "no" could end a scan early.
func exists(fs FS, path string) (bool, error) {
	f, err := fs.OpenFile(path, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("wal: opening %s: %w", path, err)
	}
	f.Close()
	return true, nil
}
