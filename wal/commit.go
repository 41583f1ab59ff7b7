package wal

import (
	"fmt"
	"slices"
	"time"
)

// group describes the batch take hands to commit.
type group struct {
	ready bool  // Replay has succeeded
	roll  bool  // the batch goes into a new segment
	aged  bool  // ... because the active one is SegmentMaxAge old
	bytes int64 // framed bytes of the batch (entries that are not too large)
}

// written is a group on its way through the pipeline: the committer writes it, the
// syncer syncs it and calls its Done callbacks. pipeDepth of them circulate, so
// groups are taken, prepared and written while an fdatasync is in flight, and the
// next fdatasync covers all of them.
type written struct {
	batch []Entry
	res   []result
	// seg is the segment the group was written to, end the write offset just past
	// it; seg nil: nothing to sync (the group failed before or at its write).
	seg   *segment
	end   int64
	bytes int
	// barrier: the group's records were prepared but not written, so their Done
	// (which may undo what Prepare did) must run before anything else is prepared.
	barrier bool
	// failWAL: the group's write failed in a fenced WAL, which the syncer fails for good
	// before the group's Done callbacks (after the groups before it were acked).
	failWAL error
}

// pipeDepth is how many groups may be written and not yet finished by the syncer.
// With one (a pipeline one group deep), an entry that arrives while group k syncs and
// group k+1 waits for the syncer waits for three fdatasyncs: k's end, k+1's and its
// own. With more, it is written at once and the next fdatasync, which starts when k's
// ends, covers it: at most k's end and one more (PERFORMANCE.md, "The produce tail").
const pipeDepth = 16

// run is the committer goroutine: it takes a batch of queued entries, prepares it
// and writes it with one WriteAt, then hands it to the syncer goroutine, which syncs
// every group handed to it so far with one fdatasync, checks the fence and calls the
// Done callbacks. So groups are written while an fdatasync is in flight, and each
// group's callbacks still run after a sync that started after its write, in log order
// (one syncer, groups handed over in order). The committer sleeps on w.kick when idle
// and exits once Close was called and the queue is empty, after the syncer finished
// every group.
func (w *WAL) run() {
	defer close(w.done)
	free := make(chan *written, pipeDepth)
	for range pipeDepth {
		free <- &written{}
	}
	toSync := make(chan *written, pipeDepth)
	synced := make(chan struct{})
	go func() {
		defer close(synced)
		gs := make([]*written, 0, pipeDepth)
		for g := range toSync {
			gs = append(gs[:0], g)
		more:
			for {
				select {
				case g, ok := <-toSync:
					if !ok {
						break more // closed: these are the last; the range ends next
					}
					gs = append(gs, g)
				default:
					break more
				}
			}
			w.syncGroups(gs)
			for _, g := range gs {
				free <- g
			}
		}
	}()
	defer func() {
		close(toSync)
		<-synced
	}()
	// quiesce waits until the syncer has finished every group but the held ones.
	back := make([]*written, 0, pipeDepth)
	quiesce := func(held int) {
		for range pipeDepth - held {
			back = append(back, <-free)
		}
		for _, a := range back {
			free <- a
		}
		back = back[:0]
	}
	for {
		g := <-free
		var grp group
		var ok bool
		g.batch, grp, ok = w.take(g.batch[:0])
		if !ok {
			return
		}
		if grp.roll {
			// A new segment may exist on disk only once every record before its base is
			// synced: a replay takes a gap before the next segment's base for corruption.
			quiesce(1)
		}
		w.commit(g, grp)
		toSync <- g
		if g.barrier {
			// Every group back: the syncer has called every Done so far.
			quiesce(0)
		}
	}
}

// size is the payload length of the record e becomes.
func (e *Entry) size() int { return len(e.Head) + len(e.Payload) }

// frameSize is the framed size of e, or 0 if e is too large to be written.
func (w *WAL) frameSize(e *Entry) int64 {
	if e.size() > w.cfg.MaxRecordSize {
		return 0
	}
	return int64(FrameSize(e.size()))
}

// segmentAged: the active segment holds records and the first is SegmentMaxAge old, so
// the next group starts a new segment (by the roll of a full one: every invariant of a
// roll holds, see run).
func (w *WAL) segmentAged() bool {
	return w.cfg.SegmentMaxAge > 0 && w.writeOff > HeaderSize && w.cfg.Now().Sub(w.firstAt) >= w.cfg.SegmentMaxAge
}

