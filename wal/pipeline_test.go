package wal_test

import (
	"strings"
	"testing"
	"time"

	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/wal"
	"github.com/weir-io/weir/wal/waltest"
)

// The committer writes the next group while the previous group's fdatasync is in flight,
// but an entry is acked only after a sync that started after its own write returned: a
// sync of the previous group does not cover it.
func TestPipelinedAckFollowsItsOwnSync(t *testing.T) {
	fs := waltest.NewFaultFS(waltest.NewMemFS())
	w, _, _ := openWAL(t, memConfig(fs))
	syncing := make(chan int, 4)      // the number of each segment sync, as it starts
	release := make(chan struct{}, 4) // one token lets one stalled sync return
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) }) // runs before the WAL's Close: no sync stays stalled
	n := 0
	fs.SetHook(func(op waltest.Op, name string, _ int64, _ int) error {
		if op == waltest.OpSync && strings.HasSuffix(name, ".wal") {
			n++ // syncs of the WAL's segments run one at a time
			select {
			case syncing <- n:
			default:
			}
			select {
			case <-release:
			case <-stop:
			}
		}
		return nil
	})
	type outcome struct {
		id  int
		pos wal.Pos
		err error
	}
	acks := make(chan outcome, 16) // room for a broken WAL's extra Done calls
	appendOne := func(id int) {
		w.Append(wal.Entry{Type: 1, Payload: payload(id, 100), Done: func(pos wal.Pos, err error) {
			acks <- outcome{id, pos, err}
		}})
	}
	noAck := func(when string) {
		t.Helper()
		select {
		case a := <-acks:
			t.Fatalf("%s: entry %d acked (err %v) before the sync covering it returned", when, a.id, a.err)
		case <-waitABit():
		}
	}
	writes := fs.Count(waltest.OpWrite, ".wal")

	appendOne(0)
	if got := <-syncing; got != 1 {
		t.Fatalf("sync %d, want 1", got)
	}
	// Entry 0's sync is stalled: entries 1 and 2 are written meanwhile, but acked by
	// no one until a sync that started after their write returns.
	appendOne(1)
	appendOne(2)
	testutil.Eventually(t, 30*time.Second, "the next group written while the previous sync is in flight", func() bool {
		return fs.Count(waltest.OpWrite, ".wal") >= writes+2
	})
	noAck("first sync stalled")

	release <- struct{}{} // sync 1 returns: it covers entry 0 only
	if a := <-acks; a.id != 0 || a.err != nil {
		t.Fatalf("first ack: entry %d, err %v; want entry 0", a.id, a.err)
	}
	select {
	case got := <-syncing:
		if got != 2 {
			t.Fatalf("sync %d, want 2", got)
		}
	case a := <-acks:
		t.Fatalf("entry %d acked (err %v) before a sync that started after its write", a.id, a.err)
	}
	// Entries 1 and 2 were written while sync 1 was in flight: sync 1's return must
	// not ack them, only sync 2 (stalled now) may.
	noAck("second sync stalled")
	endBefore := w.End()

	release <- struct{}{}
	release <- struct{}{} // in case entries 1 and 2 went into two groups
	got := map[int]wal.Pos{}
	for range 2 {
		a := <-acks
		if a.err != nil {
			t.Fatalf("entry %d: %v", a.id, a.err)
		}
		got[a.id] = a.pos
	}
	if got[1] >= got[2] || got[1] < endBefore {
		t.Fatalf("positions %v; End was %d before their sync: they were readable before it", got, endBefore)
	}
	checkReadAt(t, w, []record{{1, payload(1, 100), got[1]}, {1, payload(2, 100), got[2]}})
}
