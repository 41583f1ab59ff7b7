package partlog

import (
	"bytes"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-io/weir/internal/kafkatest"
	"github.com/weir-io/weir/internal/kcode"
	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/metadata"
)

// A read replica follows the leader's index: it serves exactly what the leader had
// synced below its high watermark, reads the bytes where the entries say, answers
// OffsetForLeaderEpoch from the leader's epochs, and starts over when an answer does not
// continue its index.
func TestReplicaFollowsLeaderIndex(t *testing.T) {
	leader, log := ready(t), &memLog{}
	leader.UseOwn(log, SourceID{Broker: 1, Epoch: 4})
	for _, n := range []int{2, 1, 3} {
		if _, err := appendSynced(t, leader, log, -1, -1, -1, n); err != nil {
			t.Fatal(err)
		}
	}
	// An unsynced batch at the tail is not sent.
	b := []byte(nil)
	{
		vals := [][]byte{{1}}
		b = batchOf(t, vals)
		h, _ := recbatch.ValidateProduce(b, 0)
		if _, err := leader.Prepare(&h, b, -1); err != nil {
			t.Fatal(err)
		}
	}
	es, st, err := leader.Entries(0, 100)
	if err != nil || len(es) != 3 || st.HW != 6 || st.LeaderEpoch != 3 {
		t.Fatalf("entries: %d, state %+v, %v", len(es), st, err)
	}
	if es[1].Base != 2 || es[1].From != (SourceID{1, 4}) || es[1].CRC == 0 {
		t.Fatalf("entry 1: %+v", es[1])
	}
	if es2, _, _ := leader.Entries(3, 100); len(es2) != 1 || es2[0].Base != 3 {
		t.Fatalf("entries from 3 (inside the last batch): %+v", es2)
	}

	rep := New("t", metadata.TopicID{1}, 0, 0, 0)
	if rep.FollowFrom() != 0 {
		t.Fatalf("a new replica asks from %d", rep.FollowFrom())
	}
	readers := func(SourceID) Reader { return log }
	if !rep.Follow(es[:2], st, readers) || rep.State() != Following {
		t.Fatal("the first answer did not make the replica follow")
	}
	if _, hw := rep.Offsets(); hw != 3 {
		t.Fatalf("replica high watermark %d after two batches, want 3 (its own end, below the leader's 6)", hw)
	}
	if rep.FollowFrom() != 3 {
		t.Fatalf("replica asks from %d, want 3", rep.FollowFrom())
	}
	rep.Follow(es[2:], st, readers)
	pieces, hw, _, err := rep.Read(0, 1<<20, true, -1)
	if err != nil || hw != 6 || len(pieces) != 3 {
		t.Fatalf("replica read: %d pieces hw %d %v", len(pieces), hw, err)
	}
	buf := make([]byte, pieces[2].Size)
	if err := pieces[2].Src.ReadAt(buf, pieces[2].Pos); err != nil {
		t.Fatal(err)
	}
	if h, _ := recbatch.Parse(buf); h.BaseOffset != 3 {
		t.Fatalf("third batch read at base %d", h.BaseOffset)
	}
	if e, end := rep.EndOffsetForEpoch(3); e != 3 || end != 6 {
		t.Fatalf("replica's end of epoch 3: %d %d", e, end)
	}
	// Past its high watermark a replica is behind (a fetch waits it out; answered as
	// OFFSET_OUT_OF_RANGE if it stays so); a leader's log simply ends there.
	if _, _, _, err := rep.Read(7, 1<<20, true, -1); !errors.Is(err, ErrReplicaBehind) || !kcode.WaitsOut(err) {
		t.Fatalf("read past the replica's high watermark: %v, want ErrReplicaBehind", err)
	}
	if _, _, _, err := leader.Read(7, 1<<20, true, -1); !errors.Is(err, ErrOffsetOutOfRange) || kcode.WaitsOut(err) {
		t.Fatalf("read past the leader's high watermark: %v, want ErrOffsetOutOfRange", err)
	}
	// An answer that does not continue the index resets the replica.
	rep.Follow(es[:1], st, readers)
	if rep.State() != Loading {
		t.Fatalf("after a discontinuous answer the replica is %v, want Loading", rep.State())
	}
	rep.Unfollow()
	if _, _, _, err := rep.Read(0, 1, true, -1); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("an unfollowed replica reads: %v", err)
	}
}

// A replica whose manifest ends below where the leader's index starts waits (the leader
// uploaded and dropped those entries; the replica's view shows the objects soon), and
// the leader says so when asked for offsets its index no longer holds.
func TestReplicaWaitsForManifest(t *testing.T) {
	leader, log := ready(t), &memLog{}
	for i := 0; i < 3; i++ {
		appendSynced(t, leader, log, -1, -1, -1, 1)
	}
	leader.mu.Lock()
	leader.batches = leader.batches[2:] // offsets 0 and 1 are in objects and dropped
	leader.mu.Unlock()
	if _, _, err := leader.Entries(0, 10); !errors.Is(err, ErrFollowGap) {
		t.Fatalf("entries below the index: %v", err)
	}
	es, st, err := leader.Entries(2, 10)
	if err != nil || len(es) != 1 {
		t.Fatal(err)
	}
	rep := New("t", metadata.TopicID{1}, 0, 0, 0)
	if rep.Follow(es, st, func(SourceID) Reader { return log }) || rep.State() != Loading {
		t.Fatal("a replica followed with a gap below the leader's index")
	}
}

func batchOf(t *testing.T, vals [][]byte) []byte {
	t.Helper()
	return kafkatest.Batch(-1, -1, -1, vals...)
}

