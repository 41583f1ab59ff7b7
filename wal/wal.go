package wal

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Pos is a logical byte position in the whole log. The position of a record
// is the position of its payload's first byte: the base of its segment plus
// the payload's offset in the segment file. Positions grow with log order.
type Pos int64

// Entry is one record to append.
type Entry struct {
	Type byte
	// Head, if set, is the start of the record's payload and Payload the rest: a
	// caller that prepends a small header to bytes it already holds (a produce
	// request's batch) needs no copy of its own, the group buffer is the only one.
	Head    []byte
	Payload []byte
	// Prepare, if set, is called by the committer goroutine in log order just
	// before the payload is copied into the group's write buffer. It is given
	// Payload (without Head) and may rewrite it in place (its length is fixed). If it returns an error
	// the entry is dropped (not written) and Done gets that error. Prepare is
	// not called for entries that fail before their group is written (WAL
	// failed, segment roll failed, payload too large).
	Prepare func(payload []byte) error
	// Done is called exactly once, in log order, from the WAL's syncer goroutine,
	// after the entry's group is synced (err == nil, pos = payload position)
	// or failed. It must not block (so it must not call Append, which blocks
	// when the queue is full). The caller must not modify Head or Payload before Done.
	// Exception: when the WAL is closed, Append calls Done(0, ErrClosed)
	// itself before returning.
	Done func(pos Pos, err error)
}

// WAL is a write-ahead log in one directory. See the package documentation.
type WAL struct {
	cfg   Config
	fs    FS
	m     *metrics
	found []Pos // segment bases found by Open, consumed by Replay
	// instance identifies this WAL's owner record in FENCE (Config.Fence).
	instance uint64
	// fenceCached: the fence check may read FENCE through the page cache (checkFence):
	// the OS file system, on a local file system with one page cache for all readers.
	fenceCached bool

	// The queue of entries waiting for the committer.
	qmu     sync.Mutex
	notFull sync.Cond
	queue   []Entry
	closing bool
	ready   bool          // Replay has succeeded
	kick    chan struct{} // wakes the committer
	done    chan struct{} // closed when the committer exits

	// segs lists the live segments by base; the last is the active one.
	segMu  sync.RWMutex
	trimMu sync.Mutex // one TrimBefore at a time (it works outside segMu)
	segs   []*segment
	closed bool

	end    atomic.Int64
	tmpSeq atomic.Int64

	errMu sync.Mutex
	err   error // permanent failure, wraps ErrFailed

	// Owned by the committer goroutine (set up by Replay before ready).
	active   *segment
	capacity int64 // bytes the active segment may hold
	writeOff int64 // where the next group goes in the active segment
	mustRoll bool  // a write failed: never write after its bytes again
	// firstAt is when the active segment's first group was written (SegmentMaxAge).
	firstAt time.Time
	// nextSize is the capacity of the next segment, the one created in the background
	// (SegmentSize, or less after a roll by age: agedSegmentSize).
	nextSize int64
	// writeFailed: a group's write failed in a directory others read (Config.Fence);
	// the syncer fails the WAL for good after the group before it (commit.go, writeGroup).
	writeFailed error
	buf         []byte
	preRunning  bool
	preCh       chan preResult

	replayMu     sync.Mutex
	replayed     bool
	replayClosed bool

	closeOnce sync.Once
	closeErr  error
}

type result struct {
	pos Pos
	err error
	// written: the entry's frame is in the group buffer.
	written bool
}

