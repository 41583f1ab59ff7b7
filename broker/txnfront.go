package broker

import (
	"context"
	"errors"
	"time"

	"github.com/weir-io/weir/broker/kafka"
	"github.com/weir-io/weir/broker/txn"
	"github.com/weir-io/weir/metadata"
)

// txnFront adapts the transaction coordinator (broker/txn) to what the Kafka front end
// asks of it (kafka.TxnCoordinator): milliseconds to durations, the verify-only form of
// AddPartitions, and the __transaction_state partition of an id.
type txnFront struct{ b *Broker }

var _ kafka.TxnCoordinator = txnFront{}

// txnStateTopic is the transaction coordinator's internal topic.
const txnStateTopic = txn.TopicName

// txnPartition returns the __transaction_state partition of id, creating the topic if it
// does not exist yet (create).
func (b *Broker) txnPartition(ctx context.Context, id string, create bool) (*metadata.Topic, int32, error) {
	t, err := b.internalTopic(ctx, txnStateTopic, int32(b.cfg.Txn.Partitions), create)
	if err != nil {
		return nil, 0, err
	}
	if len(t.Partitions) != b.cfg.Txn.Partitions {
		// The placement of ids depends on the count: a topic made with another count
		// (another configuration) would send ids to partitions whose coordinator does
		// not know them.
		return nil, 0, errTxnPartitions
	}
	return t, txn.PartitionFor(id, len(t.Partitions)), nil
}

// errTxnPartitions: __transaction_state's partition count is not the configured one.
var errTxnPartitions = errors.New("broker: __transaction_state has another partition count than --txn-state-partitions")

func (f txnFront) Partition(ctx context.Context, id string, create bool) (*metadata.Topic, int32, error) {
	return f.b.txnPartition(ctx, id, create)
}

func (f txnFront) InitProducerID(ctx context.Context, id string, timeoutMs int32, pid int64, epoch int16) (int64, int16, error) {
	p, err := f.b.txns.InitProducerID(ctx, id, time.Duration(timeoutMs)*time.Millisecond, txn.Producer{ID: pid, Epoch: epoch})
	return p.ID, p.Epoch, err
}

func (f txnFront) AddPartitions(ctx context.Context, id string, pid int64, epoch int16, parts []kafka.TxnPartition, verifyOnly bool) []error {
	tps := make([]txn.TopicPartition, len(parts))
	for i, p := range parts {
		tps[i] = txn.TopicPartition{Topic: p.Topic, Partition: p.Partition}
	}
	prod := txn.Producer{ID: pid, Epoch: epoch}
	errs := make([]error, len(parts))
	if verifyOnly {
		per, err := f.b.txns.VerifyPartitions(id, prod, tps)
		if err != nil {
			for i := range errs {
				errs[i] = err
			}
			return errs
		}
		copy(errs, per)
		return errs
	}
	if err := f.b.txns.AddPartitions(ctx, id, prod, tps); err != nil {
		for i := range errs {
			errs[i] = err
		}
	}
	return errs
}

func (f txnFront) AddOffsets(ctx context.Context, id string, pid int64, epoch int16, group string) error {
	return f.b.txns.AddOffsets(ctx, id, txn.Producer{ID: pid, Epoch: epoch}, group)
}

func (f txnFront) EndTxn(ctx context.Context, id string, pid int64, epoch int16, commit bool) error {
	if err := f.b.txns.EndTxn(ctx, id, txn.Producer{ID: pid, Epoch: epoch}, commit); err != nil {
		return err
	}
	// The outcome is durable; answer once its markers are written too (a bounded wait:
	// txn.Coordinator.AwaitComplete says why), so the producer's next transaction is not
	// refused while they are.
	wctx, cancel := context.WithTimeout(ctx, endTxnMarkerWait)
	defer cancel()
	f.b.txns.AwaitComplete(wctx, id)
	return nil
}

// endTxnMarkerWait bounds how long EndTxn's answer waits for the markers.
const endTxnMarkerWait = 5 * time.Second

func (f txnFront) Describe(_ context.Context, ids []string) []kafka.TxnDescription {
	out := make([]kafka.TxnDescription, 0, len(ids))
	for _, id := range ids {
		d, err := f.b.txns.Describe(id)
		td := kafka.TxnDescription{TxnID: id, Err: err, State: d.State.String(), TimeoutMs: int32(d.Timeout / time.Millisecond),
			StartMs: -1, ProducerID: d.ProducerID, ProducerEpoch: d.ProducerEpoch}
		if !d.Start.IsZero() {
			td.StartMs = d.Start.UnixMilli()
		}
		for _, p := range d.Partitions {
			td.Partitions = append(td.Partitions, kafka.TxnPartition{Topic: p.Topic, Partition: p.Partition})
		}
		out = append(out, td)
	}
	return out
}

func (f txnFront) List(_ context.Context, states []string, pids []int64) []kafka.TxnListing {
	list, _, err := f.b.txns.List(txn.ListFilter{States: states, ProducerIDs: pids})
	if err != nil {
		return nil
	}
	out := make([]kafka.TxnListing, 0, len(list))
	for _, l := range list {
		out = append(out, kafka.TxnListing{TxnID: l.TransactionalID, ProducerID: l.ProducerID, State: l.State.String()})
	}
	return out
}

// offsetsPartitionOf is txn.Deps.OffsetsPartition: the __consumer_offsets partition of
// group (the topic's partition count, or the configured one before it exists).
func (b *Broker) offsetsPartitionOf(group string) int32 {
	n := int(b.cfg.OffsetsTopicPartitions)
	if t := b.meta.View().Topics[offsetsTopic]; t != nil && len(t.Partitions) > 0 {
		n = len(t.Partitions)
	}
	return groupIndex(group, n)
}
