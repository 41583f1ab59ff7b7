package broker

// txnmarkers.go writes transaction markers: the partition side (AppendMarker, what
// WriteTxnMarkers and the peer op OpMarkers call on a partition's leader) and the
// coordinator side (txnMarkers, the txn.MarkerWriter: each partition's marker appended
// here when it is led here, else sent to its leader over the peer connection).

import (
	"context"
	"fmt"
	"time"

	"github.com/weir-io/weir/broker/kafka"
	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/broker/peer"
	"github.com/weir-io/weir/broker/txn"
	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
)

var _ kafka.MarkerAppender = backend{}

// AppendMarker implements kafka.MarkerAppender: the marker batch goes through the same
// append path as a produced batch (the WAL's sync, the lease, the fence), so a marker is
// acknowledged only once it is durable. On a __consumer_offsets partition the groups'
// offsets of the transaction are then committed or dropped (group.CompleteTxn) before
// the answer, so the coordinator completes a transaction only once its offsets are in
// place; a failure there is answered retriable (the coordinator writes the marker again,
// which ends nothing a second time, and completes the offsets then).
func (be backend) AppendMarker(t *metadata.Topic, index int32, m recbatch.Marker, done func(error)) {
	b := be.b
	p, err := b.lookup(t, index, true)
	if err != nil {
		done(err)
		return
	}
	batch := recbatch.EncodeMarker(m, b.now().UnixMilli())
	h, err := recbatch.Parse(batch)
	if err != nil {
		done(err)
		return
	}
	b.appendBatch(p, &h, batch, false, func(_, _, _ int64, err error) {
		if err != nil || t.Name != offsetsTopic {
			done(err)
			return
		}
		// Off the WAL's completion path: CompleteTxn writes group records itself.
		go func() { done(b.completeGroupTxn(p, len(t.Partitions), m)) }()
	})
}

// completeGroupTxn applies a marker appended to offsets partition p to its groups.
func (b *Broker) completeGroupTxn(p *partlog.Partition, n int, m recbatch.Marker) error {
	if b.groupPart(p.Index()).served.Load() != p {
		return fmt.Errorf("broker: %s/%d not loaded here: %w", offsetsTopic, p.Index(), partlog.ErrNotLeader)
	}
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := b.groups.CompleteTxn(ctx, belongsTo(p.Index(), n), m.ProducerID, m.Commit); err != nil {
		return fmt.Errorf("broker: completing the transaction's offsets in %s/%d: %w: %w", offsetsTopic, p.Index(), partlog.ErrNotLeader, err)
	}
	return nil
}

// txnMarkers is the coordinator's txn.MarkerWriter.
type txnMarkers struct{ b *Broker }

func (w txnMarkers) WriteMarkers(ctx context.Context, producer txn.Producer, commit bool, coordinatorEpoch int32, parts []txn.TopicPartition) []error {
	b := w.b
	v := b.meta.View()
	m := recbatch.Marker{ProducerID: producer.ID, ProducerEpoch: producer.Epoch, Commit: commit, CoordinatorEpoch: coordinatorEpoch}
	errs := make([]error, len(parts))
	byLeader := map[int32][]int{}
	for i, tp := range parts {
		t := v.Topics[tp.Topic]
		switch {
		case t == nil || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions):
			errs[i] = txn.ErrPartitionGone // deleted: no marker needed
		case t.Partitions[tp.Partition].Leader < 0:
			errs[i] = fmt.Errorf("broker: %s/%d has no leader: %w", tp.Topic, tp.Partition, partlog.ErrNotLeader)
		default:
			l := t.Partitions[tp.Partition].Leader
			byLeader[l] = append(byLeader[l], i)
		}
	}
	type result struct {
		idx []int
		err []error
	}
	results := make(chan result, len(byLeader))
	for leader, idx := range byLeader {
		go func() {
			if leader == b.cfg.NodeID {
				results <- result{idx, w.local(v, m, parts, idx)}
			} else {
				results <- result{idx, w.remote(ctx, v, leader, m, parts, idx)}
			}
		}()
	}
	for range byLeader {
		r := <-results
		for j, i := range r.idx {
			errs[i] = r.err[j]
		}
	}
	return errs
}

