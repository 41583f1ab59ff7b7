package wal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
)

// segment is one segment file of the log.
type segment struct {
	base Pos
	path string
	f    File
	// end is the offset in the file just past the last synced record. Readers
	// may read [HeaderSize, end). Only the committer (or Replay) stores it.
	end atomic.Int64
}

const segmentSuffix = ".wal"
const tmpSuffix = ".tmp"

func segmentName(base Pos) string { return fmt.Sprintf("%020d%s", base, segmentSuffix) }

func parseSegmentName(name string) (Pos, bool) {
	digits, ok := strings.CutSuffix(name, segmentSuffix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return Pos(n), true
}

// tmpFile is a (preallocated) file that is not yet part of the log.
type tmpFile struct {
	path string
	f    File
	size int64
}

type preResult struct {
	t   *tmpFile
	err error
}

// zeros is the source for zero-filling preallocated segments.
var zeros = make([]byte, zeroStep)

// zeroStep is how much of a new segment is zero-filled and written back at a time.
const zeroStep = 256 << 10

// createTmp creates a new segment file of capacity size under a temporary
// name, preallocated and synced if the config asks for it. It is called by the
// committer, by Replay and by the background precreator.
func (w *WAL) createTmp(size int64) (*tmpFile, error) {
	path := filepath.Join(w.cfg.Dir, fmt.Sprintf("segment-%d%s", w.tmpSeq.Add(1), tmpSuffix))
	f, err := w.fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600) // message data: the owner only
	if err != nil {
		return nil, ioError("creating segment", err)
	}
	t := &tmpFile{path: path, f: f, size: size}
	if w.cfg.Preallocate {
		if err := preallocate(f, size, !w.cfg.NoZeroFill); err != nil {
			w.discardTmp(t)
			return nil, err
		}
	}
	return t, nil
}

// preallocate reserves size bytes for f and, with zeroFill, writes zeros over
// them so later writes do not change any metadata, then syncs f.
func preallocate(f File, size int64, zeroFill bool) error {
	if err := f.Allocate(size); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		return ioError("allocating segment", err)
	}
	if zeroFill {
		// Paced: each step is written back before the next is written, so the
		// live segment's fdatasync waits behind at most one step of zeros (a
		// 64 MiB burst made group commits take 20-40 ms at every roll).
		rw, _ := f.(RangeWriter)
		for off := int64(0); off < size; off += zeroStep {
			n := min(zeroStep, size-off)
			if _, err := f.WriteAt(zeros[:n], off); err != nil {
				return ioError("zero-filling segment", err)
			}
			if rw != nil && rw.WriteBack(off, n) != nil {
				// Pacing only (a file system without sync_file_range says EINVAL or
				// ENOSYS): the Sync below still reports any real write error.
				rw = nil
			}
		}
	}
	if err := f.Sync(); err != nil {
		return ioError("syncing preallocated segment", err)
	}
	return nil
}

func (w *WAL) discardTmp(t *tmpFile) {
	_ = t.f.Close()
	_ = w.fs.Remove(t.path)
}

// install turns t into the segment starting at base: it writes and syncs the
// header, renames the file to its final name (replacing any file of that
// name) and syncs the directory. Errors before the rename leave the log as it
// was; a directory sync error fails the WAL permanently.
func (w *WAL) install(t *tmpFile, base Pos) (*segment, error) {
	if _, err := t.f.WriteAt(encodeSegmentHeader(base), 0); err != nil {
		w.discardTmp(t)
		return nil, ioError("writing segment header", err)
	}
	if err := t.f.Sync(); err != nil {
		w.discardTmp(t)
		return nil, ioError("syncing segment header", err)
	}
	path := filepath.Join(w.cfg.Dir, segmentName(base))
	if err := w.fs.Rename(t.path, path); err != nil {
		w.discardTmp(t)
		return nil, ioError("naming segment", err)
	}
	if err := w.fs.SyncDir(w.cfg.Dir); err != nil {
		_ = t.f.Close()
		return nil, w.fail(fmt.Errorf("syncing directory %s: %w", w.cfg.Dir, err))
	}
	s := &segment{base: base, path: path, f: t.f}
	s.end.Store(HeaderSize)
	return s, nil
}

// newSegment creates and installs a segment of at least capacity bytes at
// base, using the precreated file if it is big enough. Committer or Replay only.
func (w *WAL) newSegment(base Pos, capacity int64) (*segment, error) {
	t := w.takePrecreated(capacity)
	if t == nil {
		var err error
		if t, err = w.createTmp(capacity); err != nil {
			return nil, err
		}
	}
	s, err := w.install(t, base)
	if err != nil {
		return nil, err
	}
	w.cfg.Logger.Debug("wal: new segment", "segment", s.path, "capacity", t.size)
	w.startPrecreate()
	return s, nil
}

// startPrecreate creates the next segment file in the background, so a roll
// only writes a header, renames and syncs instead of zero-filling.
func (w *WAL) startPrecreate() {
	if !w.cfg.Preallocate || w.preRunning || w.failErr() != nil {
		return
	}
	w.preRunning = true
	size := w.nextSize
	go func() {
		t, err := w.createTmp(size)
		w.preCh <- preResult{t, err}
	}()
}

// takePrecreated waits for the background precreation and returns its file if
// it succeeded and holds capacity bytes.
func (w *WAL) takePrecreated(capacity int64) *tmpFile {
	if !w.preRunning {
		return nil
	}
	r := <-w.preCh
	w.preRunning = false
	switch {
	case r.err != nil:
		w.cfg.Logger.Debug("wal: background segment creation failed", "err", r.err)
		return nil
	case r.t.size < capacity:
		w.discardTmp(r.t)
		return nil
	}
	return r.t
}
