// Package kafkatest builds Kafka wire data for tests: record batches as a client would
// encode them, and raw produce requests, so tests can send exactly the bytes they mean.
package kafkatest

import (
	"context"
	"encoding/binary"
	"github.com/weir-io/weir/internal/crc32c"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Batch encodes an uncompressed record batch v2 with one record per value. pid -1 makes a
// non-idempotent batch; otherwise epoch and seq are the producer's.
func Batch(pid int64, epoch int16, seq int32, values ...[]byte) []byte {
	var recs []byte
	for i, v := range values {
		var r []byte
		r = append(r, 0)                          // attributes
		r = binary.AppendVarint(r, 0)             // timestamp delta
		r = binary.AppendVarint(r, int64(i))      // offset delta
		r = binary.AppendVarint(r, -1)            // key: null
		r = binary.AppendVarint(r, int64(len(v))) // value
		r = append(r, v...)
		r = binary.AppendVarint(r, 0) // headers
		recs = binary.AppendVarint(recs, int64(len(r)))
		recs = append(recs, r...)
	}
	const hdr = 61
	b := make([]byte, hdr, hdr+len(recs))
	binary.BigEndian.PutUint32(b[8:], uint32(hdr-12+len(recs)))
	b[16] = 2
	binary.BigEndian.PutUint32(b[23:], uint32(len(values)-1))
	binary.BigEndian.PutUint64(b[27:], 1700000000000)
	binary.BigEndian.PutUint64(b[35:], 1700000000000)
	binary.BigEndian.PutUint64(b[43:], uint64(pid))
	binary.BigEndian.PutUint16(b[51:], uint16(epoch))
	binary.BigEndian.PutUint32(b[53:], uint32(seq))
	binary.BigEndian.PutUint32(b[57:], uint32(len(values)))
	b = append(b, recs...)
	binary.BigEndian.PutUint32(b[17:], crc32c.Checksum(b[21:]))
	return b
}

// TxnBatch is Batch with the transactional attribute: a transactional producer's data.
func TxnBatch(pid int64, epoch int16, seq int32, values ...[]byte) []byte {
	b := Batch(pid, epoch, seq, values...)
	binary.BigEndian.PutUint16(b[21:], binary.BigEndian.Uint16(b[21:])|0x10)
	binary.BigEndian.PutUint32(b[17:], crc32c.Checksum(b[21:]))
	return b
}

// Produce sends one batch to topic/partition with acks=all and returns the partition's
// answer; err is a transport error only.
func Produce(ctx context.Context, cl *kgo.Client, topic string, partition int32, batch []byte) (kmsg.ProduceResponseTopicPartition, error) {
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return kmsg.ProduceResponseTopicPartition{}, err
	}
	return resp.Topics[0].Partitions[0], nil
}