// take moves the next group's entries from the queue to batch. A group holds
// at most MaxGroupBytes (or one larger record) and fits in the active segment;
// if its first record does not fit there, the group goes into a new segment.
func (w *WAL) take(batch []Entry) ([]Entry, group, bool) {
	w.qmu.Lock()
	defer w.qmu.Unlock()
	for len(w.queue) == 0 {
		if w.closing {
			return batch, group{}, false
		}
		w.qmu.Unlock()
		<-w.kick
		w.qmu.Lock()
	}
	g := group{ready: w.ready}
	n := len(w.queue)
	if g.ready && w.failErr() == nil {
		n = 0
		avail := int64(0)
		g.aged = !w.mustRoll && w.segmentAged()
		if !w.mustRoll && !g.aged {
			avail = w.capacity - w.writeOff
		}
		limit := min(avail, int64(w.cfg.MaxGroupBytes))
		for n < len(w.queue) {
			sz := w.frameSize(&w.queue[n])
			if g.bytes+sz > limit {
				if g.bytes > 0 {
					break
				}
				if sz > avail { // the first record needs a new segment
					g.roll = true
					segRoom := max(w.nextSize, HeaderSize+sz) - HeaderSize
					limit = min(segRoom, max(int64(w.cfg.MaxGroupBytes), sz))
				} else { // a record larger than MaxGroupBytes: a group of its own
					limit = sz
				}
			}
			g.bytes += sz
			n++
		}
	}
	batch = append(batch, w.queue[:n]...)
	rest := copy(w.queue, w.queue[n:])
	clear(w.queue[rest:])
	w.queue = w.queue[:rest]
	w.notFull.Broadcast()
	return batch, g, true
}

// commit prepares and writes one group (on the committer goroutine); the syncer
// finishes it (syncGroups).
func (w *WAL) commit(g *written, grp group) {
	batch := g.batch
	res := slices.Grow(g.res[:0], len(batch))[:len(batch)]
	clear(res)
	g.res, g.seg, g.end, g.bytes, g.barrier, g.failWAL = res, nil, 0, 0, false, nil

	fail := func(err error) {
		for i := range res {
			if res[i].err == nil {
				res[i] = result{err: err}
			}
		}
	}
	if !grp.ready {
		fail(ErrNotReplayed)
		return
	}
	if err := w.failErr(); err != nil {
		fail(err)
		return
	}
	if grp.roll {
		if err := w.roll(grp.bytes, grp.aged); err != nil {
			fail(err)
			return
		}
	}

	buf := slices.Grow(w.buf[:0], int(grp.bytes))
	for i := range batch {
		e := &batch[i]
		if e.size() > w.cfg.MaxRecordSize {
			res[i].err = fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, e.size(), w.cfg.MaxRecordSize)
			continue
		}
		if e.Prepare != nil {
			if err := e.Prepare(e.Payload); err != nil {
				res[i].err = err
				continue
			}
		}
		start := len(buf)
		buf = append(buf, make([]byte, RecordHeaderSize)...)
		buf = append(buf, e.Head...)
		buf = append(buf, e.Payload...)
		sealRecord(buf[start:], e.Type)
		res[i] = result{pos: w.active.base + Pos(w.writeOff+int64(start)+RecordHeaderSize), written: true}
	}
	if len(buf) > 0 {
		// A failure after the syncer failed the WAL (the bytes would follow bytes
		// whose sync failed) or of the write itself: nothing of the group is synced.
		err := w.failErr()
		if err == nil {
			err = w.writeGroup(buf)
		}
		if err != nil {
			for i := range res {
				if res[i].written {
					res[i] = result{err: err}
				}
			}
			g.barrier = true
			g.failWAL = w.writeFailed
		} else {
			g.seg, g.end, g.bytes = w.active, w.writeOff, len(buf)
		}
	}
	if cap(buf) > 2*w.cfg.MaxGroupBytes {
		buf = nil // do not keep a huge record's buffer around
	}
	w.buf = buf
}

