package partlog

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/weir-io/weir/internal/kafkatest"
	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
)

// txnLog drives a partition like the WAL committer does, with transactional batches and
// markers; each producer's sequence is kept here.
type txnLog struct {
	t   *testing.T
	p   *Partition
	log *memLog
	seq map[int64]int32
}

func newTxnLog(t *testing.T) *txnLog {
	return &txnLog{t: t, p: ready(t), log: &memLog{}, seq: map[int64]int32{}}
}

// prepare prepares batch (not synced); the caller commits or rolls back.
func (l *txnLog) prepare(batch []byte) (Prepared, error) {
	l.t.Helper()
	h, err := recbatch.Parse(batch)
	if err != nil {
		l.t.Fatal(err)
	}
	return l.p.Prepare(&h, batch, -1)
}

func (l *txnLog) commit(pr Prepared, batch []byte) {
	l.p.Commit(pr, l.log, l.log.add(batch))
}

// data appends and syncs a transactional batch of n records of producer pid; it returns
// its base offset.
func (l *txnLog) data(pid int64, epoch int16, n int) int64 {
	l.t.Helper()
	b := kafkatest.TxnBatch(pid, epoch, l.seq[pid], make([][]byte, n)...)
	pr, err := l.prepare(b)
	if err != nil || pr.Dup != nil {
		l.t.Fatalf("txn batch of %d: %+v %v", pid, pr, err)
	}
	l.seq[pid] += int32(n)
	l.commit(pr, b)
	return pr.Base()
}

// plain appends and syncs a non-idempotent batch of one record.
func (l *txnLog) plain() int64 {
	l.t.Helper()
	b := kafkatest.Batch(-1, -1, -1, []byte("x"))
	pr, err := l.prepare(b)
	if err != nil {
		l.t.Fatal(err)
	}
	l.commit(pr, b)
	return pr.Base()
}

// marker appends and syncs a marker; it returns its offset.
func (l *txnLog) marker(pid int64, epoch int16, commit bool) int64 {
	l.t.Helper()
	b := recbatch.EncodeMarker(recbatch.Marker{ProducerID: pid, ProducerEpoch: epoch, Commit: commit}, 1700000000000)
	pr, err := l.prepare(b)
	if err != nil {
		l.t.Fatalf("marker of %d: %v", pid, err)
	}
	l.commit(pr, b)
	return pr.Base()
}

// committed reads from offset as a read_committed consumer: the base offsets of the
// batches served, and the LSO.
func (l *txnLog) committed(offset int64) (bases []int64, lso int64) {
	l.t.Helper()
	pieces, _, lso, _, err := l.p.ReadCommitted(offset, 1<<20, true, -1)
	if err != nil {
		l.t.Fatalf("read_committed at %d: %v", offset, err)
	}
	for _, pc := range pieces {
		h, _ := recbatch.Parse(pc.Data)
		bases = append(bases, h.BaseOffset)
	}
	return bases, lso
}

func (l *txnLog) wantLSO(want int64) {
	l.t.Helper()
	if got := l.p.LastStable(); got != want {
		l.t.Fatalf("LSO %d, want %d", got, want)
	}
}

func (l *txnLog) wantAborted(from, to int64, want ...metadata.AbortedTxn) {
	l.t.Helper()
	if got := l.p.Aborted(from, to); !reflect.DeepEqual(got, want) && (len(got) != 0 || len(want) != 0) {
		l.t.Fatalf("aborted in [%d, %d]: %+v, want %+v", from, to, got, want)
	}
}

