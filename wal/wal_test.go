package wal_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/wal"
	"github.com/weir-io/weir/wal/waltest"
)

func TestAppendReadReplay(t *testing.T) {
	fs := waltest.NewMemFS()
	cfg := memConfig(fs)
	w, recs, info := openWAL(t, cfg)
	if len(recs) != 0 || info.Torn || info.End != 0 || w.End() != 0 {
		t.Fatalf("fresh log: %d records, info %+v, End %d", len(recs), info, w.End())
	}
	var want []record
	for i := range 100 {
		want = append(want, mustAppend(t, w, byte(i), payload(i, i*3)))
		if r := want[i]; w.End() != r.pos+wal.Pos(len(r.payload)) {
			t.Fatalf("End = %d after a record at %d of %d bytes", w.End(), r.pos, len(r.payload))
		}
	}
	checkReadAt(t, w, want)
	end := w.End()

	w, got, info := reopen(t, w, cfg)
	sameRecords(t, got, want)
	if info.Torn || info.Records != 100 || info.End != end || w.End() != end {
		t.Fatalf("replay info %+v, End %d, want End %d", info, w.End(), end)
	}
	checkReadAt(t, w, want) // old segments stay readable after a restart
	// Appends continue after the old records.
	want = append(want, mustAppend(t, w, 1, []byte("after restart")))
	if want[100].pos <= end {
		t.Fatalf("new record at %d, before the old end %d", want[100].pos, end)
	}
	_, got, _ = reopen(t, w, cfg)
	sameRecords(t, got, want)
}

func TestOneWriteAndOneSyncPerGroup(t *testing.T) {
	fs := waltest.NewFaultFS(waltest.NewMemFS())
	cfg := memConfig(fs)
	cfg.SegmentSize = 1 << 20
	w, _, _ := openWAL(t, cfg)
	fs.ResetCounts()
	for i := range 50 {
		mustAppend(t, w, 1, payload(i, 100))
	}
	if n := fs.Count(waltest.OpWrite, ".wal"); n != 50 {
		t.Errorf("%d segment writes for 50 sequential appends, want 50", n)
	}
	if n := fs.Count(waltest.OpSync, ".wal"); n != 50 {
		t.Errorf("%d segment syncs for 50 sequential appends, want 50", n)
	}
}

// callbackLog records Prepare and Done calls to check ordering.
type callbackLog struct {
	mu       sync.Mutex
	events   []event
	appended []int // ids in Append order
	done     map[int]int
	results  map[int]error
	wg       sync.WaitGroup
	// drain, if set, tells the results after which nothing of a later group may be
	// prepared before the failed entry is done (check); writes counts the group
	// writes so far, which tells the groups apart.
	drain  func(error) bool
	writes func() int64
}

type event struct {
	prepare bool
	id      int
	writes  int64 // l.writes() at the event: entries of one group see the same count
}

func newCallbackLog() *callbackLog {
	return &callbackLog{done: map[int]int{}, results: map[int]error{}}
}

// entry returns an Entry for id; prepareErr, if set, makes Prepare fail.
// Append must be called with l.mu held so l.appended is in Append order.
func (l *callbackLog) entry(id int, p []byte, prepareErr error) wal.Entry {
	l.wg.Add(1)
	l.appended = append(l.appended, id)
	return wal.Entry{
		Type:    1,
		Payload: p,
		Prepare: func(b []byte) error {
			l.mu.Lock()
			defer l.mu.Unlock()
			var writes int64
			if l.writes != nil {
				writes = l.writes()
			}
			l.events = append(l.events, event{true, id, writes})
			b[0] = byte(id) // rewrite in place, like offset assignment
			return prepareErr
		},
		Done: func(pos wal.Pos, err error) {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.events = append(l.events, event{false, id, 0})
			l.done[id]++
			l.results[id] = err
			l.wg.Done()
		},
	}
}

