package kafka

import (
	"context"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/internal/kafkatest"
	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/wal"
)

// memPart is a Reader over a real partition log whose batches stay in its tail cache
// (as the broker's localPartition reads them, without WALs or objects).
type memPart struct{ p *partlog.Partition }

type noWAL struct{}

func (noWAL) ReadAt([]byte, wal.Pos) error { return partlog.ErrStorage }

func joinPieces(pieces []partlog.Piece) []byte {
	var b []byte
	for _, pc := range pieces {
		b = append(b, pc.Data...)
	}
	return b
}

func (m memPart) Topic() string { return m.p.Topic() }
func (m memPart) Read(_ context.Context, offset int64, maxBytes int, first bool, epoch int32) ([]byte, int64, int64, error) {
	pieces, hw, logStart, err := m.p.Read(offset, maxBytes, first, epoch)
	return joinPieces(pieces), hw, logStart, err
}
func (m memPart) ReadCommitted(_ context.Context, offset int64, maxBytes int, first bool, epoch int32) (CommittedRead, error) {
	pieces, hw, lso, logStart, err := m.p.ReadCommitted(offset, maxBytes, first, epoch)
	cr := CommittedRead{Data: joinPieces(pieces), HW: hw, LSO: lso, LogStart: logStart}
	if last := recbatch.LastOffsetOf(cr.Data); last >= 0 {
		cr.Aborted = m.p.Aborted(offset, last)
	}
	return cr, err
}
func (m memPart) LogInfo() (int64, int64, int32) {
	ls, hw := m.p.Offsets()
	return ls, hw, m.p.LeaderEpoch()
}
func (m memPart) Wait(c chan struct{})                                      { m.p.Wait(c) }
func (m memPart) Unwait(c chan struct{})                                    { m.p.Unwait(c) }
func (m memPart) MaxTimestamp() (int64, int64)                              { return m.p.MaxTimestamp() }
func (m memPart) OffsetForTime(context.Context, int64) (int64, int64, bool) { return -1, -1, false }
func (m memPart) EndOffsetForEpoch(e int32) (int32, int64)                  { return m.p.EndOffsetForEpoch(e) }
func (m memPart) LastStable() int64                                         { return m.p.LastStable() }

// txnPartition is partition "t"/0 holding, by offset: 0 producer 1's transactional
// batch, 1 its abort marker, 2 a plain batch, 3 producer 2's transactional batch (its
// transaction open), 4 a plain batch. HW 5, LSO 3.
func txnPartition(t *testing.T) *partlog.Partition {
	t.Helper()
	p := partlog.New("t", metadata.TopicID{1}, 0, 0, 0)
	if _, err := p.FinishLoad(-1, false, true); err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]byte{
		kafkatest.TxnBatch(1, 0, 0, []byte("aborted")),
		recbatch.EncodeMarker(recbatch.Marker{ProducerID: 1, Commit: false}, 1700000000000),
		kafkatest.Batch(-1, -1, -1, []byte("plain")),
		kafkatest.TxnBatch(2, 0, 0, []byte("open")),
		kafkatest.Batch(-1, -1, -1, []byte("after")),
	} {
		h, err := recbatch.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		pr, err := p.Prepare(&h, b, -1)
		if err != nil {
			t.Fatal(err)
		}
		p.Commit(pr, noWAL{}, 0)
	}
	return p
}

func batchBases(t *testing.T, b []byte) []int64 {
	t.Helper()
	var bases []int64
	for len(b) > 0 {
		h, err := recbatch.Frame(b)
		if err != nil {
			t.Fatal(err)
		}
		bases = append(bases, h.BaseOffset)
		b = b[h.Size():]
	}
	return bases
}

