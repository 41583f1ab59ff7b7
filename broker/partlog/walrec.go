package partlog

import (
	"encoding/binary"
	"fmt"

	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
)

// The broker's WAL record types (the WAL itself treats payloads as opaque):
//
//	RecBatch    topicID [16]byte | partition int32 (BE) | Kafka record batch v2, offsets assigned
//	RecOffsets  JSON {"g": group, "o": [offset commits or tombstones]} (legacy, replay only)
//	RecProxyBatch  as RecBatch, offsets not assigned: a batch this broker wrote as the
//	            proxy of another broker's partition (link.go); it is part of the log only
//	            if the leader linked it
//	RecLink     a Link (v1 or v2 by its version byte, link.go): a batch in a proxy's WAL taken into the
//	            log of a partition led here, with the offsets it got
//
// Batch bytes are stored exactly as fetchers receive them, so a fetch is a read of
// [pos+BatchRecHdr, +size) with no re-encoding.
const (
	RecBatch      byte = 1
	RecOffsets    byte = 2
	RecProxyBatch byte = 3
	RecLink       byte = 4

	// BatchRecHdr is the length of a batch record's prefix before the batch bytes.
	BatchRecHdr = 20
)

// EncodeBatchRec builds the payload of a RecBatch record.
func EncodeBatchRec(id metadata.TopicID, partition int32, batch []byte) []byte {
	p := make([]byte, BatchRecHdr+len(batch))
	copy(p, id[:])
	binary.BigEndian.PutUint32(p[16:], uint32(partition))
	copy(p[BatchRecHdr:], batch)
	return p
}

// BatchRecHead is the prefix of a RecBatch payload: with the batch as the rest
// (wal.Entry.Head and Payload) it is written without copying the batch first.
func BatchRecHead(id metadata.TopicID, partition int32) []byte {
	h := make([]byte, BatchRecHdr)
	copy(h, id[:])
	binary.BigEndian.PutUint32(h[16:], uint32(partition))
	return h
}

// DecodeBatchRec splits a RecBatch payload; batch aliases p.
func DecodeBatchRec(p []byte) (id metadata.TopicID, partition int32, batch []byte, err error) {
	if len(p) < BatchRecHdr+recbatch.HeaderLen {
		return id, 0, nil, fmt.Errorf("partlog: batch record of %d bytes is too short", len(p))
	}
	copy(id[:], p)
	return id, int32(binary.BigEndian.Uint32(p[16:])), p[BatchRecHdr:], nil
}
