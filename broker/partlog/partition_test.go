package partlog

import (
	"errors"
	"fmt"
	"testing"

	"github.com/weir-io/weir/internal/kafkatest"
	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/wal"
)

// memLog is a Reader over an in-memory "WAL": appended bytes at increasing positions.
type memLog struct{ b []byte }

func (m *memLog) add(batch []byte) wal.Pos {
	pos := wal.Pos(len(m.b))
	m.b = append(m.b, batch...)
	return pos
}

func (m *memLog) ReadAt(p []byte, pos wal.Pos) error {
	if int(pos)+len(p) > len(m.b) {
		return fmt.Errorf("read past end")
	}
	copy(p, m.b[pos:])
	return nil
}

func ready(t *testing.T) *Partition {
	t.Helper()
	p := New("t", metadata.TopicID{1}, 0, 3, 0)
	p.FinishLoad(-1, false, true)
	if p.State() != Ready {
		t.Fatal("a new partition with nothing to load is not ready")
	}
	return p
}

// appendSynced prepares and commits one batch of n records like the WAL committer does.
func appendSynced(t *testing.T, p *Partition, log *memLog, pid int64, epoch int16, seq int32, n int) (Prepared, error) {
	t.Helper()
	vals := make([][]byte, n)
	for i := range vals {
		vals[i] = []byte{byte(i)}
	}
	b := kafkatest.Batch(pid, epoch, seq, vals...)
	h, err := recbatch.ValidateProduce(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	pr, err := p.Prepare(&h, b, -1)
	if err != nil || pr.Dup != nil {
		return pr, err
	}
	p.Commit(pr, log, log.add(b))
	return pr, nil
}

func TestPrepareCommitReadDense(t *testing.T) {
	p, log := ready(t), &memLog{}
	for i, n := range []int{1, 3, 2} {
		pr, err := appendSynced(t, p, log, -1, -1, -1, n)
		if err != nil {
			t.Fatal(err)
		}
		if want := []int64{0, 1, 4}[i]; pr.Base() != want {
			t.Fatalf("batch %d at %d, want %d", i, pr.Base(), want)
		}
	}
	if ls, hw := p.Offsets(); ls != 0 || hw != 6 {
		t.Fatalf("offsets %d %d", ls, hw)
	}
	// Offset 2 is inside the second batch: the read starts with that whole batch.
	pieces, hw, _, err := p.Read(2, 1<<20, true, -1)
	if err != nil || hw != 6 || len(pieces) != 2 {
		t.Fatalf("read: %d pieces hw %d err %v", len(pieces), hw, err)
	}
	h, _ := recbatch.Parse(pieces[0].Data)
	if h.BaseOffset != 1 || h.LeaderEpoch != 3 {
		t.Fatalf("first piece at %d epoch %d", h.BaseOffset, h.LeaderEpoch)
	}
	// A prepared but unsynced batch is not readable and does not move the high watermark.
	b := kafkatest.Batch(-1, -1, -1, []byte("x"))
	hd, _ := recbatch.ValidateProduce(b, 0)
	if _, err := p.Prepare(&hd, b, -1); err != nil {
		t.Fatal(err)
	}
	if _, hw := p.Offsets(); hw != 6 {
		t.Fatalf("unsynced batch moved the high watermark to %d", hw)
	}
	if _, _, _, err := p.Read(7, 1<<20, true, -1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read above the high watermark: %v", err)
	}
	if pcs, _, _, err := p.Read(6, 1<<20, true, -1); err != nil || len(pcs) != 0 {
		t.Fatalf("read at the high watermark returned %d pieces (%v): the unsynced batch must not be served", len(pcs), err)
	}
	// Its group failed: the offsets are reused.
	p.Rollback(6)
	pr, err := appendSynced(t, p, log, -1, -1, -1, 1)
	if err != nil || pr.Base() != 6 {
		t.Fatalf("after rollback: base %d err %v", pr.Base(), err)
	}
	if _, _, _, err := p.Read(0, 1<<20, true, 2); !errors.Is(err, ErrFencedEpoch) {
		t.Fatalf("old epoch read: %v", err)
	}
	if _, _, _, err := p.Read(0, 1<<20, true, 4); !errors.Is(err, ErrUnknownEpoch) {
		t.Fatalf("future epoch read: %v", err)
	}
}

func TestIdempotentSequences(t *testing.T) {
	p, log := ready(t), &memLog{}
	mustBase := func(what string, pr Prepared, err error, want int64) {
		t.Helper()
		if err != nil || pr.Dup != nil || pr.Base() != want {
			t.Fatalf("%s: base %d dup %v err %v, want %d", what, pr.Base(), pr.Dup, err, want)
		}
	}
	pr, err := appendSynced(t, p, log, 7, 0, 0, 2)
	mustBase("first", pr, err, 0)
	pr, err = appendSynced(t, p, log, 7, 0, 2, 1)
	mustBase("second", pr, err, 2)
	pr, err = appendSynced(t, p, log, 7, 0, 0, 2)
	if err != nil || pr.Dup == nil || pr.Dup.Offset != 0 {
		t.Fatalf("retry of the first: %+v %v", pr, err)
	}
	if _, err := appendSynced(t, p, log, 7, 0, 5, 1); !errors.Is(err, ErrOutOfOrderSeq) {
		t.Fatalf("gap: %v", err)
	}
	pr, err = appendSynced(t, p, log, 7, 1, 0, 1)
	mustBase("new epoch", pr, err, 3)
	if _, err := appendSynced(t, p, log, 7, 0, 3, 1); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("old epoch: %v", err)
	}
	// A failed group forgets the producer's batch: its retry is appended, not a duplicate.
	b := kafkatest.Batch(7, 1, 1, []byte("r"))
	h, _ := recbatch.ValidateProduce(b, 0)
	pr, _ = p.Prepare(&h, b, -1)
	p.Rollback(pr.Base())
	pr, err = appendSynced(t, p, log, 7, 1, 1, 1)
	mustBase("retry after a failed write", pr, err, 4)
}