// An open transaction holds the last stable offset at its first offset: a
// read_committed read stops there, whatever follows it; its commit marker releases it.
func TestTxnLSOHeldUntilCommit(t *testing.T) {
	l := newTxnLog(t)
	l.plain()       // 0
	l.data(7, 0, 2) // [1,2] opens 7's transaction
	l.plain()       // 3
	l.data(7, 0, 1) // 4
	l.wantLSO(1)
	if bases, lso := l.committed(0); !reflect.DeepEqual(bases, []int64{0}) || lso != 1 {
		t.Fatalf("read_committed from 0: %v lso %d", bases, lso)
	}
	if bases, _ := l.committed(3); len(bases) != 0 {
		t.Fatalf("read_committed at or above the LSO served %v", bases)
	}
	if pieces, hw, _, err := l.p.Read(0, 1<<20, true, -1); err != nil || len(pieces) != 4 || hw != 5 {
		t.Fatalf("read_uncommitted: %d pieces hw %d %v", len(pieces), hw, err)
	}
	if first, ok := l.p.OpenTxn(7); !ok || first != 1 {
		t.Fatalf("open transaction of 7: %d %v", first, ok)
	}
	m := l.marker(7, 0, true) // 5
	l.wantLSO(6)
	if bases, lso := l.committed(0); len(bases) != 5 || bases[4] != m || lso != 6 {
		t.Fatalf("after the commit: %v lso %d", bases, lso)
	}
	l.wantAborted(0, 10)
	if _, ok := l.p.OpenTxn(7); ok {
		t.Fatal("the commit left the transaction open")
	}
	// The producer's next transactional batch opens a new transaction.
	l.data(7, 0, 1) // 6
	l.wantLSO(6)
}

// An abort marker records {producer, first offset, marker offset}; Aborted lists the
// transactions whose markers are at or above from and that begin at or before to.
func TestTxnAbortRecordsRange(t *testing.T) {
	l := newTxnLog(t)
	l.data(3, 1, 2)            // [0,1]
	l.plain()                  // 2
	l.data(3, 1, 1)            // 3
	m := l.marker(3, 1, false) // 4
	l.wantLSO(5)
	a := metadata.AbortedTxn{ProducerID: 3, First: 0, Last: m}
	l.wantAborted(0, 10, a)
	l.wantAborted(4, 4, a)
	l.wantAborted(2, 0, a) // begins at 0
	l.wantAborted(5, 10)   // its marker is below the fetch offset
	for i := 0; i < 3; i++ {
		l.plain() // 5, 6, 7
	}
	l.data(3, 1, 1)             // 8
	m2 := l.marker(3, 1, false) // 9
	b := metadata.AbortedTxn{ProducerID: 3, First: 8, Last: m2}
	l.wantAborted(0, 10, a, b)
	l.wantAborted(0, 7, a) // the second begins after 7
	l.wantAborted(5, 8, b)
}

// Two producers' transactions interleave: the LSO is the older one's first offset until
// it ends, then the other's.
func TestTxnTwoProducersInterleaved(t *testing.T) {
	l := newTxnLog(t)
	l.data(1, 0, 1) // 0: 1 opens
	l.data(2, 0, 1) // 1: 2 opens
	l.data(1, 0, 1) // 2
	l.wantLSO(0)
	l.marker(1, 0, true) // 3: 1 commits
	l.wantLSO(1)
	if bases, lso := l.committed(0); !reflect.DeepEqual(bases, []int64{0}) || lso != 1 {
		t.Fatalf("read_committed with 2 open: %v lso %d", bases, lso)
	}
	l.data(2, 0, 1)            // 4
	m := l.marker(2, 0, false) // 5: 2 aborts
	l.wantLSO(6)
	l.wantAborted(0, 10, metadata.AbortedTxn{ProducerID: 2, First: 1, Last: m})
	l.data(1, 0, 1) // 6: 1 opens again
	l.wantLSO(6)
	l.data(2, 0, 1)       // 7
	l.marker(1, 0, false) // 8
	l.wantLSO(7)
	l.wantAborted(0, 10, metadata.AbortedTxn{ProducerID: 2, First: 1, Last: m}, metadata.AbortedTxn{ProducerID: 1, First: 6, Last: 8})
}

