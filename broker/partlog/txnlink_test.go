package partlog

import (
	"errors"
	"reflect"
	"testing"

	"github.com/weir-io/weir/internal/kafkatest"
	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/wal"
)

// linkLog drives a leader that takes batches through links from a proxy's WAL (px) and
// writes its own records (the RecLink records and the markers) to lw, remembering them
// in order for a replay.
type linkLog struct {
	t      *testing.T
	p      *Partition
	px, lw *memLog
	recs   []linkLogRec
}

// linkLogRec is one record of the leader's WAL: a link's encoding, or a marker batch.
type linkLogRec struct {
	link   []byte
	pos    wal.Pos
	marker int // the marker batch's size (0: a link)
}

func newLinkLog(t *testing.T) *linkLog {
	return &linkLog{t: t, p: ready(t), px: &memLog{}, lw: &memLog{}}
}

// link writes batch to the proxy's WAL and links it (prepared and synced unless
// refused); it returns the link's base offset.
func (l *linkLog) link(batch []byte) (int64, error) {
	l.t.Helper()
	lk := testLink(l.t, batch, l.px.add(batch))
	lk.Proxy, lk.ProxyEpoch = 5, 3
	pr, err := l.p.PrepareLink(&lk, l.px)
	if err != nil {
		return -1, err
	}
	if pr.Dup != nil {
		l.t.Fatalf("link of %d bytes: duplicate of %d", len(batch), pr.Dup.Offset)
	}
	rec := AppendLink(nil, &lk)
	pos := l.lw.add(rec)
	l.p.Commit(pr, l.lw, pos)
	l.recs = append(l.recs, linkLogRec{link: rec, pos: pos})
	return lk.Base, nil
}

// marker appends a marker to the leader's own WAL, as the coordinator has it written.
func (l *linkLog) marker(pid int64, epoch int16, commit bool) int64 {
	l.t.Helper()
	b := recbatch.EncodeMarker(recbatch.Marker{ProducerID: pid, ProducerEpoch: epoch, Commit: commit}, 1700000000000)
	h, err := recbatch.Parse(b)
	if err != nil {
		l.t.Fatal(err)
	}
	pr, err := l.p.Prepare(&h, b, -1)
	if err != nil {
		l.t.Fatalf("marker of %d: %v", pid, err)
	}
	pos := l.lw.add(b)
	l.p.Commit(pr, l.lw, pos)
	l.recs = append(l.recs, linkLogRec{pos: pos, marker: len(b)})
	return pr.Base()
}

// replay loads a new partition from the leader's WAL records, as a failover or a
// restart does: links decoded from their records (CollectLink, the loader's path),
// markers read back (Collect).
func (l *linkLog) replay() *Partition {
	l.t.Helper()
	p := New("t", metadata.TopicID{1}, 0, 4, 0)
	for _, r := range l.recs {
		if r.marker > 0 {
			data := make([]byte, r.marker)
			if err := l.lw.ReadAt(data, r.pos); err != nil {
				l.t.Fatal(err)
			}
			h, _ := recbatch.Parse(data)
			p.Collect(&h, l.lw, r.pos, r.marker)
			continue
		}
		lk, _, err := DecodeLink(r.link)
		if err != nil {
			l.t.Fatal(err)
		}
		p.CollectLink(&lk, l.px, l.lw, r.pos)
	}
	if _, err := p.FinishLoad(-1, false, true); err != nil {
		l.t.Fatal(err)
	}
	return p
}

// txnState is what read_committed readers and producer snapshots see of a partition.
type txnState struct {
	LSO     int64
	Aborted []metadata.AbortedTxn
	Open    map[int64]int64
	Snaps   []*metadata.ProducerSnapshot
}

func stateOf(p *Partition, pids []int64, snapsThrough []int64) txnState {
	s := txnState{LSO: p.LastStable(), Aborted: p.Aborted(0, 1<<40), Open: map[int64]int64{}}
	for _, pid := range pids {
		if first, ok := p.OpenTxn(pid); ok {
			s.Open[pid] = first
		}
	}
	for _, through := range snapsThrough {
		s.Snaps = append(s.Snaps, p.ProducerSnapshot(through))
	}
	return s
}

