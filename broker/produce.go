package broker

// Produce (key 0), versions 3-11.
//
// Each partition's data must be exactly one record batch v2 (Kafka's rule for v3+). The
// batch is validated (size against the topic's max.message.bytes, CRC32C, header sanity,
// no transactional or control batches), copied once into a WAL record and queued on the
// WAL. Offsets are assigned when the WAL's committer prepares the record, so offset order
// is log order, and the partition acknowledges only after the record's group has been
// fdatasync'ed. acks=0, 1 and all are therefore equally durable; acks=0 just sends no
// answer (and, like Kafka, closes the connection if a partition failed so the client
// notices). A retried idempotent batch is answered with the offset its original got, once
// that original is durable.

import (
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/wal"
)

func (b *Broker) handleProduce(c *conn, s *slot, req *kmsg.ProduceRequest) {
	if req.TransactionID != nil {
		resp := produceError(req, kerr.TransactionalIDAuthorizationFailed.Code)
		s.respond(resp)
		return
	}
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	// Uploads behind and the WAL filling up: slow this connection down first (its next
	// request is read only after this one is queued), refuse at the limit.
	delay, walErr := b.produceBackpressure()
	if delay > 0 {
		resp.ThrottleMillis = int32(delay / time.Millisecond)
		select {
		case <-time.After(delay):
		case <-b.ctx.Done():
		}
	}
	view := b.meta.View()

	// Each partition's answer is written by its own WAL callback (distinct elements);
	// the last callback's pending.Add orders those writes before the response is sent.
	var pending atomic.Int32
	pending.Store(1) // released after all partitions are queued
	var failed atomic.Bool
	finish := func() {
		if pending.Add(-1) != 0 {
			return
		}
		if req.Acks == 0 {
			if failed.Load() {
				s.closeIt = true
			}
			s.respond(nil)
			return
		}
		s.respond(resp)
	}

	for _, rt := range req.Topics {
		t := view.Topics[rt.Topic]
		if t == nil && b.cfg.AutoCreateTopics && metadata.ValidTopicName(rt.Topic) == nil {
			t = b.autoCreate(c, rt.Topic)
			if t != nil {
				// Make sure the broker has the partitions before appending.
				b.syncPartitions(b.meta.View())
			}
		}
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		resp.Topics = append(resp.Topics, st)
		sp := resp.Topics[len(resp.Topics)-1].Partitions
		for i, rp := range rt.Partitions {
			out := &sp[i]
			*out = kmsg.NewProduceResponseTopicPartition()
			out.Partition = rp.Partition
			p, err := b.lookup(t, rp.Partition, true)
			if err == nil && !b.leaseOK() {
				err = errNotLeader
			}
			if err == nil && walErr != nil {
				err = walErr
				out.ErrorMessage = errMessage(err)
			}
			if err != nil {
				out.ErrorCode = kafkaCode(err)
				failed.Store(true)
				b.metrics.produceErrs.WithLabelValues(kerr.ErrorForCode(out.ErrorCode).Error()).Inc()
				continue
			}
			maxBytes, _ := t.Config("max.message.bytes")
			mb, _ := strconv.Atoi(maxBytes)
			h, err := validateProduceBatch(rp.Records, mb)
			if err != nil {
				out.ErrorCode = kafkaCode(err)
				out.ErrorMessage = errMessage(err)
				failed.Store(true)
				b.metrics.produceErrs.WithLabelValues(kerr.ErrorForCode(out.ErrorCode).Error()).Inc()
				continue
			}
			tsType, _ := t.Config("message.timestamp.type")
			appendTime := tsType == "LogAppendTime"
			pending.Add(1)
			b.appendBatch(p, &h, rp.Records, appendTime, func(base, logStart, stamped int64, err error) {
				if err != nil {
					out.ErrorCode = kafkaCode(err)
					out.ErrorMessage = errMessage(err)
					failed.Store(true)
					b.metrics.produceErrs.WithLabelValues(kerr.ErrorForCode(out.ErrorCode).Error()).Inc()
				} else {
					out.BaseOffset = base
					out.LogStartOffset = logStart
					out.LogAppendTime = stamped
				}
				finish()
			})
		}
	}
	finish()
}

// appendBatch queues batch on the WAL for p; done runs on the WAL committer once the batch
// is durable (or failed), with the base offset it got.
// stamped is the LogAppendTime given to the batch, or -1.
func (b *Broker) appendBatch(p *partition, h *batchHeader, batch []byte, logAppendTime bool, done func(base, logStart, stamped int64, err error)) {
	payload := encodeBatchRec(p.id, p.index, batch)
	var res prepareResult
	stamped := int64(-1)
	b.wal.Append(wal.Entry{
		Type:    recBatch,
		Payload: payload,
		Prepare: func(pl []byte) error {
			if logAppendTime {
				stamped = b.now().UnixMilli()
			}
			var err error
			res, err = p.prepare(h, pl[batchRecHdr:], stamped)
			if err == nil && res.dup != nil {
				return res.dup // nothing to write
			}
			return err
		},
		Done: func(pos wal.Pos, err error) {
			var dup *errDuplicate
			switch {
			case errors.As(err, &dup):
				// The original was prepared earlier in log order, so by now it is
				// either synced or rolled back.
				logStart, hw := p.offsets()
				if dup.Offset < hw {
					done(dup.Offset, logStart, stamped, nil)
				} else {
					done(0, 0, -1, wal.ErrFailed)
				}
			case err != nil:
				if res.loc != nil {
					p.rollback(res.loc.base)
				}
				done(0, 0, -1, err)
			default:
				p.commit(res.loc, b.wal, pos+batchRecHdr)
				b.cache.add(p, res.loc)
				b.metrics.bytesIn.WithLabelValues(p.topic).Add(float64(len(batch)))
				if !b.leaseOK() {
					// Durable, but this broker may already be fenced: no ack. The client
					// retries at the leader the metadata names.
					done(0, 0, -1, errNotLeader)
					return
				}
				logStart, _ := p.offsets()
				done(res.loc.base, logStart, stamped, nil)
			}
		},
	})
}

// autoCreate creates a topic with the broker's defaults; a concurrent creation is fine.
func (b *Broker) autoCreate(c *conn, name string) *metadata.Topic {
	_, err := b.meta.CreateTopic(c.ctx, metadata.TopicSpec{Name: name, Partitions: b.cfg.DefaultPartitions, ReplicationFactor: -1}, false)
	if err != nil && !errors.Is(err, metadata.ErrTopicExists) {
		b.log.Warn("auto-create topic failed", "topic", name, "err", err)
		return nil
	}
	return b.meta.View().Topics[name]
}

func produceError(req *kmsg.ProduceRequest, code int16) *kmsg.ProduceResponse {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.ErrorCode = code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