// A marker ends its transaction for readers only once synced; rolling back unsynced
// batches undoes what they started and ended.
func TestTxnRollback(t *testing.T) {
	l := newTxnLog(t)
	l.data(5, 0, 1) // 0: 5 opens
	l.plain()       // 1
	abort := recbatch.EncodeMarker(recbatch.Marker{ProducerID: 5, Commit: false}, 1)
	pr, err := l.prepare(abort) // 2, unsynced
	if err != nil {
		t.Fatal(err)
	}
	l.wantLSO(0)
	other := kafkatest.TxnBatch(6, 0, 0, []byte("y"))
	if _, err := l.prepare(other); err != nil { // 3, unsynced: opens 6
		t.Fatal(err)
	}
	if _, ok := l.p.OpenTxn(6); !ok {
		t.Fatal("an unsynced batch did not open its transaction")
	}
	l.p.Rollback(pr.Base())
	if first, ok := l.p.OpenTxn(5); !ok || first != 0 {
		t.Fatalf("after rolling back its abort marker, 5's transaction: %d %v", first, ok)
	}
	if _, ok := l.p.OpenTxn(6); ok {
		t.Fatal("a rolled back batch left its transaction open")
	}
	l.wantAborted(0, 10)
	l.wantLSO(0)
	// The abort again, synced this time, then a commit marker of another producer
	// rolled back: its transaction is open again.
	m := l.marker(5, 0, false) // 2
	l.wantAborted(0, 10, metadata.AbortedTxn{ProducerID: 5, First: 0, Last: m})
	l.data(6, 0, 1) // 3: opens 6 (sequence 0 again: the rolled back one is forgotten)
	commit := recbatch.EncodeMarker(recbatch.Marker{ProducerID: 6, Commit: true}, 1)
	pr, err = l.prepare(commit) // 4
	if err != nil {
		t.Fatal(err)
	}
	l.wantLSO(3)
	l.p.Rollback(pr.Base())
	if first, ok := l.p.OpenTxn(6); !ok || first != 3 {
		t.Fatalf("after rolling back its commit, 6's transaction: %d %v", first, ok)
	}
	l.wantLSO(3)
	l.wantAborted(0, 10, metadata.AbortedTxn{ProducerID: 5, First: 0, Last: m})
}

// A marker older than the producer's epoch is refused; a newer one fences the
// producer's older epoch; an idempotent batch inside an open transaction is refused.
func TestTxnMarkerEpochAndState(t *testing.T) {
	l := newTxnLog(t)
	l.data(9, 2, 1) // 0
	stale := recbatch.EncodeMarker(recbatch.Marker{ProducerID: 9, ProducerEpoch: 1, Commit: true}, 1)
	if _, err := l.prepare(stale); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("stale marker: %v", err)
	}
	l.wantLSO(0)
	idem := kafkatest.Batch(9, 2, 1, []byte("z"))
	if _, err := l.prepare(idem); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("non-transactional batch in an open transaction: %v", err)
	}
	// The coordinator aborts with the bumped epoch (a fence): the old epoch is refused.
	m := l.marker(9, 3, false)
	l.wantAborted(0, 10, metadata.AbortedTxn{ProducerID: 9, First: 0, Last: m})
	if _, err := l.prepare(kafkatest.TxnBatch(9, 2, 1, []byte("z"))); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("old epoch after the fencing marker: %v", err)
	}
	if _, err := l.prepare(recbatch.EncodeMarker(recbatch.Marker{ProducerID: 9, ProducerEpoch: 2}, 1)); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("old epoch marker after the fencing marker: %v", err)
	}
	// The new epoch starts its sequences afresh.
	l.seq[9] = 0
	l.data(9, 3, 1)
	// A control batch that is no marker is refused.
	bad := kafkatest.Batch(9, 3, -1, []byte("v"))
	bad[22] |= 0x30
	h, _ := recbatch.Parse(bad)
	if _, err := l.p.Prepare(&h, bad, -1); !errors.Is(err, ErrInvalidMarker) {
		t.Fatalf("control batch that is no marker: %v", err)
	}
	// A marker of a producer with no open transaction here is appended and ends nothing.
	before := l.p.Aborted(0, 100)
	l.marker(10, 0, false)
	if got := l.p.Aborted(0, 100); !reflect.DeepEqual(got, before) {
		t.Fatalf("a marker without a transaction recorded %+v", got)
	}
}

