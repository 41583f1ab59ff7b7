package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Record batch v2 layout (all big endian), as on the wire and in the WAL:
//
//	 0 baseOffset int64          rewritten by the broker
//	 8 batchLength int32         bytes after this field
//	12 partitionLeaderEpoch int32 rewritten by the broker
//	16 magic int8 (2)
//	17 crc uint32               CRC32C of bytes 21..end
//	21 attributes int16         bits 0-2 compression, 3 timestamp type, 4 transactional, 5 control
//	23 lastOffsetDelta int32
//	27 baseTimestamp int64
//	35 maxTimestamp int64
//	43 producerId int64
//	51 producerEpoch int16
//	53 baseSequence int32
//	57 recordCount int32
//	61 records...
//
// The CRC does not cover baseOffset and partitionLeaderEpoch, so offsets are assigned by
// writing those fields in place without touching the records or the CRC.
const batchHeaderLen = 61

var (
	errBatchTooShort   = errors.New("broker: record batch too short")
	errBatchLength     = errors.New("broker: record batch length does not match its frame")
	errBatchMagic      = errors.New("broker: unsupported record batch magic (only v2)")
	errBatchCRC        = errors.New("broker: record batch CRC mismatch")
	errBatchInvalid    = errors.New("broker: invalid record batch")
	errBatchTxn        = errors.New("broker: transactional batches are not supported")
	errBatchMultiple   = errors.New("broker: produce must carry exactly one record batch per partition")
	errMessageTooLarge = errors.New("broker: record batch larger than max.message.bytes")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// batchHeader is the parsed fixed header of a v2 record batch.
type batchHeader struct {
	BaseOffset      int64
	Length          int32
	LeaderEpoch     int32
	Magic           int8
	CRC             uint32
	Attributes      int16
	LastOffsetDelta int32
	BaseTimestamp   int64
	MaxTimestamp    int64
	ProducerID      int64
	ProducerEpoch   int16
	BaseSequence    int32
	RecordCount     int32
}

func (h *batchHeader) transactional() bool { return h.Attributes&0x10 != 0 }
func (h *batchHeader) control() bool       { return h.Attributes&0x20 != 0 }
func (h *batchHeader) idempotent() bool    { return h.ProducerID >= 0 }

// parseBatchHeader decodes the header of one batch without validating its CRC.
func parseBatchHeader(b []byte) (batchHeader, error) {
	var h batchHeader
	if len(b) < 17 {
		return h, errBatchTooShort
	}
	h.BaseOffset = int64(binary.BigEndian.Uint64(b[0:]))
	h.Length = int32(binary.BigEndian.Uint32(b[8:]))
	h.LeaderEpoch = int32(binary.BigEndian.Uint32(b[12:]))
	h.Magic = int8(b[16])
	if h.Magic != 2 {
		return h, fmt.Errorf("%w: magic %d", errBatchMagic, h.Magic)
	}
	if len(b) < batchHeaderLen {
		return h, errBatchTooShort
	}
	h.CRC = binary.BigEndian.Uint32(b[17:])
	h.Attributes = int16(binary.BigEndian.Uint16(b[21:]))
	h.LastOffsetDelta = int32(binary.BigEndian.Uint32(b[23:]))
	h.BaseTimestamp = int64(binary.BigEndian.Uint64(b[27:]))
	h.MaxTimestamp = int64(binary.BigEndian.Uint64(b[35:]))
	h.ProducerID = int64(binary.BigEndian.Uint64(b[43:]))
	h.ProducerEpoch = int16(binary.BigEndian.Uint16(b[51:]))
	h.BaseSequence = int32(binary.BigEndian.Uint32(b[53:]))
	h.RecordCount = int32(binary.BigEndian.Uint32(b[57:]))
	return h, nil
}

// validateProduceBatch checks that records holds exactly one well-formed v2 batch with a
// correct CRC, as Kafka requires of Produce v3+.
func validateProduceBatch(records []byte, maxBytes int) (batchHeader, error) {
	h, err := parseBatchHeader(records)
	if err != nil {
		return h, err
	}
	if h.Length < batchHeaderLen-12 {
		return h, errBatchLength
	}
	total := int(h.Length) + 12
	if total > len(records) {
		return h, errBatchLength
	}
	if total < len(records) {
		return h, errBatchMultiple
	}
	if maxBytes > 0 && total > maxBytes {
		return h, fmt.Errorf("%w: %d > %d", errMessageTooLarge, total, maxBytes)
	}
	if crc32.Checksum(records[21:], castagnoli) != h.CRC {
		return h, errBatchCRC
	}
	if h.RecordCount <= 0 || h.LastOffsetDelta != h.RecordCount-1 {
		return h, fmt.Errorf("%w: %d records with last offset delta %d", errBatchInvalid, h.RecordCount, h.LastOffsetDelta)
	}
	if h.control() {
		return h, fmt.Errorf("%w: clients may not send control batches", errBatchInvalid)
	}
	if h.transactional() {
		return h, errBatchTxn
	}
	if h.ProducerID >= 0 && (h.ProducerEpoch < 0 || h.BaseSequence < 0) {
		return h, fmt.Errorf("%w: idempotent batch without epoch or sequence", errBatchInvalid)
	}
	return h, nil
}

// setBatchOffsetEpoch writes the assigned base offset and leader epoch in place.
func setBatchOffsetEpoch(b []byte, baseOffset int64, epoch int32) {
	binary.BigEndian.PutUint64(b[0:], uint64(baseOffset))
	binary.BigEndian.PutUint32(b[12:], uint32(epoch))
}

// setLogAppendTime stamps a batch for message.timestamp.type=LogAppendTime: the timestamp
// type bit and maxTimestamp are covered by the CRC, so it is recomputed.
func setLogAppendTime(b []byte, nowMs int64) {
	attrs := binary.BigEndian.Uint16(b[21:]) | 0x08
	binary.BigEndian.PutUint16(b[21:], attrs)
	binary.BigEndian.PutUint64(b[35:], uint64(nowMs))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
}