// A loading partition rebuilds index, epochs and producer state from batches collected
// out of order, and reports offsets no WAL had.
func TestFinishLoadRebuildsState(t *testing.T) {
	src, log := ready(t), &memLog{}
	for i := 0; i < 4; i++ {
		if _, err := appendSynced(t, src, log, 9, 0, int32(i), 1); err != nil {
			t.Fatal(err)
		}
	}
	p := New("t", metadata.TopicID{1}, 0, 5, 0)
	var batches []Batch = src.Batches()
	for _, i := range []int{2, 0, 3, 1} {
		b := batches[i]
		data := make([]byte, b.Size)
		if err := b.Src.ReadAt(data, b.Pos); err != nil {
			t.Fatal(err)
		}
		h, _ := recbatch.Parse(data)
		p.Collect(&h, log, b.Pos, int(b.Size))
	}
	if p.State() != Loading {
		t.Fatal("collecting made the partition ready")
	}
	if gaps, err := p.FinishLoad(-1, false, true); err != nil || len(gaps) != 0 {
		t.Fatalf("gaps %v %v", gaps, err)
	}
	if _, hw := p.Offsets(); hw != 4 {
		t.Fatalf("hw %d", hw)
	}
	// The producer's retry of its last batch is recognised after the load.
	b := kafkatest.Batch(9, 0, 3, []byte{0})
	h, _ := recbatch.ValidateProduce(b, 0)
	pr, err := p.Prepare(&h, b, -1)
	if err != nil || pr.Dup == nil || pr.Dup.Offset != 3 {
		t.Fatalf("retry after load: %+v %v", pr, err)
	}
	// Epoch 3 ran [0, 4); epoch 5 starts at 4.
	if e, end := p.EndOffsetForEpoch(3); e != 3 || end != 4 {
		t.Fatalf("end of epoch 3: %d %d", e, end)
	}

	gap := New("t", metadata.TopicID{1}, 0, 5, 0)
	for _, i := range []int{0, 2} {
		data := make([]byte, batches[i].Size)
		batches[i].Src.ReadAt(data, batches[i].Pos)
		h, _ := recbatch.Parse(data)
		gap.Collect(&h, log, batches[i].Pos, int(batches[i].Size))
	}
	if gaps, err := gap.FinishLoad(-1, false, true); !errors.Is(err, ErrLoadIncomplete) || len(gaps) != 1 || gaps[0] != "[1, 2)" {
		t.Fatalf("gaps %v %v, want [1, 2) and ErrLoadIncomplete", gaps, err)
	}
	if gap.State() != Loading {
		t.Fatal("a partition with a hole in its WAL data serves")
	}
}

