package broker

// Fetch (key 1), versions 4-16.
//
// Reads synced batches (below the high watermark) of each partition from the tail cache,
// or from the WAL for evicted ones, bounded by partition max bytes and the response's max
// bytes; the first batch found is returned whole even when larger (KIP-74), so a consumer
// never gets stuck on a big batch. When less than min bytes is available the fetch waits up
// to max wait, woken by high-watermark advances of its partitions. Fetch sessions (KIP-227)
// are not kept: the answer carries session id 0, which tells clients to keep sending full
// fetches. v13+ name topics by ID. read_committed equals read_uncommitted: Weir has no
// transactions, so the last stable offset is the high watermark.

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/metadata"
)

type fetchTarget struct {
	p   *partition
	req *kmsg.FetchRequestTopicPartition
	out *kmsg.FetchResponseTopicPartition
}

func (b *Broker) handleFetch(c *conn, s *slot, req *kmsg.FetchRequest) {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	if req.Version >= 7 && req.SessionID != 0 {
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
		s.respond(resp)
		return
	}
	view := b.meta.View()
	var targets []fetchTarget
	for i := range req.Topics {
		rt := &req.Topics[i]
		var t *metadata.Topic
		if req.Version >= 13 {
			t = view.TopicByID(rt.TopicID)
		} else {
			t = view.Topics[rt.Topic]
		}
		st := kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		st.Partitions = make([]kmsg.FetchResponseTopicPartition, len(rt.Partitions))
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			out := &st.Partitions[j]
			*out = kmsg.NewFetchResponseTopicPartition()
			out.Partition = rp.Partition
			out.HighWatermark, out.LastStableOffset, out.LogStartOffset = -1, -1, -1
			p, err := b.lookup(t, rp.Partition, false)
			switch {
			case t == nil && req.Version >= 13:
				out.ErrorCode = kerr.UnknownTopicID.Code
			case err != nil:
				out.ErrorCode = kafkaCode(err)
			default:
				targets = append(targets, fetchTarget{p: p, req: rp, out: out})
			}
		}
		resp.Topics = append(resp.Topics, st)
	}

	maxBytes := int(req.MaxBytes)
	if maxBytes <= 0 {
		maxBytes = 52428800 // fetch.max.bytes default; v<3 has no field
	}
	// Register for wake-ups before the first read so an append between the read and the
	// wait cannot be missed.
	wake := make(chan struct{}, 1)
	wait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	if wait > 0 {
		for _, t := range targets {
			t.p.wait(wake)
		}
	}
	if got, errs := b.fillFetch(targets, maxBytes); got >= int(req.MinBytes) || errs || wait <= 0 || len(targets) == 0 {
		b.unwait(targets, wake)
		b.finishFetch(s, resp, targets)
		return
	}
	go func() {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		for {
			select {
			case <-wake:
				b.unwait(targets, wake) // drop stale registrations before registering again
			case <-timer.C:
				b.unwait(targets, wake)
				b.fillFetch(targets, maxBytes)
				b.finishFetch(s, resp, targets)
				return
			case <-c.ctx.Done():
				b.unwait(targets, wake)
				s.respond(resp) // never written; frees the slot
				return
			}
			for _, t := range targets {
				t.p.wait(wake)
			}
			if got, errs := b.fillFetch(targets, maxBytes); got >= int(req.MinBytes) || errs {
				b.unwait(targets, wake)
				b.finishFetch(s, resp, targets)
				return
			}
		}
	}()
}

// fillFetch (re)computes every target's answer; it reports the record bytes found and
// whether any partition has an error (which answers the fetch at once).
func (b *Broker) fillFetch(targets []fetchTarget, maxBytes int) (int, bool) {
	total, errs := 0, false
	for _, t := range targets {
		out := t.out
		out.RecordBatches = out.RecordBatches[:0]
		out.ErrorCode = 0
		limit := int(t.req.PartitionMaxBytes)
		if rem := maxBytes - total; rem < limit {
			limit = rem
		}
		if limit < 0 {
			limit = 0
		}
		var buf []byte
		var err error
		// A second try covers a read that raced with a WAL trim: the index then sends
		// it to object storage.
		for try := 0; try < 2; try++ {
			var pieces []readPiece
			var hw, logStart int64
			pieces, hw, logStart, err = t.p.read(t.req.FetchOffset, limit, total == 0, t.req.CurrentLeaderEpoch)
			out.HighWatermark, out.LastStableOffset, out.LogStartOffset = hw, hw, logStart
			if err != nil {
				break
			}
			if buf, err = b.readPieces(t, pieces, limit, total == 0); err == nil {
				break
			}
		}
		if err != nil {
			out.ErrorCode = kafkaCode(err)
			errs = true
			continue
		}
		out.RecordBatches = buf
		total += len(buf)
	}
	return total, errs
}

// readPieces reads what partition.read located: cached bytes, WAL ranges, or objects.
// A WAL read failure after some bytes returns those (the consumer asks again from there).
func (b *Broker) readPieces(t fetchTarget, pieces []readPiece, limit int, first bool) ([]byte, error) {
	if len(pieces) == 1 && pieces[0].objs != nil {
		ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
		defer cancel()
		data, err := b.objReader.Read(ctx, t.p.id, t.p.index, t.req.FetchOffset, limit, pieces[0].objs)
		if err != nil {
			b.log.Warn("fetch: object read failed", "topic", t.p.topic, "partition", t.p.index, "offset", t.req.FetchOffset, "err", err)
			return nil, fmt.Errorf("%w: %w", errStorage, err)
		}
		if !first && len(data) > limit {
			return nil, nil // only the first partition may exceed its limit (KIP-74)
		}
		return data, nil
	}
	n := 0
	for _, pc := range pieces {
		n += int(pc.size)
	}
	buf := make([]byte, 0, n)
	for _, pc := range pieces {
		if pc.data != nil {
			buf = append(buf, pc.data...)
			continue
		}
		start := len(buf)
		buf = buf[:start+int(pc.size)]
		if err := pc.src.ReadAt(buf[start:], pc.pos); err != nil {
			b.log.Warn("fetch: WAL read failed", "topic", t.p.topic, "partition", t.p.index, "pos", pc.pos, "err", err)
			if start == 0 {
				return nil, fmt.Errorf("%w: %w", errStorage, err)
			}
			return buf[:start], nil
		}
	}
	return buf, nil
}

// finishFetch accounts the bytes served and answers.
func (b *Broker) finishFetch(s *slot, resp *kmsg.FetchResponse, targets []fetchTarget) {
	for _, t := range targets {
		if n := len(t.out.RecordBatches); n > 0 {
			b.metrics.bytesOut.WithLabelValues(t.p.topic).Add(float64(n))
		}
	}
	s.respond(resp)
}

// unwait removes wake from the partitions' waiter lists so idle partitions do not
// accumulate stale channels from repeated long polls.
func (b *Broker) unwait(targets []fetchTarget, wake chan struct{}) {
	for _, t := range targets {
		p := t.p
		p.mu.Lock()
		for i, w := range p.waiters {
			if w == wake {
				p.waiters[i] = p.waiters[len(p.waiters)-1]
				p.waiters = p.waiters[:len(p.waiters)-1]
				break
			}
		}
		p.mu.Unlock()
	}
}
