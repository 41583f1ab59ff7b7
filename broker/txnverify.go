package broker

// txnverify.go is the broker's side of KIP-890 part 1's check on the produce path
// (broker/kafka/txnverify.go holds the gate): asking a transactional id's coordinator
// whether a partition is in its producer's transaction, here (txn.VerifyPartitions)
// or on the broker leading the id's __transaction_state partition (peer.OpVerifyTxn,
// over the peer connection the coordinator's markers use the other way), and answering
// that op for other leaders.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/weir-io/weir/broker/kafka"
	"github.com/weir-io/weir/broker/peer"
	"github.com/weir-io/weir/broker/txn"
)

var (
	_ kafka.TxnVerifier = txnFront{}
	_ kafka.TxnWriter   = localPartition{}
)

// OpenTxn implements kafka.TxnWriter.
func (lp localPartition) OpenTxn(pid int64) bool {
	_, ok := lp.p.OpenTxn(pid)
	return ok
}

// VerifyTxn implements kafka.TxnVerifier. The coordinator is the leader of the id's
// __transaction_state partition as this broker's view has it (a coordinator that moved
// since answers NOT_COORDINATOR, and the producer retries). No topic yet means no
// transaction began: COORDINATOR_NOT_AVAILABLE, as Kafka.
func (f txnFront) VerifyTxn(ctx context.Context, txnID string, pid int64, epoch int16, topic string, partition int32) error {
	b := f.b
	t, idx, err := b.txnPartition(ctx, txnID, false)
	if err != nil {
		return fmt.Errorf("%w: %w", txn.ErrCoordinatorNotAvailable, err)
	}
	leader := t.Partitions[idx].Leader
	switch {
	case leader < 0:
		return fmt.Errorf("%w: %s/%d has no leader", txn.ErrCoordinatorNotAvailable, txnStateTopic, idx)
	case leader == b.cfg.NodeID:
		return b.verifyLocal(txnID, pid, epoch, topic, partition)
	}
	c, err := b.proxy.client(b.meta.View(), leader)
	if err != nil {
		return fmt.Errorf("%w: reaching coordinator broker %d: %w", txn.ErrCoordinatorNotAvailable, leader, err)
	}
	req := peer.VerifyTxnRequest{TransactionalID: txnID, ProducerID: pid, ProducerEpoch: epoch, Topic: topic, Partition: partition}
	resp, err := c.Call(ctx, req.AppendTo(nil))
	if err != nil {
		return fmt.Errorf("%w: asking coordinator broker %d: %w", kerr.NetworkException, leader, err)
	}
	code, known, err := peer.DecodeVerifyTxnAnswer(resp)
	switch {
	case err != nil:
		return fmt.Errorf("%w: from coordinator broker %d: %w", kerr.NetworkException, leader, err)
	case !known:
		// A broker of an older build: it cannot check, so the batch goes in unchecked,
		// as Kafka's leader does when the coordinator does not know the verify-only form.
		return nil
	case code != 0:
		return fmt.Errorf("broker: coordinator broker %d: %w", leader, kerr.ErrorForCode(code))
	}
	return nil
}

// verifyLocal asks the coordinator on this broker.
func (b *Broker) verifyLocal(txnID string, pid int64, epoch int16, topic string, partition int32) error {
	per, err := b.txns.VerifyPartitions(txnID, txn.Producer{ID: pid, Epoch: epoch}, []txn.TopicPartition{{Topic: topic, Partition: partition}})
	if err != nil {
		return err
	}
	return per[0]
}

// serveVerifyTxn answers an OpVerifyTxn request from a partition leader.
func (b *Broker) serveVerifyTxn(body []byte, respond func([]byte)) {
	req, err := peer.DecodeVerifyTxnRequest(body)
	if err != nil {
		b.log.Warn("malformed verify-txn request", "err", err)
		respond(peer.AppendVerifyTxnAnswer(nil, kerr.InvalidRequest.Code))
		return
	}
	var code int16
	if b.txns == nil {
		code = kerr.CoordinatorNotAvailable.Code
	} else {
		code = kafka.ErrorCode(b.verifyLocal(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Topic, req.Partition))
	}
	respond(peer.AppendVerifyTxnAnswer(nil, code))
}