// replay collects src's batches in [from, end) (end < 0: all) into a new partition, as
// a load from its WAL does; mp (optional) is the manifest applied first.
func replay(t *testing.T, src *txnLog, from, end int64, mp *metadata.Partition) *Partition {
	t.Helper()
	p := New("t", metadata.TopicID{1}, 0, 5, 0)
	if mp != nil {
		p.Apply(*mp, metadata.NewView(1, "c", 1, nil, nil), true)
	}
	for _, b := range src.p.Batches() {
		if b.Base < from || end >= 0 && b.Base >= end {
			continue
		}
		data := make([]byte, b.Size)
		if err := b.Src.ReadAt(data, b.Pos); err != nil {
			t.Fatal(err)
		}
		h, _ := recbatch.Parse(data)
		p.Collect(&h, src.log, b.Pos, int(b.Size))
	}
	if _, err := p.FinishLoad(-1, false, true); err != nil {
		t.Fatal(err)
	}
	return p
}

// A load from the WAL rebuilds the open transactions, the LSO and the aborted index.
func TestTxnLoadFromWAL(t *testing.T) {
	l := newTxnLog(t)
	l.data(1, 0, 2)             // [0,1] 1 opens
	l.data(2, 0, 1)             // 2 2 opens
	a1 := l.marker(1, 0, false) // 3
	l.data(3, 0, 1)             // 4 3 opens
	l.marker(2, 0, true)        // 5
	l.plain()                   // 6
	p := replay(t, l, 0, -1, nil)
	if got, want := p.LastStable(), l.p.LastStable(); got != 4 || want != 4 {
		t.Fatalf("LSO after the load %d, before %d, want 4", got, want)
	}
	if got := p.Aborted(0, 100); !reflect.DeepEqual(got, []metadata.AbortedTxn{{ProducerID: 1, First: 0, Last: a1}}) {
		t.Fatalf("aborted after the load %+v", got)
	}
	if first, ok := p.OpenTxn(3); !ok || first != 4 {
		t.Fatalf("open transaction after the load: %d %v", first, ok)
	}
	// The loaded partition goes on: 3's marker ends the transaction it rebuilt.
	b := recbatch.EncodeMarker(recbatch.Marker{ProducerID: 3, Commit: false}, 1)
	h, _ := recbatch.Parse(b)
	pr, err := p.Prepare(&h, b, -1)
	if err != nil {
		t.Fatal(err)
	}
	p.Commit(pr, l.log, l.log.add(b))
	if got := p.Aborted(4, 100); len(got) != 1 || got[0] != (metadata.AbortedTxn{ProducerID: 3, First: 4, Last: 7}) {
		t.Fatalf("abort after the load %+v", got)
	}
	if got := p.LastStable(); got != 8 {
		t.Fatalf("LSO %d, want 8", got)
	}
}

