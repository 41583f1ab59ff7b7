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
	bytes int64 // framed bytes of the batch (entries that are not too large)
}

// run is the committer goroutine: it takes a batch of queued entries, writes
// it with one WriteAt, syncs it with one fdatasync and calls the Done
// callbacks, then takes the next batch. It sleeps on w.kick when idle and
// exits once Close was called and the queue is empty.
func (w *WAL) run() {
	defer close(w.done)
	var batch []Entry
	for {
		var g group
		var ok bool
		batch, g, ok = w.take(batch[:0])
		if !ok {
			return
		}
		w.commit(batch, g)
		clear(batch) // drop payload references
	}
}

// frameSize is the framed size of e, or 0 if e is too large to be written.
func (w *WAL) frameSize(e *Entry) int64 {
	if len(e.Payload) > w.cfg.MaxRecordSize {
		return 0
	}
	return int64(FrameSize(len(e.Payload)))
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
		if !w.mustRoll {
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
					segRoom := max(w.cfg.SegmentSize, HeaderSize+sz) - HeaderSize
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

// commit writes and syncs one group, then calls the Done callbacks in order.
func (w *WAL) commit(batch []Entry, g group) {
	res := slices.Grow(w.results[:0], len(batch))[:len(batch)]
	clear(res)
	w.results = res
	defer w.finish(batch, res)

	fail := func(err error) {
		for i := range res {
			if res[i].err == nil {
				res[i] = result{err: err}
			}
		}
	}
	if !g.ready {
		fail(ErrNotReplayed)
		return
	}
	if err := w.failErr(); err != nil {
		fail(err)
		return
	}
	if g.roll {
		if err := w.roll(g.bytes); err != nil {
			fail(err)
			return
		}
	}

	buf := slices.Grow(w.buf[:0], int(g.bytes))
	for i := range batch {
		e := &batch[i]
		if len(e.Payload) > w.cfg.MaxRecordSize {
			res[i].err = fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(e.Payload), w.cfg.MaxRecordSize)
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
		buf = append(buf, e.Payload...)
		sealRecord(buf[start:], e.Type)
		res[i] = result{pos: w.active.base + Pos(w.writeOff+int64(start)+RecordHeaderSize), written: true}
	}
	if len(buf) > 0 {
		err := w.writeGroup(buf, len(batch))
		if err == nil && w.cfg.Fence {
			// After the fdatasync, before any Done: if a taker's fence record was
			// synced before this check started, the check sees it and nothing is
			// acked; if not, the group was synced before the taker's scan starts, so
			// the taker reads it (doc.go, Fencing).
			if err = w.checkFence(); err != nil {
				err = w.fail(err)
			}
		}
		if err != nil {
			for i := range res {
				if res[i].written {
					res[i] = result{err: err}
				}
			}
		} else {
			w.publish()
		}
	}
	if cap(buf) > 2*w.cfg.MaxGroupBytes {
		buf = nil // do not keep a huge record's buffer around
	}
	w.buf = buf
}

// writeGroup writes buf at the active segment's write offset with one WriteAt
// and syncs it with one fdatasync. The caller publishes the new end.
func (w *WAL) writeGroup(buf []byte, entries int) error {
	s := w.active
	if _, err := s.f.WriteAt(buf, w.writeOff); err != nil {
		// Part of the group may be in the file. Those bytes must never be
		// followed by records of a later group, or a replay could mistake
		// them for records, so the next group starts a new segment.
		w.mustRoll = true
		return ioError("writing "+s.path, err)
	}
	start := time.Now()
	if err := s.f.Sync(); err != nil {
		return w.fail(fmt.Errorf("fdatasync %s: %w", s.path, err))
	}
	w.m.synced(time.Since(start).Seconds())
	w.m.group(entries, len(buf))
	w.writeOff += int64(len(buf))
	return nil
}

// publish makes the records up to the write offset readable through ReadAt and End.
// It runs only once the group passed the fence check, so a fenced group is never
// served by its writer.
func (w *WAL) publish() {
	w.active.end.Store(w.writeOff)
	w.end.Store(int64(w.active.base) + w.writeOff)
}

// roll makes a new segment that can hold need bytes of records the active
// one. The new segment starts where the active one's records end, so the
// next segment's base tells a replay where the previous segment ends.
func (w *WAL) roll(need int64) error {
	capacity := max(w.cfg.SegmentSize, HeaderSize+need)
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

// finish calls the Done callbacks of a group in log order.
func (w *WAL) finish(batch []Entry, res []result) {
	for i := range batch {
		w.m.done(res[i].err)
		if d := batch[i].Done; d != nil {
			d(res[i].pos, res[i].err)
		}
	}
}