func TestApplyMovesAndDrop(t *testing.T) {
	p, log := ready(t), &memLog{}
	if _, err := appendSynced(t, p, log, -1, -1, -1, 2); err != nil {
		t.Fatal(err)
	}
	v := metadata.NewView(1, "c", 1, nil, nil)
	mp := metadata.Partition{Index: 0, Leader: 1, LeaderEpoch: 4, Moving: true}
	if !p.Apply(mp, v, false) || p.State() != Closing {
		t.Fatal("a move did not start a hand-off")
	}
	if p.Apply(mp, v, false) {
		t.Fatal("the same move started a second hand-off")
	}
	mp.MoveGen = 9 // cancelled and another move begun, seen at once
	if !p.Apply(mp, v, false) || p.State() != Closing {
		t.Fatal("a replaced move did not start its own hand-off")
	}
	mp.Moving = false
	if p.Apply(mp, v, false) || p.State() != Ready || p.LeaderEpoch() != 4 {
		t.Fatalf("cancelled move: state %v epoch %d", p.State(), p.LeaderEpoch())
	}
	pos, end, pin := p.Drop(log)
	if !pin || pos != 0 || end != 2 || p.State() != Gone {
		t.Fatalf("drop: pos %d end %d pin %v state %v", pos, end, pin, p.State())
	}
	if _, _, _, err := p.Read(0, 1<<20, true, -1); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("read after drop: %v", err)
	}
}

// Evicted batches are read from their WAL position.
func TestCacheEviction(t *testing.T) {
	p, log := ready(t), &memLog{}
	c := NewCache(200)
	for i := 0; i < 5; i++ {
		pr, err := appendSynced(t, p, log, -1, -1, -1, 1)
		if err != nil {
			t.Fatal(err)
		}
		c.Add(p, pr)
	}
	pieces, _, _, err := p.Read(0, 1<<20, true, -1)
	if err != nil || len(pieces) != 5 {
		t.Fatalf("read %d pieces: %v", len(pieces), err)
	}
	if pieces[0].Data != nil || pieces[4].Data == nil {
		t.Fatal("the oldest batch should be evicted and the newest cached")
	}
	buf := make([]byte, pieces[0].Size)
	if err := pieces[0].Src.ReadAt(buf, pieces[0].Pos); err != nil {
		t.Fatal(err)
	}
	if h, err := recbatch.Parse(buf); err != nil || h.BaseOffset != 0 {
		t.Fatalf("evicted batch read back: %+v %v", h, err)
	}
}

// A load that finds less than the chain says the previous range holds (a stale read of
// the shared file system, say) must not serve: it would hand out offsets the previous
// leader already acked. Loading again with everything succeeds.
func TestLoadMustReachTheRangeEnd(t *testing.T) {
	src, log := ready(t), &memLog{}
	for i := 0; i < 4; i++ {
		if _, err := appendSynced(t, src, log, -1, -1, -1, 1); err != nil {
			t.Fatal(err)
		}
	}
	batches := src.Batches()
	mp := metadata.Partition{Index: 0, Leader: 2, LeaderEpoch: 4, Logs: []metadata.LogRange{{Broker: 1, StartOffset: 0}, {Broker: 2, StartOffset: 4}}}
	p := New("t", metadata.TopicID{1}, 0, 4, 0)
	p.Apply(mp, metadata.NewView(1, "c", 1, nil, nil), false)
	collect := func(n int) {
		for _, b := range batches[:n] {
			data := make([]byte, b.Size)
			if err := b.Src.ReadAt(data, b.Pos); err != nil {
				t.Fatal(err)
			}
			h, _ := recbatch.Parse(data)
			p.Collect(&h, log, b.Pos, int(b.Size))
		}
	}
	collect(3) // the last acked batch of broker 1 is not visible yet
	gaps, err := p.FinishLoad(4, false, true)
	if !errors.Is(err, ErrLoadIncomplete) || len(gaps) != 1 || gaps[0] != "[3, 4)" || p.State() != Loading {
		t.Fatalf("short load: gaps %v err %v state %v", gaps, err, p.State())
	}
	b := kafkatest.Batch(-1, -1, -1, []byte("x"))
	h, _ := recbatch.ValidateProduce(b, 0)
	if _, err := p.Prepare(&h, b, -1); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("a partition still loading accepted an append: %v", err)
	}
	collect(4)
	if gaps, err := p.FinishLoad(4, false, true); err != nil || len(gaps) != 0 || p.End() != 4 || p.State() != Ready {
		t.Fatalf("full load: gaps %v err %v end %d state %v", gaps, err, p.End(), p.State())
	}
	pr, err := p.Prepare(&h, b, -1)
	if err != nil || pr.Base() != 4 {
		t.Fatalf("first append after the move at %d (%v), want 4", pr.Base(), err)
	}

	// An operator may accept the loss: the partition then serves from the range end.
	q := New("t", metadata.TopicID{1}, 0, 4, 0)
	q.Apply(mp, metadata.NewView(1, "c", 1, nil, nil), false)
	p = q
	collect(2)
	if gaps, err := q.FinishLoad(4, true, true); err != nil || len(gaps) != 1 || q.End() != 4 || q.State() != Ready {
		t.Fatalf("accepted loss: gaps %v err %v end %d", gaps, err, q.End())
	}
}