// TestFetchReadCommitted: isolation_level 1 serves nothing at or above the last stable
// offset and lists the aborted transactions the batches overlap; read_uncommitted sees
// every batch up to the high watermark, markers included, and no aborted list; both
// answer the LSO. ListOffsets' latest is the LSO for read_committed.
func TestFetchReadCommitted(t *testing.T) {
	s, be := startServer(t)
	p := txnPartition(t)
	be.reader = func(*metadata.Topic, int32) Reader { return memPart{p} }
	rc := dialRaw(t, s)
	corr := int32(0)
	fetch := func(isolation int8, offset int64) kmsg.FetchResponseTopicPartition {
		t.Helper()
		corr++
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.ReplicaID, req.MaxBytes, req.IsolationLevel = 12, -1, 1<<20, isolation
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 0, offset, 1<<20, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		rc.send(corr, req)
		out := recvDecode(t, rc, req).(*kmsg.FetchResponse).Topics[0].Partitions[0]
		if out.ErrorCode != 0 {
			t.Fatalf("fetch at %d: %v", offset, kerr.ErrorForCode(out.ErrorCode))
		}
		return out
	}
	out := fetch(1, 0)
	if got := batchBases(t, out.RecordBatches); !slices.Equal(got, []int64{0, 1, 2}) || out.LastStableOffset != 3 || out.HighWatermark != 5 {
		t.Fatalf("read_committed from 0: batches %v, LSO %d, HW %d", got, out.LastStableOffset, out.HighWatermark)
	}
	if len(out.AbortedTransactions) != 1 || out.AbortedTransactions[0].ProducerID != 1 || out.AbortedTransactions[0].FirstOffset != 0 {
		t.Fatalf("read_committed aborted transactions %+v", out.AbortedTransactions)
	}
	out = fetch(1, 2)
	if got := batchBases(t, out.RecordBatches); !slices.Equal(got, []int64{2}) || out.AbortedTransactions == nil || len(out.AbortedTransactions) != 0 {
		t.Fatalf("read_committed from 2: batches %v, aborted %+v (an empty list, not null)", got, out.AbortedTransactions)
	}
	if out = fetch(1, 3); len(out.RecordBatches) != 0 || out.LastStableOffset != 3 {
		t.Fatalf("read_committed at the LSO: %d bytes, LSO %d", len(out.RecordBatches), out.LastStableOffset)
	}
	out = fetch(0, 0)
	if got := batchBases(t, out.RecordBatches); !slices.Equal(got, []int64{0, 1, 2, 3, 4}) || out.AbortedTransactions != nil || out.LastStableOffset != 3 {
		t.Fatalf("read_uncommitted: batches %v, aborted %+v, LSO %d", got, out.AbortedTransactions, out.LastStableOffset)
	}

	latest := func(isolation int8) int64 {
		t.Helper()
		corr++
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version, req.ReplicaID, req.IsolationLevel = 5, -1, isolation
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 0, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		rc.send(corr, req)
		sp := recvDecode(t, rc, req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
		if sp.ErrorCode != 0 {
			t.Fatalf("list offsets: %v", kerr.ErrorForCode(sp.ErrorCode))
		}
		return sp.Offset
	}
	if got := latest(1); got != 3 {
		t.Fatalf("read_committed latest %d, want the LSO 3", got)
	}
	if got := latest(0); got != 5 {
		t.Fatalf("read_uncommitted latest %d, want the HW 5", got)
	}

	// Producer 2 commits: everything is stable, nothing more aborted.
	m := recbatch.EncodeMarker(recbatch.Marker{ProducerID: 2, Commit: true}, 1700000000000)
	h, _ := recbatch.Parse(m)
	pr, err := p.Prepare(&h, m, -1)
	if err != nil {
		t.Fatal(err)
	}
	p.Commit(pr, noWAL{}, 0)
	out = fetch(1, 2)
	if got := batchBases(t, out.RecordBatches); !slices.Equal(got, []int64{2, 3, 4, 5}) || out.LastStableOffset != 6 || len(out.AbortedTransactions) != 0 {
		t.Fatalf("after the commit: batches %v, LSO %d, aborted %+v", got, out.LastStableOffset, out.AbortedTransactions)
	}
	if got := latest(1); got != 6 {
		t.Fatalf("read_committed latest after the commit %d", got)
	}
}

// TestProduceTransactionalOption: a transactional batch is refused unless the front end
// is configured for transactions; a marker from a client is refused either way.
func TestProduceTransactionalOption(t *testing.T) {
	for _, on := range []bool{false, true} {
		meta, err := metadata.OpenLocal(metadata.LocalConfig{Path: t.TempDir() + "/metadata.json", Self: metadata.Broker{ID: 0, Host: "127.0.0.1", Port: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := meta.CreateTopic(context.Background(), metadata.TopicSpec{Name: "t", Partitions: 1, ReplicationFactor: -1}, false); err != nil {
			t.Fatal(err)
		}
		s, be := startServerWith(t, meta, func(c *Config) { c.Transactions = on })
		rc := dialRaw(t, s)
		produce := func(corr int32, batch []byte) int16 { return rawProduce(t, rc, corr, "t", batch) }
		want := kerr.InvalidTxnState.Code
		if on {
			want = 0
		}
		if code := produce(1, kafkatest.TxnBatch(4, 0, 0, []byte("a"))); code != want {
			t.Fatalf("transactions %v: transactional batch answered %v", on, kerr.ErrorForCode(code))
		}
		if code := produce(2, recbatch.EncodeMarker(recbatch.Marker{ProducerID: 4}, 1)); code != kerr.InvalidRecord.Code {
			t.Fatalf("transactions %v: marker answered %v", on, kerr.ErrorForCode(code))
		}
		be.mu.Lock()
		n := len(be.appends)
		be.mu.Unlock()
		if on && n != 1 || !on && n != 0 {
			t.Fatalf("transactions %v: %d appends", on, n)
		}
	}
}
