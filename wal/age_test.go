package wal_test

import (
	"sync"
	"testing"
	"time"

	"github.com/weir-io/weir/wal/waltest"
)

// fakeClock is Config.Now for tests: it moves only when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// A segment whose first record is SegmentMaxAge old is rolled at the next append, though
// far from full, so a slow log can be trimmed by time; a new segment is not rolled before
// it holds a record; with SegmentMaxAge 0 only size rolls. The records of both segments
// replay, and trimming removes the old one.
func TestSegmentRollsByAge(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1700000000, 0)}
	cfg := memConfig(waltest.NewMemFS())
	cfg.SegmentSize = 1 << 20
	cfg.MaxGroupBytes = 16 << 10
	cfg.SegmentMaxAge = 10 * time.Second
	cfg.Now = clk.Now
	w, _, _ := openWAL(t, cfg)
	start := w.Start()
	recs := []record{mustAppend(t, w, 1, payload(0, 100))}
	clk.Add(9 * time.Second)
	recs = append(recs, mustAppend(t, w, 1, payload(1, 100)))
	if p := w.TrimPoint(recs[1].pos); p != start {
		t.Fatalf("rolled before the segment was SegmentMaxAge old: trim point %d, want %d", p, start)
	}
	clk.Add(time.Second)
	recs = append(recs, mustAppend(t, w, 1, payload(2, 100)))
	base := w.TrimPoint(recs[2].pos)
	if base <= recs[1].pos || base > recs[2].pos {
		t.Fatalf("no roll at SegmentMaxAge: record at %d in the segment at %d (previous record at %d)", recs[2].pos, base, recs[1].pos)
	}
	recs = append(recs, mustAppend(t, w, 1, payload(3, 100)))
	if p := w.TrimPoint(recs[3].pos); p != base {
		t.Fatalf("the new segment rolled again at once: %d, want %d", p, base)
	}
	// A segment after an aged one is sized for its rate (a group's worth here, not
	// SegmentSize): a second 10 KiB record does not fit. The size is chosen a segment
	// ahead (the next file is made in the background), so after the roll by size that
	// follows, one more small segment comes before a full-size one that takes three.
	clk.Add(10 * time.Second)
	recs = append(recs, mustAppend(t, w, 1, payload(4, 100)))
	small := w.TrimPoint(recs[4].pos)
	for i := 5; i < 10; i++ {
		recs = append(recs, mustAppend(t, w, 1, payload(i, 10<<10)))
	}
	if w.TrimPoint(recs[5].pos) != small || w.TrimPoint(recs[6].pos) == small {
		t.Fatalf("segment after an aged one: records at %d and %d in segments %d and %d, want the second past %d (a small segment)",
			recs[5].pos, recs[6].pos, w.TrimPoint(recs[5].pos), w.TrimPoint(recs[6].pos), small)
	}
	if full := w.TrimPoint(recs[7].pos); full == w.TrimPoint(recs[6].pos) || w.TrimPoint(recs[9].pos) != full {
		t.Fatal("no full-size segment after a roll by size")
	}
	removed, err := w.TrimBefore(recs[2].pos)
	if err != nil || len(removed) != 1 || w.Start() != base {
		t.Fatalf("TrimBefore: removed %v, %v; start %d, want %d", removed, err, w.Start(), base)
	}
	checkReadAt(t, w, recs[2:])
	w, got, info := reopen(t, w, cfg)
	sameRecords(t, got, recs[2:])
	// After a replay, hours later, the first record goes into the new empty segment.
	clk.Add(time.Hour)
	if r := mustAppend(t, w, 1, payload(42, 100)); w.TrimPoint(r.pos) != info.End {
		t.Fatalf("first record after a replay in the segment at %d, want %d", w.TrimPoint(r.pos), info.End)
	}

	// By size only: an hour later, the next record still goes into the active segment.
	cfg.SegmentMaxAge = 0
	w, _, _ = reopen(t, w, cfg)
	first := mustAppend(t, w, 1, payload(40, 100))
	clk.Add(time.Hour)
	if r := mustAppend(t, w, 1, payload(41, 100)); w.TrimPoint(r.pos) != w.TrimPoint(first.pos) {
		t.Fatal("rolled by age with SegmentMaxAge 0")
	}
}