// Open creates cfg.Dir if needed and finds the segments in it, removing
// leftover temporary files. It does not read them: call Replay before Append.
// It refuses (ErrFenced) a sealed or fenced directory; with Config.Fence it
// writes this writer's owner record into FENCE, synced, and then, with
// Config.EpochFence, refuses an epoch the epoch fence token fences.
func Open(cfg Config) (*WAL, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if err := cfg.FS.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("wal: creating %s: %w", cfg.Dir, err)
	}
	entries, err := cfg.FS.ReadDir(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("wal: listing %s: %w", cfg.Dir, err)
	}
	var found []Pos
	var leftovers []string
	hasFence := false
	for _, e := range entries {
		name := e.Name()
		if base, ok := parseSegmentName(name); ok && !e.IsDir() {
			found = append(found, base)
		} else if strings.HasSuffix(name, tmpSuffix) && !e.IsDir() {
			// A segment that was being preallocated when we stopped.
			leftovers = append(leftovers, name)
		} else if name == SealFile {
			// A taker read this directory to its end and recorded where it ends: every
			// reader stops there, so anything written now would be lost, and Replay's cut
			// could change records below the seal. Refused even without Config.Fence.
			return nil, fmt.Errorf("%w: %s is sealed; a writer needs a new directory", ErrFenced, cfg.Dir)
		} else if name == FenceFile {
			hasFence = true
		}
	}
	if hasFence && !cfg.Fence {
		// Without its own token a writer cannot notice a fence later, but it can
		// still refuse a directory that a taker fenced before it started.
		b, err := readFenceFile(cfg.FS, cfg.Dir)
		if err != nil {
			return nil, fmt.Errorf("%w: reading %s: %w", ErrFenced, FenceFile, err)
		}
		if fi := parseFence(b); fi.Fenced {
			return nil, fmt.Errorf("%w: %s: %s", ErrFenced, cfg.Dir, fi.describe())
		}
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	// The owner record is written after every check that may refuse the Open (a
	// refused Open must not replace the owner record of a WAL that has it open) and
	// before anything else in the directory changes.
	var instance uint64
	if cfg.Fence {
		instance = rand.Uint64()
		if err := openFence(cfg, instance); err != nil {
			m.unregister()
			return nil, err
		}
		if err := checkEpochFence(cfg); err != nil {
			m.unregister()
			return nil, err
		}
	}
	for _, name := range leftovers {
		if err := cfg.FS.Remove(filepath.Join(cfg.Dir, name)); err != nil {
			m.unregister()
			return nil, fmt.Errorf("wal: removing leftover %s: %w", name, err)
		}
	}
	slices.Sort(found)
	w := &WAL{
		cfg:   cfg,
		fs:    cfg.FS,
		m:     m,
		found: found,
		kick:  make(chan struct{}, 1),
		done:  make(chan struct{}),
		preCh: make(chan preResult, 1),
	}
	w.nextSize = cfg.SegmentSize
	w.instance = instance
	if isOSFS(cfg.FS) {
		w.fenceCached = sharedPageCache(cfg.Dir)
	}
	w.notFull.L = &w.qmu
	go w.run()
	return w, nil
}