// Data that left the WAL still filters: an object range carries the aborted
// transactions whose markers it holds, the producer snapshot the transactions open as
// of its end (through JSON, as the metadata stores them), and a partition loaded from
// them and the WAL tail has the LSO and the aborted list of the one that wrote them.
func TestTxnSnapshotAndObjectRangeRoundTrip(t *testing.T) {
	l := newTxnLog(t)
	l.data(1, 0, 1)       // 0: 1 opens
	l.data(2, 0, 1)       // 1: 2 opens
	l.marker(2, 0, false) // 2: 2 aborted [1, 2]
	l.plain()             // 3
	through := int64(3)   // the object range [0, 3]
	l.data(1, 0, 1)       // 4
	l.data(4, 0, 1)       // 5: 4 opens
	l.marker(1, 0, false) // 6: 1 aborted [0, 6]
	l.plain()             // 7

	snap := l.p.ProducerSnapshot(through)
	r := metadata.PartitionRange{FirstOffset: 0, LastOffset: through, Producers: snap, Aborted: l.p.AbortedIn(0, through)}
	if len(r.Aborted) != 1 || r.Aborted[0] != (metadata.AbortedTxn{ProducerID: 2, First: 1, Last: 2}) {
		t.Fatalf("range's aborted transactions %+v", r.Aborted)
	}
	var open *int64
	for _, ps := range snap.Producers {
		if ps.ID == 1 {
			open = ps.TxnFirst
		} else if ps.TxnFirst != nil {
			t.Fatalf("producer %d open as of %d in the snapshot", ps.ID, through)
		}
	}
	if open == nil || *open != 0 {
		t.Fatalf("snapshot as of %d: 1's transaction %v, want open from 0", through, open)
	}
	js, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back metadata.PartitionRange
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	mp := &metadata.Partition{Leader: 1, LeaderEpoch: 5, Logs: []metadata.LogRange{{Broker: 1}},
		Objects: []metadata.ObjectRange{back.ObjectRange(1)}, Producers: back.Producers}

	p := replay(t, l, through+1, -1, mp) // offsets 0..3 from objects only
	if got, want := p.LastStable(), l.p.LastStable(); got != want || got != 5 {
		t.Fatalf("LSO from objects and the WAL tail %d, the writer's %d, want 5", got, want)
	}
	if got, want := p.Aborted(0, 100), l.p.Aborted(0, 100); !reflect.DeepEqual(got, want) || len(got) != 2 {
		t.Fatalf("aborted from objects and the WAL tail %+v, the writer's %+v", got, want)
	}
	// The WAL tail up to before 1's marker (a load that finds no more): 1's
	// transaction is open from 0, where the snapshot says it began.
	short := replay(t, l, through+1, 6, mp)
	if got := short.LastStable(); got != 0 {
		t.Fatalf("LSO with 1's transaction open since the snapshot: %d, want 0", got)
	}
	// A snapshot taken later walks back over the loaded batches to the snapshot's.
	if s := short.ProducerSnapshot(4); s == nil || txnFirstOf(s, 1) == nil || *txnFirstOf(s, 1) != 0 {
		t.Fatalf("snapshot as of 4 after the load: %+v", s)
	}
}

func txnFirstOf(s *metadata.ProducerSnapshot, id int64) *int64 {
	for _, ps := range s.Producers {
		if ps.ID == id {
			return ps.TxnFirst
		}
	}
	return nil
}

// A producer whose open transaction's batches all left its window is still in the
// snapshot, with no batches; a snapshot as of before its marker has the transaction
// open, one as of the marker not.
func TestTxnSnapshotKeepsOpenTransactions(t *testing.T) {
	l := newTxnLog(t)
	for i := 0; i < producerWindow; i++ {
		l.data(1, 0, 1) // 0..4: opens at 0
	}
	if s := l.p.ProducerSnapshot(0); s == nil || len(s.Producers) != 1 || len(s.Producers[0].Batches) != 1 || *s.Producers[0].TxnFirst != 0 {
		t.Fatalf("snapshot as of 0: %+v", s)
	}
	l.data(1, 0, 1) // 5: the window is 1..5
	s := l.p.ProducerSnapshot(0)
	if s == nil || len(s.Producers) != 1 || len(s.Producers[0].Batches) != 0 || *s.Producers[0].TxnFirst != 0 {
		t.Fatalf("snapshot as of 0 with the window past it: %+v", s)
	}
	if n := l.p.SnapshotProducers(0); n < len(s.Producers) {
		t.Fatalf("SnapshotProducers %d below the snapshot's %d", n, len(s.Producers))
	}
	l.plain() // 6
	m := l.marker(1, 0, true)
	l.plain()
	if s := l.p.ProducerSnapshot(m - 1); txnFirstOf(s, 1) == nil || *txnFirstOf(s, 1) != 0 {
		t.Fatalf("snapshot before the marker: %+v", s)
	}
	if s := l.p.ProducerSnapshot(m); txnFirstOf(s, 1) != nil {
		t.Fatalf("snapshot after the marker has the transaction open: %+v", s)
	}
}