// local appends the marker to the partitions idx of parts, led here.
func (w txnMarkers) local(v *metadata.View, m recbatch.Marker, parts []txn.TopicPartition, idx []int) []error {
	refs := make([]markerRef, len(idx))
	for j, i := range idx {
		refs[j] = markerRef{v.Topics[parts[i].Topic], parts[i].Partition}
	}
	dones := w.b.appendMarkers(m, refs)
	errs := make([]error, len(idx))
	for j := range idx {
		errs[j] = <-dones[j]
	}
	return errs
}

// markerRef is a partition a marker goes to (t nil: unknown here).
type markerRef struct {
	t     *metadata.Topic
	index int32
}

// appendMarkers appends m to each partition of refs led here and returns a channel per
// partition that receives its outcome once (an unknown partition: ErrUnknownTopic).
func (b *Broker) appendMarkers(m recbatch.Marker, refs []markerRef) []chan error {
	dones := make([]chan error, len(refs))
	for i, r := range refs {
		dones[i] = make(chan error, 1)
		if r.t == nil || r.index < 0 || int(r.index) >= len(r.t.Partitions) {
			dones[i] <- fmt.Errorf("%w: partition %d", metadata.ErrUnknownTopic, r.index)
			continue
		}
		backend{b}.AppendMarker(r.t, r.index, m, func(err error) { dones[i] <- err })
	}
	return dones
}

// remote asks leader to append the marker to the partitions idx of parts (OpMarkers).
func (w txnMarkers) remote(ctx context.Context, v *metadata.View, leader int32, m recbatch.Marker, parts []txn.TopicPartition, idx []int) []error {
	errs := make([]error, len(idx))
	fail := func(err error) []error {
		for j := range errs {
			errs[j] = err
		}
		return errs
	}
	b := w.b
	if b.proxy == nil {
		return fail(fmt.Errorf("broker: no peer connections to reach broker %d: %w", leader, partlog.ErrNotLeader))
	}
	c, err := b.proxy.client(v, leader)
	if err != nil {
		return fail(fmt.Errorf("broker: reaching broker %d: %w: %w", leader, partlog.ErrNotLeader, err))
	}
	req := peer.MarkersRequest{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, Commit: m.Commit, CoordinatorEpoch: m.CoordinatorEpoch}
	for _, i := range idx {
		req.Parts = append(req.Parts, peer.PartitionRef{Topic: v.Topics[parts[i].Topic].ID, Partition: parts[i].Partition})
	}
	resp, err := c.Call(ctx, req.AppendTo(nil))
	if err != nil {
		return fail(fmt.Errorf("broker: markers to broker %d: %w: %w", leader, partlog.ErrNotLeader, err))
	}
	codes, err := peer.DecodeMarkersAnswer(resp, len(idx))
	if err != nil {
		return fail(fmt.Errorf("broker: markers answer from broker %d: %w: %w", leader, partlog.ErrNotLeader, err))
	}
	for j, c := range codes {
		if c != 0 {
			errs[j] = markerRefused{code: c, leader: leader}
		}
	}
	return errs
}

// markerRefused is a leader's refusal of a marker, with its Kafka code.
type markerRefused struct {
	code   int16
	leader int32
}

func (e markerRefused) Error() string {
	return fmt.Sprintf("broker: broker %d refused the marker with Kafka error %d", e.leader, e.code)
}

// KafkaCode implements kcode.Coded.
func (e markerRefused) KafkaCode() int16 { return e.code }

// serveMarkers answers an OpMarkers request from a coordinator on another broker.
func (b *Broker) serveMarkers(req peer.MarkersRequest, respond func([]byte)) {
	v := b.meta.View()
	m := recbatch.Marker{ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch, Commit: req.Commit, CoordinatorEpoch: req.CoordinatorEpoch}
	refs := make([]markerRef, len(req.Parts))
	for i, pr := range req.Parts {
		refs[i] = markerRef{v.TopicByID(pr.Topic), pr.Partition}
	}
	dones := b.appendMarkers(m, refs)
	go func() {
		codes := make([]int16, len(dones))
		for i := range dones {
			codes[i] = kafka.ErrorCode(<-dones[i])
		}
		respond(peer.AppendMarkersAnswer(nil, codes))
	}()
}