// A read replica's batch read once from the WAL is kept (Cache.Fill) for the zone's next
// consumers, within the cache's bound; a leader's evicted batches and a cache of no
// bytes are never filled.
func TestReplicaReadsFilledIntoCache(t *testing.T) {
	leader, log := ready(t), &memLog{}
	leader.UseOwn(log, SourceID{Broker: 1, Epoch: 4})
	for i := 0; i < 3; i++ {
		if _, err := appendSynced(t, leader, log, -1, -1, -1, 2); err != nil {
			t.Fatal(err)
		}
	}
	es, st, err := leader.Entries(0, 100)
	if err != nil {
		t.Fatal(err)
	}
	rep := New("t", metadata.TopicID{1}, 0, 0, 0)
	rep.Follow(es, st, func(SourceID) Reader { return log })
	read := func(p *Partition) []Piece {
		pieces, _, _, err := p.Read(0, 1<<20, true, -1)
		if err != nil || len(pieces) != 3 {
			t.Fatalf("read: %d pieces, %v", len(pieces), err)
		}
		return pieces
	}
	size := int64(es[0].Size)
	c := NewCache(2 * size) // room for two batches
	if !c.Fills(rep) || c.Fills(leader) || NewCache(0).Fills(rep) {
		t.Fatal("Fills: want the replica's only, with a cache of some bytes")
	}
	for _, pc := range read(rep) {
		if pc.Data != nil {
			t.Fatal("a replica's batch in memory before any read")
		}
		buf := make([]byte, pc.Size)
		if err := pc.Src.ReadAt(buf, pc.Pos); err != nil {
			t.Fatal(err)
		}
		c.Fill(rep, pc, buf)
		c.Fill(rep, pc, buf) // a second fill of the same batch is not queued twice
	}
	pieces := read(rep)
	if pieces[0].Data != nil || pieces[1].Data == nil || pieces[2].Data == nil {
		t.Fatalf("after filling 3 batches into room for 2: in memory %v %v %v, want the last two",
			pieces[0].Data != nil, pieces[1].Data != nil, pieces[2].Data != nil)
	}
	if h, _ := recbatch.Parse(pieces[2].Data); h.BaseOffset != 4 {
		t.Fatalf("the cached third batch has base %d", h.BaseOffset)
	}
	if c.bytes != 2*size {
		t.Fatalf("cache holds %d bytes, want %d (each batch once)", c.bytes, 2*size)
	}
	// Wrong sizes and the leader's batches are not kept.
	lp := read(leader)
	leader.mu.Lock()
	for _, b := range leader.batches {
		b.data = nil // evicted from the leader's tail cache
	}
	leader.mu.Unlock()
	c.Fill(leader, lp[0], make([]byte, lp[0].Size))
	c.Fill(rep, pieces[0], make([]byte, 3))
	if read(leader)[0].Data != nil || read(rep)[0].Data != nil {
		t.Fatal("a leader's batch or bytes of the wrong size were kept")
	}
}

// Fetches that want a replica's batch together read it from the WAL once (Cache.Load):
// the others wait for those bytes; a failed read is not shared.
func TestReplicaConcurrentReadsLoadOnce(t *testing.T) {
	leader, log := ready(t), &memLog{}
	leader.UseOwn(log, SourceID{Broker: 1, Epoch: 4})
	if _, err := appendSynced(t, leader, log, -1, -1, -1, 2); err != nil {
		t.Fatal(err)
	}
	es, st, _ := leader.Entries(0, 100)
	rep := New("t", metadata.TopicID{1}, 0, 0, 0)
	rep.Follow(es, st, func(SourceID) Reader { return log })
	pieces, _, _, err := rep.Read(0, 1<<20, true, -1)
	if err != nil || len(pieces) != 1 {
		t.Fatalf("read: %d pieces, %v", len(pieces), err)
	}
	pc := pieces[0]
	c := NewCache(1 << 20)
	var reads atomic.Int32
	release := make(chan struct{})
	read := func(dst []byte) error {
		reads.Add(1)
		<-release
		return pc.Src.ReadAt(dst, pc.Pos)
	}
	const fetches = 5
	got := make(chan []byte, fetches)
	for i := 0; i < fetches; i++ {
		go func() {
			data, err := c.Load(rep, pc, read)
			if err != nil {
				t.Error(err)
			}
			got <- data
		}()
	}
	testutil.Eventually(t, 10*time.Second, "the first read started", func() bool { return reads.Load() == 1 })
	// Letting the other fetches reach Load and wait on the first one's flight: nothing
	// to observe from outside; one that came later would read memory, not the WAL.
	time.Sleep(50 * time.Millisecond)
	close(release)
	first := <-got
	for i := 1; i < fetches; i++ {
		if d := <-got; !bytes.Equal(d, first) {
			t.Fatal("fetches got different bytes")
		}
	}
	if n := reads.Load(); n != 1 {
		t.Fatalf("%d reads of the WAL for %d fetches at once, want 1", n, fetches)
	}
	if p, _, _, _ := rep.Read(0, 1<<20, true, -1); p[0].Data == nil {
		t.Fatal("the batch not kept after the shared read")
	}
	// A read that fails is not shared, and nothing is kept.
	rep2 := New("t", metadata.TopicID{2}, 0, 0, 0)
	rep2.Follow(es, st, func(SourceID) Reader { return log })
	p2, _, _, _ := rep2.Read(0, 1<<20, true, -1)
	if _, err := c.Load(rep2, p2[0], func([]byte) error { return errors.New("torn") }); err == nil {
		t.Fatal("a failed read returned no error")
	}
	if p, _, _, _ := rep2.Read(0, 1<<20, true, -1); p[0].Data != nil {
		t.Fatal("a failed read kept bytes")
	}
}