// syncGroups runs on the syncer goroutine: it syncs groups written (each before it
// was handed over, so before the fdatasync starts), checks the fence once, then
// publishes each group and calls its Done callbacks, in order.
func (w *WAL) syncGroups(gs []*written) {
	// A group written after an earlier group's sync failed must not be acked: its bytes
	// follow bytes that may not be on disk.
	err := w.failErr()
	synced := false
	// One fdatasync per segment written to, in write order: one, unless a roll came
	// between (run quiesces before a roll, so it does not).
	for i := 0; i < len(gs); {
		s := gs[i].seg
		if s == nil {
			i++
			continue
		}
		entries, bytes := 0, 0
		for ; i < len(gs) && (gs[i].seg == s || gs[i].seg == nil); i++ {
			if gs[i].seg != nil {
				entries, bytes = entries+len(gs[i].batch), bytes+gs[i].bytes
			}
		}
		if err == nil {
			err = w.syncSegment(s, entries, bytes)
			synced = true
		}
	}
	if synced && err == nil && w.cfg.Fence {
		// After the fdatasync, before any Done: if a taker's fence record was synced
		// before this check started, the check sees it and nothing is acked; if not,
		// the groups were synced before the taker's scan starts, so the taker reads
		// them (doc.go, Fencing).
		if err = w.checkFence(); err != nil {
			err = w.fail(err)
		}
	}
	for _, g := range gs {
		if g.seg != nil {
			if err != nil {
				for i := range g.res {
					if g.res[i].written {
						g.res[i] = result{err: err}
					}
				}
			} else {
				w.publish(g.seg, g.end)
			}
		}
		if g.failWAL != nil {
			w.fail(g.failWAL)
		}
		w.finish(g.batch, g.res)
		clear(g.batch) // drop payload references
	}
}

// writeGroup writes buf at the active segment's write offset with one WriteAt and
// moves the write offset past it. The syncer syncs and publishes it.
func (w *WAL) writeGroup(buf []byte) error {
	s := w.active
	if w.writeOff == HeaderSize {
		w.firstAt = w.cfg.Now()
	}
	if _, err := s.f.WriteAt(buf, w.writeOff); err != nil {
		// Part of the group may be in the file. Those bytes must never be
		// followed by records of a later group, or a replay could mistake
		// them for records, so the next group starts a new segment.
		w.mustRoll = true
		err = ioError("writing "+s.path, err)
		if w.cfg.Fence {
			// In a directory other hosts read, even a new segment is not enough:
			// it would start at this same position, and the failed bytes may
			// still land (an NFS WRITE that reached the server, a page written
			// back later) as valid records continuing this segment. A reader
			// whose listing does not show the new segment yet (a stale NFS
			// listing) would take them for the log there and miss the acked
			// records of the new segment, and a taker would seal that. So
			// nothing more is written to this directory (doc.go, Group commit).
			w.writeFailed = err
		}
		return err
	}
	w.writeOff += int64(len(buf))
	return nil
}

// syncSegment fdatasyncs s after a group of entries and n bytes was written to it.
func (w *WAL) syncSegment(s *segment, entries, n int) error {
	start := time.Now()
	if err := s.f.Sync(); err != nil {
		return w.fail(fmt.Errorf("fdatasync %s: %w", s.path, err))
	}
	w.m.synced(time.Since(start).Seconds())
	w.m.group(entries, n)
	return nil
}

// publish makes the records of s up to end readable through ReadAt and End. It runs
// only once the group passed the fence check, so a fenced group is never served by
// its writer, and in log order (syncer goroutine), so End only grows.
func (w *WAL) publish(s *segment, end int64) {
	s.end.Store(end)
	w.end.Store(int64(s.base) + end)
}

// roll makes a new segment that can hold need bytes of records the active
// one. The new segment starts where the active one's records end, so the
// next segment's base tells a replay where the previous segment ends. aged: the
// active segment is rolled for its age (SegmentMaxAge), not because it is full.
func (w *WAL) roll(need int64, aged bool) error {
	capacity := max(w.nextSize, HeaderSize+need)
	w.nextSize = w.cfg.SegmentSize
	if aged {
		w.nextSize = agedSegmentSize(w.writeOff-HeaderSize, w.cfg)
	}
	base := w.active.base + Pos(w.writeOff)
	s, err := w.newSegment(base, capacity)
	if err != nil {
		return err
	}
	w.segMu.Lock()
	w.segs = append(w.segs, s)
	n := len(w.segs)
	w.segMu.Unlock()
	w.m.setSegments(n)
	w.active, w.capacity, w.writeOff, w.mustRoll = s, capacity, HeaderSize, false
	return nil
}

// agedSegmentSize is the size of the segment after one that held used bytes of
// records when it was rolled for its age: twice that (room for the rate to double
// before a roll by size), at least a group's worth (MaxGroupBytes), at most
// SegmentSize. A slow log then does not preallocate (zero-fill, on a local file
// system) a 64 MiB segment every SegmentMaxAge for a few MB of records.
func agedSegmentSize(used int64, cfg Config) int64 {
	return min(max(HeaderSize+2*used, HeaderSize+int64(cfg.MaxGroupBytes)), cfg.SegmentSize)
}

// finish calls the Done callbacks of a group in log order.
func (w *WAL) finish(batch []Entry, res []result) {
	for i := range batch {
		w.m.done(res[i].err)
		if d := batch[i].Done; d != nil {
			d(res[i].pos, res[i].err)
		}
	}
}
