package kafka

// AddPartitionsToTxn (key 24), versions 0-4, served when transactions are on (txn.go).
//
// v0-v3: a producer adds partitions to its transaction before its first batch to each:
// WRITE on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every
// partition), WRITE on each topic (TOPIC_AUTHORIZATION_FAILED for that topic's partitions,
// and OPERATION_NOT_ATTEMPTED for the others, as Kafka), UNKNOWN_TOPIC_OR_PARTITION for a
// partition that does not exist (likewise). v4 is the batched form partition leaders use
// to verify a partition is in a transaction (KIP-890): CLUSTER_ACTION on the cluster, one
// answer per transaction. v5 (transactions v2) is not served: clients then use v4- and
// the classic protocol.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/security/acl"
)

func init() {
	register(api{key: 24, min: 0, max: 4, blocking: true, on: txnOn, handle: answer((*Server).handleAddPartitionsToTxn)})
}

// errNotAttempted marks partitions left alone because others of the request failed.
var errNotAttempted = errors.New("kafka: not attempted: another partition of the request failed")

func (s *Server) handleAddPartitionsToTxn(ctx context.Context, req *kmsg.AddPartitionsToTxnRequest) *kmsg.AddPartitionsToTxnResponse {
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if req.Version >= 4 {
		if !allowedCluster(ctx, acl.OpClusterAction) {
			resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			return resp
		}
		for _, tx := range req.Transactions {
			rt := kmsg.NewAddPartitionsToTxnResponseTransaction()
			rt.TransactionalID = tx.TransactionalID
			var parts []TxnPartition
			for _, t := range tx.Topics {
				for _, p := range t.Partitions {
					parts = append(parts, TxnPartition{t.Topic, p})
				}
			}
			errs := s.addPartitions(ctx, tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, parts, tx.VerifyOnly)
			rt.Topics = txnPartitionAnswers(req.Version, parts, errs, func(topic string) kmsg.AddPartitionsToTxnResponseTransactionTopic {
				x := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
				x.Topic = topic
				return x
			}, func(x *kmsg.AddPartitionsToTxnResponseTransactionTopic, p int32, code int16) {
				rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				rp.Partition, rp.ErrorCode = p, code
				x.Partitions = append(x.Partitions, rp)
			})
			resp.Transactions = append(resp.Transactions, rt)
		}
		return resp
	}
	var parts []TxnPartition
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			parts = append(parts, TxnPartition{t.Topic, p})
		}
	}
	errs := s.addPartitions(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, parts, false)
	resp.Topics = txnPartitionAnswers(req.Version, parts, errs, func(topic string) kmsg.AddPartitionsToTxnResponseTopic {
		x := kmsg.NewAddPartitionsToTxnResponseTopic()
		x.Topic = topic
		return x
	}, func(x *kmsg.AddPartitionsToTxnResponseTopic, p int32, code int16) {
		rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
		rp.Partition, rp.ErrorCode = p, code
		x.Partitions = append(x.Partitions, rp)
	})
	return resp
}

// addPartitions checks the request's authorization and partitions, then asks the
// coordinator; one error per part.
func (s *Server) addPartitions(ctx context.Context, txnID string, pid int64, epoch int16, parts []TxnPartition, verifyOnly bool) []error {
	errs := make([]error, len(parts))
	fill := func(err error) []error {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	if !verifyOnly && !acl.Allowed(ctx, acl.OpWrite, acl.ResourceTransactionalID, txnID) {
		return fill(kerr.TransactionalIDAuthorizationFailed)
	}
	view := s.meta.View()
	failed := false
	for i, p := range parts {
		t := view.Topics[p.Topic]
		switch {
		case !verifyOnly && !allowedTopic(ctx, acl.OpWrite, p.Topic):
			errs[i], failed = kerr.TopicAuthorizationFailed, true
		case t == nil || p.Partition < 0 || int(p.Partition) >= len(t.Partitions):
			errs[i], failed = kerr.UnknownTopicOrPartition, true
		}
	}
	if failed {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = errNotAttempted
			}
		}
		return errs
	}
	return s.txn.AddPartitions(ctx, txnID, pid, epoch, parts, verifyOnly)
}

// txnPartitionAnswers groups per-partition answers by topic, in request order.
func txnPartitionAnswers[T any](v int16, parts []TxnPartition, errs []error, newTopic func(string) T, add func(*T, int32, int16)) []T {
	var out []T
	idx := map[string]int{}
	for i, p := range parts {
		j, ok := idx[p.Topic]
		if !ok {
			j = len(out)
			idx[p.Topic] = j
			out = append(out, newTopic(p.Topic))
		}
		var err error
		if i < len(errs) {
			err = errs[i]
		}
		code := int16(0)
		switch {
		case errors.Is(err, errNotAttempted):
			code = kerr.OperationNotAttempted.Code
		case err != nil:
			code = txnCode(err, 24, v)
		}
		add(&out[j], p.Partition, code)
	}
	return out
}
