package wal_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-io/weir/wal"
	"github.com/weir-io/weir/wal/waltest"
)

// The tests in this file run owners, takers and readers as separate hosts: each has its
// own waltest.StaleFS (an NFS client's cache) over one MemFS (the server).

// segmentHeader is a valid segment header for base, as doc.go draws it.
func segmentHeader(base wal.Pos) []byte {
	h := make([]byte, wal.HeaderSize)
	copy(h, "WEIR-WAL")
	binary.LittleEndian.PutUint32(h[8:12], wal.FormatVersion)
	binary.LittleEndian.PutUint64(h[12:20], uint64(base))
	binary.LittleEndian.PutUint32(h[20:24], crc32.Checksum(h[:20], crc32.MakeTable(crc32.Castagnoli)))
	return h
}

// lateSegment creates, directly on fs, a segment at base holding one valid record: what
// a late writer could still add to a sealed directory.
func lateSegment(t *testing.T, fs wal.FS, base wal.Pos, p []byte) {
	t.Helper()
	f, err := fs.OpenFile(filepath.Join(testDir, fmt.Sprintf("%020d.wal", base)), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(wal.AppendRecord(segmentHeader(base), 9, p), 0); err != nil {
		t.Fatal(err)
	}
	f.Sync()
}

// recordsIn decodes the records of a segment through an open descriptor, as a reader
// that trusts it would.
func recordsIn(t *testing.T, f wal.File) int {
	t.Helper()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	rd := wal.NewReader(io.NewSectionReader(f, wal.HeaderSize, st.Size()-wal.HeaderSize), st.Size()-wal.HeaderSize)
	n := 0
	for {
		if _, _, err := rd.Next(); err != nil {
			return n
		}
		n++
	}
}

// The hazard is real: a reader that keeps a segment open (no fresh open) does not see
// records the owner synced after it looked, whether the file grew (no preallocation) or
// not (preallocated: only the pages it cached are stale). A fresh open sees them, and so
// does ReadOnly.Scan, which opens afresh each time; ReadAt then reads the new bytes.
func TestStaleReaderMissesSyncedRecords(t *testing.T) {
	for _, prealloc := range []bool{false, true} {
		t.Run(fmt.Sprintf("prealloc=%v", prealloc), func(t *testing.T) {
			server := waltest.NewMemFS()
			owner := waltest.NewStaleFS(server)
			reader := waltest.NewStaleFS(server)
			cfg := fencedConfig(owner)
			cfg.Preallocate = prealloc
			w, _, _ := openWAL(t, cfg)
			var recs []record
			for i := range 3 {
				recs = append(recs, mustAppend(t, w, 1, payload(i, 100)))
			}
			ro, err := wal.OpenReadOnly(testDir, reader)
			if err != nil {
				t.Fatal(err)
			}
			defer ro.Close()
			seg := filepath.Join(testDir, fmt.Sprintf("%020d.wal", 0))
			held, err := reader.OpenFile(seg, os.O_RDONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer held.Close()
			if n := recordsIn(t, held); n != 3 {
				t.Fatalf("reader sees %d records, want 3", n)
			}

			for i := 3; i < 6; i++ {
				recs = append(recs, mustAppend(t, w, 1, payload(i, 100)))
			}
			if n := recordsIn(t, held); n != 3 {
				t.Fatalf("a descriptor held open sees %d records: StaleFS does not model the stale cache", n)
			}
			fresh, err := reader.OpenFile(seg, os.O_RDONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if n := recordsIn(t, fresh); n != 6 {
				t.Fatalf("a fresh open sees %d records, want 6", n)
			}
			fresh.Close()

			for i := 6; i < 9; i++ {
				recs = append(recs, mustAppend(t, w, 1, payload(i, 100)))
			}
			var got []record
			end, err := ro.Scan(func(typ byte, p []byte, pos wal.Pos) error {
				got = append(got, record{typ, bytes.Clone(p), pos})
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			sameRecords(t, got, recs)
			if end != w.End() {
				t.Fatalf("scan end %d, owner %d", end, w.End())
			}
			// ReadAt keeps descriptors opened before, but the scan's fresh opens
			// revalidated this client's cache of the files: below its end, bytes are right.
			for _, r := range recs {
				p := make([]byte, len(r.payload))
				if err := ro.ReadAt(p, r.pos); err != nil || !bytes.Equal(p, r.payload) {
					t.Fatalf("ReadAt %d after Scan: %v", r.pos, err)
				}
			}
		})
	}
}

// The owner checks its token through its own client, whose cache held FENCE before a
// taker on another host fenced it: the check's fresh open sees the new token, where a
// descriptor the owner kept open would not have.
func TestFenceCheckSeesTakerThroughStaleFS(t *testing.T) {
	server := waltest.NewMemFS()
	owner := waltest.NewStaleFS(server)
	taker := waltest.NewStaleFS(server)
	w, _, _ := openWAL(t, fencedConfig(owner))
	ok := mustAppend(t, w, 1, []byte("acked"))
	held, err := owner.OpenFile(filepath.Join(testDir, wal.FenceFile), os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	b := make([]byte, wal.FenceRecordSize)
	held.ReadAt(b, 0)

	if err := wal.Fence(taker, testDir, "taker"); err != nil {
		t.Fatal(err)
	}
	held.ReadAt(b, 0)
	if !bytes.Equal(b, make([]byte, wal.FenceRecordSize)) {
		t.Fatal("the held descriptor sees the fence: StaleFS does not model the stale cache")
	}
	if _, err := w.AppendSync(context.Background(), 1, []byte("x")); !errors.Is(err, wal.ErrFenced) {
		t.Fatalf("owner append after the taker's fence: %v, want ErrFenced", err)
	}
	checkReadAt(t, w, []record{ok})
}

// Seal through a client whose listing and pages are stale still sees every record the
// owner synced through another client, across segments created after the taker looked.
func TestSealSeesOwnerThroughStaleFS(t *testing.T) {
	server := waltest.NewMemFS()
	owner := waltest.NewStaleFS(server)
	taker := waltest.NewStaleFS(server)
	taker.SetStaleDirs(true)
	cfg := fencedConfig(owner)
	cfg.SegmentSize = 1024
	w, _, _ := openWAL(t, cfg)
	var recs []record
	for i := range 5 {
		recs = append(recs, mustAppend(t, w, 1, payload(i, 60)))
	}
	// The taker looks early: its listing shows one segment, its cache the first pages.
	early, end := scanAll(t, taker, testDir)
	sameRecords(t, early, recs)
	for i := 5; i < 80; i++ {
		recs = append(recs, mustAppend(t, w, 1, payload(i, 60)))
	}
	if len(segmentNames(server)) < 4 {
		t.Fatalf("segments %v", segmentNames(server))
	}
	if ents, _ := taker.ReadDir(testDir); len(ents) > 3 {
		t.Fatalf("the taker's listing is not stale: %d entries", len(ents))
	}
	info, err := wal.Seal(taker, testDir, "taker")
	if err != nil {
		t.Fatal(err)
	}
	if info.End != w.End() || info.Records != int64(len(recs)) || info.End <= end {
		t.Fatalf("seal %+v, owner end %d, %d records", info, w.End(), len(recs))
	}
	got, sealedEnd := scanAll(t, taker, testDir)
	sameRecords(t, got, recs)
	if sealedEnd != info.End {
		t.Fatalf("sealed scan end %d, seal %d", sealedEnd, info.End)
	}
}

// A fenced owner that still writes after the seal (bytes after End in the last
// segment, a new segment at End) is never read by a ReadOnly of the sealed directory,
// whether it was opened before or after the seal.
func TestSealedLateWriteNeverRead(t *testing.T) {
	server := waltest.NewMemFS()
	owner := waltest.NewStaleFS(server)
	w, recs := ownedLog(t, owner, 40)
	before, err := wal.OpenReadOnly(testDir, waltest.NewStaleFS(server))
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close()
	if _, err := before.Scan(func(byte, []byte, wal.Pos) error { return nil }); err != nil {
		t.Fatal(err)
	}
	info, err := wal.Seal(waltest.NewStaleFS(server), testDir, "taker")
	if err != nil {
		t.Fatal(err)
	}
	if info.End != w.End() {
		t.Fatalf("seal end %d, owner %d", info.End, w.End())
	}

	// The late writes, made directly on the server.
	last := filepath.Join(testDir, fmt.Sprintf("%020d.wal", info.LastSegment))
	f, err := server.OpenFile(last, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	late := wal.AppendRecord(nil, 9, []byte("late record after the seal"))
	f.WriteAt(late, int64(info.End-info.LastSegment))
	f.Sync()
	f.Close()
	lateSegment(t, server, info.End, []byte("late segment"))
	latePos := info.End + wal.RecordHeaderSize

	for name, r := range map[string]*wal.ReadOnly{"opened before the seal": before, "opened after": nil} {
		if r == nil {
			if r, err = wal.OpenReadOnly(testDir, waltest.NewStaleFS(server)); err != nil {
				t.Fatal(err)
			}
			defer r.Close()
		}
		var got []record
		end, err := r.Scan(func(typ byte, p []byte, pos wal.Pos) error {
			got = append(got, record{typ, bytes.Clone(p), pos})
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		sameRecords(t, got, recs)
		if end != info.End {
			t.Fatalf("%s: end %d, seal %d", name, end, info.End)
		}
		if s, ok := r.Sealed(); !ok || s != info {
			t.Fatalf("%s: Sealed %+v %v", name, s, ok)
		}
		p := make([]byte, 4)
		if err := r.ReadAt(p, latePos); !errors.Is(err, wal.ErrOutOfRange) {
			t.Fatalf("%s: ReadAt of the late record: %v, want ErrOutOfRange", name, err)
		}
		last := recs[len(recs)-1]
		if err := r.ReadAt(make([]byte, len(last.payload)+1), last.pos); !errors.Is(err, wal.ErrOutOfRange) {
			t.Fatalf("%s: ReadAt across the seal: %v, want ErrOutOfRange", name, err)
		}
		p = make([]byte, len(last.payload))
		if err := r.ReadAt(p, last.pos); err != nil || !bytes.Equal(p, last.payload) {
			t.Fatalf("%s: ReadAt of the last sealed record: %v", name, err)
		}
	}
}

// TestFenceSealProperty runs an owner and a taker on two hosts over one server, many
// times with random timing: the owner acks groups (Done without error) while the taker
// seals at a random moment. It checks the fencing guarantee:
//
//   - the owner acks no group whose write started after the taker's fence record reached
//     the server (so no group whose fence check started after it);
//   - every acked record lies below the seal's End and a Scan of the sealed directory (on
//     a third host) returns it, at its position, with its bytes.
//
// Without the fence check in the commit path this test fails.
func TestFenceSealProperty(t *testing.T) {
	rounds := 200
	if testing.Short() {
		rounds = 40
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	cut := 0
	for round := range rounds {
		if fenceSealRound(t, rng, round) {
			cut++
		}
		if t.Failed() {
			t.Fatalf("round %d failed (seed %d)", round, seed)
		}
	}
	// Rounds where the owner was still appending when the fence landed are the ones
	// that test the check; the others test the seal.
	t.Logf("%d of %d rounds: the fence stopped a running owner", cut, rounds)
	if cut < rounds/4 {
		t.Fatalf("only %d of %d rounds fenced a running owner", cut, rounds)
	}
}

type groupWrite struct {
	from, to wal.Pos
	at       int64
}

type ack struct {
	record
	write int64 // logical time the committer started writing its group
}

// fenceSealRound runs one round and reports whether the fence failed some appends.
func fenceSealRound(t *testing.T, rng *rand.Rand, round int) bool {
	server := waltest.NewMemFS()
	var clock atomic.Int64
	// The logical time each group write started, by log position: the next group is
	// written while the previous one syncs, so an ack finds its own group's write.
	var wmu sync.Mutex
	var writes []groupWrite
	writeTime := func(pos wal.Pos) int64 {
		wmu.Lock()
		defer wmu.Unlock()
		for i := len(writes) - 1; i >= 0; i-- {
			if g := writes[i]; pos >= g.from && pos < g.to {
				return g.at
			}
		}
		return math.MaxInt64 // no write found: fails the check below
	}
	owner := waltest.NewFaultFS(waltest.NewStaleFS(server))
	owner.SetHook(func(op waltest.Op, name string, off int64, n int) error {
		if op == waltest.OpWrite && filepath.Ext(name) == ".wal" {
			base, err := strconv.ParseInt(strings.TrimSuffix(filepath.Base(name), ".wal"), 10, 64)
			if err != nil {
				t.Errorf("segment name %s: %v", name, err)
			}
			wmu.Lock()
			writes = append(writes, groupWrite{wal.Pos(base + off), wal.Pos(base + off + int64(n)), clock.Add(1)})
			wmu.Unlock()
		}
		return nil
	})
	takerStale := waltest.NewStaleFS(server)
	taker := waltest.NewFaultFS(takerStale)
	var fencedAt atomic.Int64 // logical time the taker's fence record was on the server
	taker.SetHook(func(op waltest.Op, name string, _ int64, _ int) error {
		// Fence syncs FENCE, closes it, then syncs the directory: by then the fence
		// record is on the server.
		if op == waltest.OpSyncDir && fencedAt.Load() == 0 {
			fencedAt.Store(clock.Add(1))
		}
		return nil
	})

	cfg := fencedConfig(owner)
	cfg.SegmentSize = int64(256 + rng.IntN(2048))
	cfg.MaxGroupBytes = 64 + rng.IntN(1024)
	cfg.Preallocate = rng.IntN(2) == 0
	w, err := wal.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Replay(nil); err != nil {
		t.Fatal(err)
	}
	if rng.IntN(2) == 0 {
		takerStale.SetStaleDirs(true)
		takerStale.ReadDir(testDir) // the listing the taker will keep seeing
	}

	appenders, perAppender := 1+rng.IntN(4), 10+rng.IntN(40)
	total := appenders * perAppender
	sealAfter := rng.IntN(total * 2 / 3)
	var mu sync.Mutex
	var acks []ack
	var failures []error
	acked := make(chan struct{}, total)
	sizes := make([]int, total) // rng is not for the appenders' goroutines
	for i := range sizes {
		sizes[i] = 1 + rng.IntN(120)
	}
	var wg sync.WaitGroup
	for a := range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perAppender {
				p := payload(round*1000+a*100+i, sizes[a*perAppender+i])
				done := make(chan error, 1)
				w.Append(wal.Entry{Type: byte(a), Payload: p, Done: func(pos wal.Pos, err error) {
					// Runs on the syncer right after the group's fence check.
					mu.Lock()
					if err == nil {
						acks = append(acks, ack{record{byte(a), p, pos}, writeTime(pos)})
					} else {
						failures = append(failures, err)
					}
					mu.Unlock()
					done <- err
				}})
				if err := <-done; err != nil {
					return
				}
				acked <- struct{}{}
			}
		}()
	}
	for range sealAfter {
		<-acked
	}
	if d := rng.IntN(4); d > 0 {
		// on purpose: a random head start for the appenders, so the seal lands at varied points
		time.Sleep(time.Duration(rng.IntN(300*d)) * time.Microsecond)
	}
	info, err := wal.Seal(taker, testDir, "taker")
	if err != nil {
		t.Fatalf("round %d: Seal: %v", round, err)
	}
	wg.Wait()

	fence := fencedAt.Load()
	mu.Lock()
	defer mu.Unlock()
	for _, err := range failures {
		if !errors.Is(err, wal.ErrFenced) {
			t.Fatalf("round %d: append failed with %v, want ErrFenced", round, err)
		}
	}
	byPos := map[wal.Pos]record{}
	got, end := scanAll(t, waltest.NewStaleFS(server), testDir)
	for _, r := range got {
		byPos[r.pos] = r
	}
	if end != info.End {
		t.Fatalf("round %d: sealed scan ends at %d, seal %d", round, end, info.End)
	}
	for _, a := range acks {
		if a.write > fence {
			t.Fatalf("round %d: acked a group written at %d, after the fence reached the server at %d (%d acks, seal %+v)",
				round, a.write, fence, len(acks), info)
		}
		if a.pos+wal.Pos(len(a.payload)) > info.End {
			t.Fatalf("round %d: acked record at %d ends after the seal's end %d", round, a.pos, info.End)
		}
		r, ok := byPos[a.pos]
		if !ok || r.typ != a.typ || !bytes.Equal(r.payload, a.payload) {
			t.Fatalf("round %d: acked record at %d is not in the sealed directory (%d records scanned)", round, a.pos, len(got))
		}
	}
	return len(failures) > 0
}