// check verifies: every Done exactly once; Done order == Append order; the
// Prepare calls are in Append order; and, with l.drain set, that no entry was
// prepared while an entry for which drain(its result) holds was prepared and not
// yet done (a group whose write failed is done before the next group is prepared;
// other groups are pipelined: the next group is prepared and written while the
// previous one syncs). prepared[id] says whether id was expected to reach Prepare.
func (l *callbackLog) check(t *testing.T, prepared func(id int) bool) {
	t.Helper()
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range l.appended {
		if l.done[id] != 1 {
			t.Fatalf("entry %d: Done called %d times", id, l.done[id])
		}
	}
	var dones, prepares []int
	outstanding := map[int]int64{} // prepared, not yet done: the write count at Prepare
	for _, e := range l.events {
		if e.prepare {
			if l.drain != nil {
				for id, w := range outstanding {
					if w < e.writes && l.drain(l.results[id]) {
						t.Fatalf("entry %d prepared while entry %d, whose group failed (%v), was not done", e.id, id, l.results[id])
					}
				}
			}
			prepares = append(prepares, e.id)
			outstanding[e.id] = e.writes
		} else {
			dones = append(dones, e.id)
			delete(outstanding, e.id)
		}
	}
	if !equalInts(dones, l.appended) {
		t.Fatalf("Done order %v\nAppend order %v", dones, l.appended)
	}
	var wantPrepares []int
	for _, id := range l.appended {
		if prepared(id) {
			wantPrepares = append(wantPrepares, id)
		}
	}
	if !equalInts(prepares, wantPrepares) {
		t.Fatalf("Prepare order %v\nwant %v", prepares, wantPrepares)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestGroupCommit(t *testing.T) {
	fs := waltest.NewFaultFS(waltest.NewMemFS())
	cfg := memConfig(fs)
	cfg.SegmentSize = 4 << 20
	w, _, _ := openWAL(t, cfg)

	// Hold the first group's sync until all 200 entries are queued, so the
	// rest must share syncs no matter how the goroutines are scheduled.
	stalled, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	fs.SetHook(func(op waltest.Op, name string, _ int64, _ int) error {
		if op == waltest.OpSync && strings.HasSuffix(name, ".wal") {
			once.Do(func() { close(stalled); <-release })
		}
		return nil
	})
	fs.ResetCounts()
	l := newCallbackLog()
	const n = 200
	var appenders sync.WaitGroup
	for i := range n {
		appenders.Add(1)
		go func() {
			defer appenders.Done()
			l.mu.Lock()
			defer l.mu.Unlock()
			w.Append(l.entry(i, payload(i, 1024), nil))
		}()
	}
	appenders.Wait()
	<-stalled
	close(release)
	l.check(t, func(int) bool { return true })

	syncs := fs.Count(waltest.OpSync, ".wal")
	t.Logf("%d appends, %d syncs, %d writes", n, syncs, fs.Count(waltest.OpWrite, ".wal"))
	if syncs > 3 {
		t.Fatalf("%d syncs for %d appends queued behind one stalled sync; want at most 3", syncs, n)
	}
	for id, err := range l.results {
		if err != nil {
			t.Fatalf("entry %d: %v", id, err)
		}
	}
}

func TestPrepareErrorDropsOnlyThatEntry(t *testing.T) {
	fs := waltest.NewMemFS()
	cfg := memConfig(fs)
	w, _, _ := openWAL(t, cfg)
	errBad := errors.New("bad entry")
	l := newCallbackLog()
	var mu sync.Mutex
	pos := map[int]wal.Pos{}
	l.mu.Lock()
	for i := range 6 {
		var perr error
		if i == 3 {
			perr = errBad
		}
		e := l.entry(i, payload(i, 20), perr)
		done := e.Done
		e.Done = func(p wal.Pos, err error) {
			mu.Lock()
			pos[i] = p
			mu.Unlock()
			done(p, err)
		}
		w.Append(e)
	}
	l.mu.Unlock()
	l.check(t, func(int) bool { return true })
	for i := range 6 {
		if err := l.results[i]; (i == 3) != (err != nil) || (i == 3 && !errors.Is(err, errBad)) {
			t.Fatalf("entry %d: err = %v", i, err)
		}
	}
	// No gap where entry 3 would have been.
	if want := pos[2] + 20 + wal.RecordHeaderSize; pos[4] != want {
		t.Fatalf("entry 4 at %d, want %d right after entry 2", pos[4], want)
	}
	_, got, _ := reopen(t, w, cfg)
	var want []record
	for _, i := range []int{0, 1, 2, 4, 5} {
		p := payload(i, 20)
		p[0] = byte(i) // Prepare's rewrite is what was written
		want = append(want, record{1, p, pos[i]})
	}
	sameRecords(t, got, want)
}

func TestFailedGroupIsDoneBeforeNextPrepare(t *testing.T) {
	fs := waltest.NewFaultFS(waltest.NewMemFS())
	cfg := memConfig(fs)
	cfg.SegmentSize = 2048 // at most 6 entries per group, so there are many groups
	w, _, _ := openWAL(t, cfg)
	var writes int
	var hmu sync.Mutex
	fs.SetHook(func(op waltest.Op, name string, _ int64, _ int) error {
		if op == waltest.OpWrite && strings.HasSuffix(name, ".wal") {
			hmu.Lock()
			defer hmu.Unlock()
			writes++
			if writes%3 == 2 {
				return errors.New("injected EIO")
			}
		}
		return nil
	})
	l := newCallbackLog()
	l.drain = func(err error) bool { return err != nil }
	l.writes = func() int64 { return fs.Count(waltest.OpWrite, ".wal") }
	var appenders sync.WaitGroup
	for i := range 150 {
		appenders.Add(1)
		go func() {
			defer appenders.Done()
			l.mu.Lock()
			defer l.mu.Unlock()
			w.Append(l.entry(i, payload(i, 300), nil))
		}()
	}
	appenders.Wait()
	l.check(t, func(int) bool { return true })
	failed := 0
	for _, err := range l.results {
		if err != nil {
			failed++
			if errors.Is(err, wal.ErrFailed) {
				t.Fatalf("a write error must not fail the WAL: %v", err)
			}
		}
	}
	if failed == 0 {
		t.Fatal("no entry failed; the hook did not fire")
	}
	if w.Err() != nil {
		t.Fatalf("Err = %v after write errors", w.Err())
	}
}

func TestSegmentRoll(t *testing.T) {
	fs := waltest.NewMemFS()
	cfg := memConfig(fs)
	cfg.SegmentSize = 1024
	w, _, _ := openWAL(t, cfg)
	rng := rand.New(rand.NewPCG(1, 2))
	var want []record
	for i := range 400 {
		n := rng.IntN(300)
		if i%50 == 7 {
			n = 3000 // larger than a segment: gets a segment sized to fit
		}
		want = append(want, mustAppend(t, w, byte(i), payload(i, n)))
	}
	checkReadAt(t, w, want)
	segs := 0
	for _, name := range fs.Names() {
		if strings.HasSuffix(name, ".wal") {
			segs++
		}
	}
	if segs < 50 {
		t.Fatalf("only %d segments for ~60 KB of records in 1 KiB segments", segs)
	}
	// A read across the end of a segment's records is refused.
	last := want[len(want)-1]
	if err := w.ReadAt(make([]byte, len(last.payload)+1), last.pos); !errors.Is(err, wal.ErrOutOfRange) {
		t.Fatalf("ReadAt past the end: %v", err)
	}
	if err := w.ReadAt(make([]byte, 1), 3); !errors.Is(err, wal.ErrOutOfRange) {
		t.Fatalf("ReadAt in a segment header: %v", err)
	}

	w, got, info := reopen(t, w, cfg)
	sameRecords(t, got, want)
	if info.Torn {
		t.Fatalf("replay across segments reported %+v", info)
	}
	checkReadAt(t, w, want)
}

func TestTrimBefore(t *testing.T) {
	fs := waltest.NewMemFS()
	cfg := memConfig(fs)
	cfg.SegmentSize = 512
	w, _, _ := openWAL(t, cfg)
	var recs []record
	for i := range 100 {
		recs = append(recs, mustAppend(t, w, 1, payload(i, 100)))
	}
	cut := recs[60].pos
	point := w.TrimPoint(cut)
	if point > cut || point <= w.Start() {
		t.Fatalf("TrimPoint(%d) = %d with start %d", cut, point, w.Start())
	}
	removed, err := w.TrimBefore(cut)
	if err != nil || len(removed) == 0 {
		t.Fatalf("TrimBefore: %v, removed %v", err, removed)
	}
	for _, p := range removed {
		if _, err := fs.OpenFile(p, os.O_RDONLY, 0); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s still exists", p)
		}
	}
	if w.Start() > cut || w.Start() != point {
		t.Fatalf("Start %d after trimming before %d; TrimPoint said %d", w.Start(), cut, point)
	}
	checkReadAt(t, w, recs[60:])
	if err := w.ReadAt(make([]byte, 10), recs[0].pos); !errors.Is(err, wal.ErrOutOfRange) {
		t.Fatalf("ReadAt of a trimmed record: %v", err)
	}
	// A trim past everything keeps the active segment.
	if _, err := w.TrimBefore(1 << 40); err != nil {
		t.Fatal(err)
	}
	checkReadAt(t, w, recs[len(recs)-1:])

	_, got, info := reopen(t, w, cfg)
	if info.Torn || len(got) == 0 || got[len(got)-1].pos != recs[len(recs)-1].pos {
		t.Fatalf("replay after trim: %d records, %+v", len(got), info)
	}
}

func TestLifecycleErrors(t *testing.T) {
	fs := waltest.NewMemFS()
	cfg := memConfig(fs)
	w, err := wal.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.AppendSync(context.Background(), 1, []byte("x")); !errors.Is(err, wal.ErrNotReplayed) {
		t.Fatalf("append before Replay: %v", err)
	}
	if _, err := w.Replay(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Replay(nil); err == nil {
		t.Fatal("second Replay succeeded")
	}
	r := mustAppend(t, w, 1, []byte("x"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := w.AppendSync(context.Background(), 1, []byte("y")); !errors.Is(err, wal.ErrClosed) {
		t.Fatalf("append after Close: %v", err)
	}
	if err := w.ReadAt(make([]byte, 1), r.pos); !errors.Is(err, wal.ErrClosed) {
		t.Fatalf("ReadAt after Close: %v", err)
	}
	if _, err := w.Replay(nil); !errors.Is(err, wal.ErrClosed) {
		t.Fatalf("Replay after Close: %v", err)
	}
	for _, name := range fs.Names() {
		if strings.HasSuffix(name, ".tmp") {
			t.Fatalf("Close left %s behind", name)
		}
	}
}

func TestReplayCallbackError(t *testing.T) {
	fs := waltest.NewMemFS()
	cfg := memConfig(fs)
	w, _, _ := openWAL(t, cfg)
	for i := range 5 {
		mustAppend(t, w, 1, payload(i, 10))
	}
	w.Close()
	w2, err := wal.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	stop := errors.New("stop")
	n := 0
	if _, err := w2.Replay(func(byte, []byte, wal.Pos) error {
		n++
		if n == 3 {
			return stop
		}
		return nil
	}); !errors.Is(err, stop) {
		t.Fatalf("Replay: %v, want the callback's error", err)
	}
	w2.Close()
	// The log was not touched.
	_, got, _ := openWAL(t, cfg)
	if len(got) != 5 {
		t.Fatalf("%d records after an aborted replay, want 5", len(got))
	}
}

func TestTooLarge(t *testing.T) {
	cfg := memConfig(waltest.NewMemFS())
	cfg.MaxRecordSize = 100
	w, _, _ := openWAL(t, cfg)
	if _, err := w.AppendSync(context.Background(), 1, make([]byte, 101)); !errors.Is(err, wal.ErrTooLarge) {
		t.Fatalf("101 bytes: %v", err)
	}
	mustAppend(t, w, 1, make([]byte, 100))
}

func TestAppendSyncContext(t *testing.T) {
	fs := waltest.NewFaultFS(waltest.NewMemFS())
	cfg := memConfig(fs)
	w, _, _ := openWAL(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := w.AppendSync(ctx, 1, []byte("x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled ctx: %v", err)
	}

	// An entry still queued (the committer held in a stalled write) is abandoned when
	// its ctx ends, and never written. (Behind a stalled sync it would not stay queued:
	// the committer writes the next groups while a sync runs, and an entry written is
	// answered only by its sync. The test stalled the sync before the pipeline was
	// deepened and hung when the committer took the entry before the cancel.)
	stalled, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	fs.SetHook(func(op waltest.Op, name string, _ int64, _ int) error {
		if op == waltest.OpWrite && strings.HasSuffix(name, ".wal") {
			once.Do(func() { close(stalled); <-release })
		}
		return nil
	})
	first := make(chan error, 1)
	go func() {
		_, err := w.AppendSync(context.Background(), 1, []byte("first"))
		first <- err
	}()
	<-stalled
	ctx, cancel = context.WithCancel(context.Background())
	second := make(chan error, 1)
	go func() {
		_, err := w.AppendSync(ctx, 2, []byte("second"))
		second <- err
	}()
	testutil.Eventually(t, 30*time.Second, "the second entry queued", func() bool { return w.Queued() == 1 })
	cancel()
	if err := <-second; !errors.Is(err, context.Canceled) {
		t.Fatalf("second: %v", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("first: %v", err)
	}
	mustAppend(t, w, 3, []byte("third"))
	_, got, _ := reopen(t, w, cfg)
	if len(got) != 2 || got[0].typ != 1 || got[1].typ != 3 {
		t.Fatalf("replayed %v; the abandoned entry must not be written", got)
	}
}

func TestBackpressure(t *testing.T) {
	fs := waltest.NewFaultFS(waltest.NewMemFS())
	cfg := memConfig(fs)
	cfg.QueueDepth = 2
	w, _, _ := openWAL(t, cfg)
	stalled, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	fs.SetHook(func(op waltest.Op, name string, _ int64, _ int) error {
		if op == waltest.OpSync && strings.HasSuffix(name, ".wal") {
			once.Do(func() { close(stalled); <-release })
		}
		return nil
	})
	var wg sync.WaitGroup
	done := func(wal.Pos, error) { wg.Done() }
	wg.Add(2 + wal.PipeDepth) // a, the b's, c, d
	w.Append(wal.Entry{Type: 1, Payload: []byte("a"), Done: done})
	<-stalled // "a" is being synced; the queue is empty
	// While "a" syncs, each entry appended alone is taken and written as a group of
	// its own (pipelining) until PipeDepth groups are in flight; then the committer
	// waits for the syncer, so "c" and "d" stay queued.
	for i := 1; i < wal.PipeDepth; i++ {
		w.Append(wal.Entry{Type: 1, Payload: []byte("b"), Done: done})
		testutil.Eventually(t, 30*time.Second, `"b" written while "a" syncs`, func() bool {
			return fs.Count(waltest.OpWrite, ".wal") >= int64(1+i)
		})
	}
	w.Append(wal.Entry{Type: 1, Payload: []byte("c"), Done: done})
	w.Append(wal.Entry{Type: 1, Payload: []byte("d"), Done: done})
	returned := make(chan struct{})
	wg.Add(1)
	go func() {
		w.Append(wal.Entry{Type: 1, Payload: []byte("e"), Done: done})
		close(returned)
	}()
	// The queue is full until the sync returns. (This check cannot fail
	// spuriously: a correct WAL keeps the Append blocked however long we wait.)
	select {
	case <-returned:
		close(release)
		t.Fatal("Append returned while QueueDepth entries were queued")
	case <-waitABit():
	}
	close(release)
	<-returned
	wg.Wait()
}

func TestMetrics(t *testing.T) {
	reg := newRegistry()
	cfg := memConfig(waltest.NewMemFS())
	cfg.SegmentSize = 1024
	cfg.Registerer = reg
	w, _, _ := openWAL(t, cfg)
	if _, err := wal.Open(cfg); err == nil {
		t.Fatal("a second WAL registered the same metrics")
	}
	for i := range 20 {
		mustAppend(t, w, 1, payload(i, 100))
	}
	if _, err := w.AppendSync(context.Background(), 1, make([]byte, 2000)); err != nil {
		t.Fatal(err) // allowed by cfg; just a big record
	}
	m := gather(t, reg)
	checks := map[string]float64{
		"weir_wal_appends_total":         21,
		"weir_wal_append_errors_total":   0,
		"weir_wal_bytes_written_total":   20*109 + 2009,
		"weir_wal_syncs_total":           21,
		"weir_wal_group_commit_entries":  21, // sample count
		"weir_wal_group_commit_bytes":    21,
		"weir_wal_sync_duration_seconds": 21,
	}
	for name, want := range checks {
		if got, ok := m[name]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", name, got, ok, want)
		}
	}
	if m["weir_wal_segments"] < 3 {
		t.Errorf("weir_wal_segments = %v, want at least 3", m["weir_wal_segments"])
	}
	w.Close()
	// Close unregisters, so the next WAL can use the same registry.
	w2, err := wal.Open(cfg)
	if err != nil {
		t.Fatalf("reopen with the same registry: %v", err)
	}
	w2.Close()
}

func TestConfigValidate(t *testing.T) {
	if err := wal.DefaultConfig("/x").Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*wal.Config){
		"no dir":       func(c *wal.Config) { c.Dir = "" },
		"tiny segment": func(c *wal.Config) { c.SegmentSize = 10 },
		"negative":     func(c *wal.Config) { c.QueueDepth = -1 },
		"huge records": func(c *wal.Config) { c.MaxRecordSize = 1 << 31 },
		"negative grp": func(c *wal.Config) { c.MaxGroupBytes = -5 },
	} {
		c := wal.DefaultConfig("/x")
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, c)
		}
		if _, err := wal.Open(c); err == nil {
			t.Errorf("%s: Open accepted an invalid config", name)
		}
	}
}

// TestCrashKeepsAckedRecords cuts the power (MemFS.CrashClone) at many points
// while appends run: every record acked before the crash must survive, and
// what survives must be a prefix of the log.
func TestCrashKeepsAckedRecords(t *testing.T) {
	fs := waltest.NewMemFS()
	cfg := memConfig(fs)
	cfg.SegmentSize = 2048
	w, _, _ := openWAL(t, cfg)

	type crash struct {
		fs    *waltest.MemFS
		acked []record
	}
	var mu sync.Mutex
	var acked []record // acked records, in ack order
	var crashes []crash
	var appenders sync.WaitGroup
	for g := range 4 {
		appenders.Add(1)
		go func() {
			defer appenders.Done()
			for i := range 60 {
				p := payload(g*1000+i, 50+i)
				pos, err := w.AppendSync(context.Background(), byte(g), p)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				acked = append(acked, record{byte(g), p, pos})
				mu.Unlock()
				if g == 0 {
					// Cut the power while the other goroutines keep appending.
					mu.Lock()
					a := append([]record(nil), acked...)
					mu.Unlock()
					c := fs.CrashClone()
					mu.Lock()
					crashes = append(crashes, crash{c, a})
					mu.Unlock()
				}
			}
		}()
	}
	appenders.Wait()
	for i, c := range crashes {
		ccfg := memConfig(c.fs)
		ccfg.SegmentSize = cfg.SegmentSize
		w2, err := wal.Open(ccfg)
		if err != nil {
			t.Fatal(err)
		}
		var got []record
		if _, err := w2.Replay(func(typ byte, p []byte, pos wal.Pos) error {
			got = append(got, record{typ, bytes.Clone(p), pos})
			return nil
		}); err != nil {
			t.Fatalf("crash %d: %v", i, err)
		}
		w2.Close()
		byPos := map[wal.Pos]record{}
		for j, r := range got {
			if j > 0 && r.pos <= got[j-1].pos {
				t.Fatalf("crash %d: positions not increasing", i)
			}
			byPos[r.pos] = r
		}
		for _, a := range c.acked {
			r, ok := byPos[a.pos]
			if !ok || r.typ != a.typ || !bytes.Equal(r.payload, a.payload) {
				t.Fatalf("crash %d: acked record at %d lost (replayed %d records, %d acked)", i, a.pos, len(got), len(c.acked))
			}
		}
	}
	t.Logf("%d crash points checked", len(crashes))
}

// TestOSFS runs the WAL on the real file system: preallocation, rolls,
// replay and the files left on disk.
func TestOSFS(t *testing.T) {
	dir := t.TempDir()
	cfg := wal.DefaultConfig(dir)
	cfg.SegmentSize = 256 << 10
	w, _, _ := openWAL(t, cfg)
	var want []record
	for i := range 300 {
		want = append(want, mustAppend(t, w, byte(i), payload(i, 2000)))
	}
	checkReadAt(t, w, want)
	w, got, info := reopen(t, w, cfg)
	sameRecords(t, got, want)
	if info.Torn {
		t.Fatalf("%+v", info)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var segs []string
	for _, e := range entries {
		if filepath.Ext(e.Name()) == ".wal" {
			segs = append(segs, e.Name())
		}
	}
	if len(segs) < 3 {
		t.Fatalf("segments on disk: %v", segs)
	}
	// Preallocated: the active segment has its full size on disk already.
	st, err := os.Stat(filepath.Join(dir, segs[len(segs)-1]))
	if err != nil || st.Size() != cfg.SegmentSize {
		t.Fatalf("active segment size %v, %v; want %d", st.Size(), err, cfg.SegmentSize)
	}
	w.Close()
}
