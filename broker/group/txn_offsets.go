package group

// txn_offsets.go holds a group's pending transactional offsets: those a TxnOffsetCommit
// stored for a producer whose transaction has not ended. They are durable (Record.Txn)
// but not committed: OffsetFetch does not serve them, and with require_stable it answers
// UNSTABLE_OFFSET_COMMIT for their partitions. The end of the transaction (Record.TxnEnds,
// CompleteTxn) commits or drops them. The same rules run in memory and in the replay of a
// load (loadState), so both reach the same state from the same records.
//
// Kafka's rule when transactional and plain commits mix (OffsetMetadataManager.
// replayEndTransactionMarker): a committed transactional offset replaces the current one
// only if its record is later in the log. Kafka compares log offsets; here a pending
// offset is marked stale instead, at the moment a later record sets its partition (a
// plain commit, or another producer's transactional offset committed first), so a Full
// record needs no log positions: it carries the stale mark and lists pending offsets in
// log order (seq). A stale offset still makes its partition unstable until its
// transaction ends, as in Kafka. A tombstone (OffsetDelete, expiry, a deleted topic)
// drops the partition's pending offsets, as Kafka's replay of a tombstone does.

import "sort"

// TxnOffset is an offset committed in a transaction, pending until the transaction ends.
type TxnOffset struct {
	ProducerID    int64 `json:"producer_id"`
	ProducerEpoch int16 `json:"producer_epoch"`
	// Stale: a later record set the partition; the offset is not applied if the
	// transaction commits (it still makes the partition unstable until it ends).
	Stale  bool   `json:"stale,omitempty"`
	Offset Offset `json:"offset"` // Delete is never set
}

// TxnEnd is the end of a producer's transaction in a group: Commit makes its pending
// offsets committed, otherwise they are dropped.
type TxnEnd struct {
	ProducerID int64 `json:"producer_id"`
	Commit     bool  `json:"commit,omitempty"`
}

type topicPartition struct {
	topic     string
	partition int32
}

type pendingOffset struct {
	o     Offset
	seq   uint64 // log order among pending offsets
	stale bool
}

// producerTxn is one producer's open transaction in a group.
type producerTxn struct {
	epoch   int16
	offsets map[topicPartition]*pendingOffset
}

// txnOffsets is a group's pending transactional offsets by producer ID. The zero value is
// empty and ready.
type txnOffsets struct {
	seq   uint64
	byPID map[int64]*producerTxn
}

// add applies a pending offset (a Record.Txn entry): the producer's earlier one for the
// same partition is replaced.
func (t *txnOffsets) add(x TxnOffset) {
	if t.byPID == nil {
		t.byPID = map[int64]*producerTxn{}
	}
	p := t.byPID[x.ProducerID]
	if p == nil {
		p = &producerTxn{offsets: map[topicPartition]*pendingOffset{}}
		t.byPID[x.ProducerID] = p
	}
	p.epoch = max(p.epoch, x.ProducerEpoch)
	t.seq++
	o := x.Offset
	o.Delete = false
	p.offsets[topicPartition{o.Topic, o.Partition}] = &pendingOffset{o: o, seq: t.seq, stale: x.Stale}
}

// supersede: a plain commit of topic/partition is later than every pending offset of it.
func (t *txnOffsets) supersede(topic string, partition int32) {
	tp := topicPartition{topic, partition}
	for _, p := range t.byPID {
		if po := p.offsets[tp]; po != nil {
			po.stale = true
		}
	}
}

// drop: a tombstone of topic/partition removes its pending offsets too.
func (t *txnOffsets) drop(topic string, partition int32) {
	tp := topicPartition{topic, partition}
	for _, p := range t.byPID {
		delete(p.offsets, tp)
	}
}

// end applies a TxnEnd: on commit, set is called with each of the producer's offsets that
// no later record superseded, and every other producer's earlier offset of the same
// partition becomes stale (the committed one is later in the log).
func (t *txnOffsets) end(e TxnEnd, set func(Offset)) {
	p := t.byPID[e.ProducerID]
	if p == nil {
		return
	}
	delete(t.byPID, e.ProducerID)
	if !e.Commit {
		return
	}
	for tp, po := range p.offsets {
		if po.stale {
			continue
		}
		set(po.o)
		for _, q := range t.byPID {
			if other := q.offsets[tp]; other != nil && other.seq < po.seq {
				other.stale = true
			}
		}
	}
}

// unstable reports whether topic/partition has a pending offset of any producer.
func (t *txnOffsets) unstable(topic string, partition int32) bool {
	tp := topicPartition{topic, partition}
	for _, p := range t.byPID {
		if p.offsets[tp] != nil {
			return true
		}
	}
	return false
}

// empty reports whether no producer has a pending offset. A producer whose offsets were
// all dropped by tombstones still counts until its transaction ends (it is in the index
// of CompleteTxn), but holds nothing a Full record must keep.
func (t *txnOffsets) empty() bool {
	for _, p := range t.byPID {
		if len(p.offsets) > 0 {
			return false
		}
	}
	return true
}

// has reports whether producerID has an open transaction in the group.
func (t *txnOffsets) has(producerID int64) bool {
	_, ok := t.byPID[producerID]
	return ok
}

// epoch is the highest producer epoch of producerID's pending offsets.
func (t *txnOffsets) epoch(producerID int64) (int16, bool) {
	p := t.byPID[producerID]
	if p == nil {
		return 0, false
	}
	return p.epoch, true
}

// producers lists the producer IDs with an open transaction in the group.
func (t *txnOffsets) producers() []int64 {
	out := make([]int64, 0, len(t.byPID))
	for pid := range t.byPID {
		out = append(out, pid)
	}
	return out
}

// list is every pending offset in log order: what a Full record carries, so that a replay
// gives them the same order.
func (t *txnOffsets) list() []TxnOffset {
	type entry struct {
		x   TxnOffset
		seq uint64
	}
	var es []entry
	for pid, p := range t.byPID {
		for _, po := range p.offsets {
			es = append(es, entry{TxnOffset{ProducerID: pid, ProducerEpoch: p.epoch, Stale: po.stale, Offset: po.o}, po.seq})
		}
	}
	if len(es) == 0 {
		return nil
	}
	sort.Slice(es, func(i, j int) bool { return es[i].seq < es[j].seq })
	out := make([]TxnOffset, len(es))
	for i, e := range es {
		out[i] = e.x
	}
	return out
}