// Append queues e. It blocks only while QueueDepth entries are queued. The
// outcome is reported to e.Done.
func (w *WAL) Append(e Entry) {
	w.qmu.Lock()
	for len(w.queue) >= w.cfg.QueueDepth && !w.closing {
		w.notFull.Wait()
	}
	if w.closing {
		w.qmu.Unlock()
		w.m.done(ErrClosed)
		if e.Done != nil {
			e.Done(0, ErrClosed)
		}
		return
	}
	w.queue = append(w.queue, e)
	w.qmu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// AppendSync appends one record and waits until it is durable. If ctx ends
// before the committer took the record, the record is never written and
// ctx's error is returned; once taken, AppendSync waits for the outcome.
func (w *WAL) AppendSync(ctx context.Context, typ byte, payload []byte) (Pos, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	const queued, taken, abandoned = 0, 1, 2
	var state atomic.Int32
	ch := make(chan result, 1)
	w.Append(Entry{
		Type:    typ,
		Payload: payload,
		Prepare: func([]byte) error {
			if !state.CompareAndSwap(queued, taken) {
				return ctx.Err()
			}
			return nil
		},
		Done: func(pos Pos, err error) { ch <- result{pos: pos, err: err} },
	})
	select {
	case r := <-ch:
		return r.pos, r.err
	case <-ctx.Done():
		if state.CompareAndSwap(queued, abandoned) {
			return 0, ctx.Err()
		}
		r := <-ch
		return r.pos, r.err
	}
}

// ReadAt reads len(p) payload bytes at pos. The bytes must lie within the
// synced records of one segment. It is safe to call concurrently with appends,
// and still works after the WAL failed. A read racing with TrimBefore or Close
// of its segment may fail.
func (w *WAL) ReadAt(p []byte, pos Pos) error {
	s, off, err := w.locate(pos, len(p))
	if err != nil {
		return err
	}
	// Read without holding segMu, so a slow read never delays a roll.
	n, err := s.f.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	return fmt.Errorf("wal: reading %s at %d: %w", s.path, off, err)
}

// locate finds the segment holding [pos, pos+n) and the file offset of pos.
func (w *WAL) locate(pos Pos, n int) (*segment, int64, error) {
	w.segMu.RLock()
	defer w.segMu.RUnlock()
	if w.closed {
		return nil, 0, ErrClosed
	}
	i := sort.Search(len(w.segs), func(i int) bool { return w.segs[i].base > pos }) - 1
	if i < 0 {
		return nil, 0, fmt.Errorf("%w: %d is before the log start", ErrOutOfRange, pos)
	}
	s := w.segs[i]
	off := int64(pos - s.base)
	if end := s.end.Load(); off < HeaderSize || off+int64(n) > end {
		return nil, 0, fmt.Errorf("%w: [%d, %d) is not within the records of segment %s",
			ErrOutOfRange, pos, int64(pos)+int64(n), filepath.Base(s.path))
	}
	return s, off, nil
}

// End returns the position just past the last synced record (after Replay,
// ReplayInfo.End). It only grows.
func (w *WAL) End() Pos { return Pos(w.end.Load()) }

// Start returns the base position of the oldest segment (0 before Replay).
func (w *WAL) Start() Pos {
	w.segMu.RLock()
	defer w.segMu.RUnlock()
	if len(w.segs) == 0 {
		return 0
	}
	return w.segs[0].base
}

// TrimPoint returns where the log would start after TrimBefore(pos): the base of the
// segment holding pos (or of the oldest segment). Records below it would be removed.
func (w *WAL) TrimPoint(pos Pos) Pos {
	w.segMu.RLock()
	defer w.segMu.RUnlock()
	if len(w.segs) == 0 {
		return 0
	}
	i := sort.Search(len(w.segs), func(i int) bool { return w.segs[i].base > pos }) - 1
	return w.segs[max(i, 0)].base
}

// Err returns nil, or an error wrapping ErrFailed once the WAL has failed for good.
func (w *WAL) Err() error { return w.failErr() }

func (w *WAL) failErr() error {
	w.errMu.Lock()
	defer w.errMu.Unlock()
	return w.err
}

// fail makes the WAL permanently failed (the first cause wins) and returns the
// failure error.
func (w *WAL) fail(cause error) error {
	w.errMu.Lock()
	defer w.errMu.Unlock()
	if w.err == nil {
		w.err = fmt.Errorf("%w: %w", ErrFailed, cause)
		w.cfg.Logger.Error("wal: failed permanently; no more appends", "err", cause)
	}
	return w.err
}

// TrimBefore removes the oldest segments whose records all lie before pos
// (e.g. uploaded to object storage). The active segment is never removed.
// It returns the paths of the removed segment files.
//
// The segments leave the log at once (reads of them fail with ErrOutOfRange);
// their files are renamed to temporary names (which Open removes), the
// directory is synced, and only then are the files shrunk step by step and
// removed, without holding the segment lock. Removing a 64 MiB file in one go
// made ext4 free all its extents in one journal commit, and a group commit's
// fdatasync issued meanwhile took 20 ms; and a roll, which takes the segment
// lock, waited for it.
func (w *WAL) TrimBefore(pos Pos) ([]string, error) {
	w.trimMu.Lock()
	defer w.trimMu.Unlock()
	w.segMu.Lock()
	if w.closed {
		w.segMu.Unlock()
		return nil, ErrClosed
	}
	var gone []*segment
	var trash []string
	var err error
	for len(w.segs) > 1 && w.segs[1].base <= pos {
		s := w.segs[0]
		t := s.path + trimSuffix
		if err = w.fs.Rename(s.path, t); err != nil && !errors.Is(err, os.ErrNotExist) {
			err = fmt.Errorf("wal: removing %s: %w", s.path, err)
			break
		}
		err = nil
		gone = append(gone, s)
		trash = append(trash, t)
		w.segs[0] = nil
		w.segs = w.segs[1:]
	}
	w.m.setSegments(len(w.segs))
	w.segMu.Unlock()
	if len(gone) == 0 {
		return nil, err
	}
	if serr := w.fs.SyncDir(w.cfg.Dir); serr != nil {
		// The names may come back after a crash; the files are intact until they
		// are shrunk, so stop here (Open keeps trash files' contents out of the log).
		for _, s := range gone {
			_ = s.f.Close()
		}
		return nil, fmt.Errorf("wal: syncing directory after trim: %w", serr)
	}
	removed := make([]string, 0, len(gone))
	for i, s := range gone {
		_ = s.f.Close()
		if rerr := removeGradually(w.fs, trash[i]); rerr != nil && err == nil {
			err = fmt.Errorf("wal: removing %s: %w", s.path, rerr)
		}
		removed = append(removed, s.path)
	}
	return removed, err
}

// trimSuffix marks a trimmed segment's file until it is removed. It ends in
// tmpSuffix, so Open removes what a crash left behind.
const trimSuffix = ".trim" + tmpSuffix

// trimStep is how much of a trimmed segment is freed per synced truncation.
const trimStep = 4 << 20

// removeGradually shrinks the file at path by trimStep at a time, syncing each
// step, then removes it: each step frees a few extents in its own journal
// commit instead of all at once.
func removeGradually(fs FS, path string) error {
	f, err := fs.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err == nil {
		var fi os.FileInfo
		if fi, err = f.Stat(); err == nil {
			for size := fi.Size(); size > trimStep && err == nil; {
				size -= trimStep
				if err = f.Truncate(size); err == nil {
					err = f.Sync()
				}
			}
		}
		_ = f.Close()
	}
	// Removed even if shrinking failed: the file is not part of the log any more.
	if rerr := fs.Remove(path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		return rerr
	}
	return err
}

// Close stops the WAL. Entries queued before Close are still written (their
// Done reports the outcome); later Appends get ErrClosed. Close waits for a
// stalled sync to return. It is idempotent and returns file close errors; see
// Err for a permanent failure.
func (w *WAL) Close() error {
	w.closeOnce.Do(func() {
		w.replayMu.Lock() // wait for a running Replay
		w.replayClosed = true
		w.replayMu.Unlock()

		w.qmu.Lock()
		w.closing = true
		w.notFull.Broadcast()
		w.qmu.Unlock()
		select {
		case w.kick <- struct{}{}:
		default:
		}
		<-w.done

		if w.preRunning {
			if r := <-w.preCh; r.err == nil {
				w.discardTmp(r.t)
			}
			w.preRunning = false
		}
		var errs []error
		w.segMu.Lock()
		w.closed = true
		for _, s := range w.segs {
			if err := s.f.Close(); err != nil {
				errs = append(errs, fmt.Errorf("wal: closing %s: %w", s.path, err))
			}
		}
		w.segMu.Unlock()
		w.m.unregister()
		w.closeErr = errors.Join(errs...)
	})
	return w.closeErr
}