// A read replica serves read_committed from what its leader sends: the LSO and the
// aborted transactions, never past either; more aborted transactions than an answer
// carries lower the LSO it sends instead.
func TestTxnReplicaFollows(t *testing.T) {
	l := newTxnLog(t)
	l.data(1, 0, 1)            // 0
	m := l.marker(1, 0, false) // 1
	l.data(2, 0, 1)            // 2: open
	l.plain()                  // 3
	es, st, err := l.p.Entries(0, 100)
	if err != nil || st.LSO != 2 || !reflect.DeepEqual(st.Aborted, []metadata.AbortedTxn{{ProducerID: 1, First: 0, Last: m}}) {
		t.Fatalf("leader's answer: lso %d aborted %+v %v", st.LSO, st.Aborted, err)
	}
	r := New("t", metadata.TopicID{1}, 0, 5, 0)
	r.Follow(es, st, func(SourceID) Reader { return l.log })
	if r.State() != Following || r.LastStable() != 2 {
		t.Fatalf("replica state %v LSO %d", r.State(), r.LastStable())
	}
	if got := r.Aborted(0, 3); !reflect.DeepEqual(got, st.Aborted) {
		t.Fatalf("replica's aborted %+v", got)
	}
	// Only some entries arrive: the replica's LSO stays within its own high watermark.
	r2 := New("t", metadata.TopicID{1}, 0, 5, 0)
	r2.Follow(es[:1], st, func(SourceID) Reader { return l.log })
	if got := r2.LastStable(); got != 1 {
		t.Fatalf("replica with one entry: LSO %d, want 1", got)
	}
	// A legacy leader (LSO unknown): the high watermark.
	st.LSO = -1
	r3 := New("t", metadata.TopicID{1}, 0, 5, 0)
	r3.Follow(es, st, func(SourceID) Reader { return l.log })
	if got := r3.LastStable(); got != 4 {
		t.Fatalf("replica of a leader without transactions: LSO %d, want 4", got)
	}

	big := newTxnLog(t)
	for i := 0; i < MaxFollowAborted+2; i++ {
		big.data(int64(i), 0, 1)
		big.marker(int64(i), 0, false)
	}
	_, st, err = big.p.Entries(0, 10)
	if err != nil || len(st.Aborted) != MaxFollowAborted || st.LSO != 2*MaxFollowAborted {
		t.Fatalf("an answer with too many aborted transactions: %d of them, LSO %d (%v)", len(st.Aborted), st.LSO, err)
	}
}

// An object range carries at most metadata.MaxRangeAborted aborted transactions: the
// upload ends before the marker past it.
func TestTxnUploadBoundsAborted(t *testing.T) {
	l := newTxnLog(t)
	for i := 0; i <= metadata.MaxRangeAborted; i++ {
		l.data(int64(i), 0, 1)
		l.marker(int64(i), 0, false)
	}
	pieces, _ := l.p.PendingUpload(1 << 40)
	aborts := 0
	for _, pc := range pieces {
		if pc.Abort {
			aborts++
		}
	}
	last := pieces[len(pieces)-1].Last
	if aborts != metadata.MaxRangeAborted || len(l.p.AbortedIn(0, last)) != aborts {
		t.Fatalf("%d pieces with %d abort markers, %d aborted in the range", len(pieces), aborts, len(l.p.AbortedIn(0, last)))
	}
}