// Transactional batches linked from a proxy's WAL take part in transactions exactly as
// appended ones do: a transactional link opens its producer's transaction at its
// offset (the LSO held there), a non-transactional batch of a producer with an open
// transaction is refused, an abort marker records the transaction as aborted from the
// link's offset, the linked bytes carry the attribute for the client's own filtering,
// producer snapshots carry the open transaction, and a replay of the leader's WAL
// rebuilds the same state, which goes on as before.
func TestTxnLinks(t *testing.T) {
	l := newLinkLog(t)
	must := func(base int64, err error) int64 {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return base
	}
	if b := must(l.link(kafkatest.TxnBatch(1, 0, 0, []byte("a"), []byte("b")))); b != 0 { // [0,1] 1 opens
		t.Fatalf("first link at %d", b)
	}
	if first, ok := l.p.OpenTxn(1); !ok || first != 0 {
		t.Fatalf("1's transaction after its transactional link: %d %v, want open from 0", first, ok)
	}
	must(l.link(kafkatest.Batch(2, 0, 0, []byte("c")))) // 2: idempotent, no transaction
	if lso, hw := l.p.LastStable(), l.p.End(); lso != 0 || hw != 3 {
		t.Fatalf("LSO %d (high watermark %d), want 0: held by 1's linked transaction", lso, hw)
	}
	// As for a direct produce: 1 may not write outside its open transaction.
	if _, err := l.link(kafkatest.Batch(1, 0, 2, []byte("x"))); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("non-transactional link of a producer in a transaction: %v", err)
	}
	must(l.link(kafkatest.TxnBatch(1, 0, 2, []byte("d")))) // 3: in 1's transaction
	a1 := l.marker(1, 0, false)                            // 4: 1 aborted [0, 4]
	if want := []metadata.AbortedTxn{{ProducerID: 1, First: 0, Last: a1}}; !reflect.DeepEqual(l.p.Aborted(0, 100), want) {
		t.Fatalf("aborted %+v, want %+v", l.p.Aborted(0, 100), want)
	}
	if lso := l.p.LastStable(); lso != 5 {
		t.Fatalf("LSO after the abort %d, want 5", lso)
	}
	t3 := must(l.link(kafkatest.TxnBatch(3, 0, 0, []byte("e")))) // 5: 3 opens
	c3 := l.marker(3, 0, true)                                   // 6
	t4 := must(l.link(kafkatest.TxnBatch(4, 0, 0, []byte("f")))) // 7: 4 opens, left open
	if lso := l.p.LastStable(); lso != t4 {
		t.Fatalf("LSO %d, want %d (4's open transaction)", lso, t4)
	}
	// A snapshot as of 3's transactional link has it open from there; one as of its
	// commit marker not.
	if s := l.p.ProducerSnapshot(t3); txnFirstOf(s, 3) == nil || *txnFirstOf(s, 3) != t3 {
		t.Fatalf("snapshot as of %d: %+v", t3, s)
	}
	if s := l.p.ProducerSnapshot(c3); txnFirstOf(s, 3) != nil || txnFirstOf(s, 4) != nil {
		t.Fatalf("snapshot as of %d has a transaction open: %+v", c3, s)
	}
	// read_committed stops at the LSO; the linked bytes carry the transactional bit
	// (the consumer drops the aborted ones by it and the aborted list).
	pieces, _, lso, _, err := l.p.ReadCommitted(0, 1<<20, true, -1)
	if err != nil || lso != t4 {
		t.Fatalf("read_committed: lso %d, %v", lso, err)
	}
	txnBases := map[int64]bool{}
	for _, pc := range pieces {
		data := make([]byte, pc.Size)
		if err := pc.Src.ReadAt(data, pc.Pos); err != nil {
			t.Fatal(err)
		}
		h, _ := recbatch.Parse(data)
		if h.BaseOffset >= t4 {
			t.Fatalf("read_committed served %d at or above the LSO %d", h.BaseOffset, t4)
		}
		if h.Transactional() && !h.Control() { // markers carry the bit too
			txnBases[h.BaseOffset] = true
		}
	}
	if want := map[int64]bool{0: true, 3: true, t3: true}; !reflect.DeepEqual(txnBases, want) {
		t.Fatalf("transactional batches read %v, want %v", txnBases, want)
	}

	// The leader's WAL replayed (a failover, a restart): the same state.
	pids, snaps := []int64{1, 2, 3, 4}, []int64{2, a1, t3, c3, t4}
	want := stateOf(l.p, pids, snaps)
	if want.LSO != t4 || len(want.Open) != 1 || len(want.Aborted) != 1 {
		t.Fatalf("state before the replay: %+v", want)
	}
	r := l.replay()
	if got := stateOf(r, pids, snaps); !reflect.DeepEqual(got, want) {
		t.Fatalf("state after the replay:\n%+v\nwant\n%+v", got, want)
	}
	// ...and goes on: 4 may not leave its open transaction; its abort ends it.
	l.p = r
	if _, err := l.link(kafkatest.Batch(4, 0, 1, []byte("x"))); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("after the replay, a non-transactional link of 4: %v", err)
	}
	must(l.link(kafkatest.TxnBatch(4, 0, 1, []byte("g")))) // 8
	a4 := l.marker(4, 0, false)                            // 9
	if got := r.Aborted(t4, 100); len(got) != 1 || got[0] != (metadata.AbortedTxn{ProducerID: 4, First: t4, Last: a4}) {
		t.Fatalf("4's abort after the replay: %+v", got)
	}
	if lso := r.LastStable(); lso != a4+1 {
		t.Fatalf("LSO %d, want %d", lso, a4+1)
	}
}

// A rolled-back transactional link (its WAL group failed) leaves no transaction open;
// a link naming a control batch is refused.
func TestTxnLinkRollbackAndControl(t *testing.T) {
	l := newLinkLog(t)
	b := kafkatest.TxnBatch(1, 0, 0, []byte("a"))
	lk := testLink(t, b, l.px.add(b))
	if _, err := l.p.PrepareLink(&lk, l.px); err != nil {
		t.Fatal(err)
	}
	if _, ok := l.p.OpenTxn(1); !ok {
		t.Fatal("a prepared transactional link opened no transaction")
	}
	l.p.Rollback(lk.Base)
	if first, ok := l.p.OpenTxn(1); ok {
		t.Fatalf("the rolled-back link's transaction is open from %d", first)
	}
	if lso := l.p.LastStable(); lso != 0 {
		t.Fatalf("LSO %d after the rollback", lso)
	}
	ctl := lk
	ctl.Attributes |= recbatch.AttrControl
	if _, err := l.p.PrepareLink(&ctl, l.px); !errors.Is(err, ErrControlLink) {
		t.Fatalf("a control link: %v", err)
	}
	noPID := lk
	noPID.ProducerID = -1
	if _, err := l.p.PrepareLink(&noPID, l.px); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("a transactional link without a producer: %v", err)
	}
}
