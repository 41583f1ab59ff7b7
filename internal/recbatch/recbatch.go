// Package recbatch is the one parser of Kafka's record batch v2 header in the tree: the
// broker validates produced batches and assigns offsets with it, the object format splits
// stored runs of batches with it, and the broker builds its own internal batches
// (committed offsets) with it.
//
// Record batch v2 layout (all big endian), as on the wire, in the WAL and in objects:
//
//	 0 baseOffset int64           rewritten by the broker
//	 8 batchLength int32          bytes after this field
//	12 partitionLeaderEpoch int32 rewritten by the broker
//	16 magic int8 (2)
//	17 crc uint32                 CRC32C of bytes 21..end
//	21 attributes int16           bits 0-2 compression, 3 timestamp type, 4 transactional, 5 control
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
package recbatch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/weir-io/weir/internal/crc32c"
)

// HeaderLen is the fixed header's size; records follow it.
const HeaderLen = 61

// Sentinel errors; wrap with %w. The broker maps them to Kafka error codes at its edge.
var (
	ErrTooShort        = errors.New("recbatch: record batch too short")
	ErrLength          = errors.New("recbatch: record batch length does not match its frame")
	ErrMagic           = errors.New("recbatch: unsupported record batch magic (only v2)")
	ErrCRC             = errors.New("recbatch: record batch CRC mismatch")
	ErrInvalid         = errors.New("recbatch: invalid record batch")
	ErrTransactional   = errors.New("recbatch: transactional batches are not supported")
	ErrMultiple        = errors.New("recbatch: produce must carry exactly one record batch per partition")
	ErrMessageTooLarge = errors.New("recbatch: record batch larger than max.message.bytes")
	// ErrNullKey: a record without a key for a compacted topic (RecordRules.RequireKeys);
	// always wrapped with ErrInvalid (INVALID_RECORD, as Kafka answers).
	ErrNullKey = errors.New("recbatch: compacted topic cannot accept a record without a key")
)

// Header is the parsed fixed header of a v2 record batch.
type Header struct {
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

// The attribute bits of a batch that say what it is in transactions.
const (
	AttrTransactional int16 = 0x10
	AttrControl       int16 = 0x20
)

// Transactional reports the transactional attribute bit.
func (h *Header) Transactional() bool { return h.Attributes&AttrTransactional != 0 }

// Control reports the control-batch attribute bit.
func (h *Header) Control() bool { return h.Attributes&AttrControl != 0 }

// Idempotent reports whether the batch carries a producer ID.
func (h *Header) Idempotent() bool { return h.ProducerID >= 0 }

// LastOffset is the offset of the batch's last record.
func (h *Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// Size is the batch's whole length in bytes (12 + batchLength).
func (h *Header) Size() int { return int(h.Length) + 12 }

// Parse decodes the header of the batch at the start of b without validating its CRC or
// its length against b.
func Parse(b []byte) (Header, error) {
	var h Header
	if len(b) < 17 {
		return h, ErrTooShort
	}
	h.BaseOffset = int64(binary.BigEndian.Uint64(b[0:]))
	h.Length = int32(binary.BigEndian.Uint32(b[8:]))
	h.LeaderEpoch = int32(binary.BigEndian.Uint32(b[12:]))
	h.Magic = int8(b[16])
	if h.Magic != 2 {
		return h, fmt.Errorf("%w: magic %d", ErrMagic, h.Magic)
	}
	if len(b) < HeaderLen {
		return h, ErrTooShort
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

// Frame reads the batch at the start of b as one of several concatenated batches: its
// header, checked for a frame that fits in b, magic 2 and non-negative, non-overflowing
// offsets. It does not check the CRC (CRCOK does).
func Frame(b []byte) (Header, error) {
	h, err := Parse(b)
	if err != nil {
		return h, err
	}
	if h.Length < HeaderLen-12 || h.Size() > len(b) {
		return h, fmt.Errorf("%w: batch of %d bytes with %d bytes left", ErrLength, int64(h.Length)+12, len(b))
	}
	if h.BaseOffset < 0 || h.LastOffsetDelta < 0 || h.BaseOffset > math.MaxInt64-int64(h.LastOffsetDelta) {
		return h, fmt.Errorf("%w: base offset %d with last offset delta %d", ErrInvalid, h.BaseOffset, h.LastOffsetDelta)
	}
	return h, nil
}

// CRCOK reports whether the batch b (exactly one whole batch) has a correct CRC32C.
func CRCOK(b []byte) bool {
	return len(b) >= HeaderLen && crc32c.Checksum(b[21:]) == binary.BigEndian.Uint32(b[17:])
}

// ValidateProduce checks that records holds exactly one well-formed v2 batch with a
// correct CRC, as Kafka requires of Produce v3+; maxBytes > 0 bounds its size
// (max.message.bytes). Transactional batches are refused (ErrTransactional): see
// ValidateProduceWith.
func ValidateProduce(records []byte, maxBytes int) (Header, error) {
	return ValidateProduceWith(records, ProduceRules{MaxBytes: maxBytes})
}

// ProduceRules are what ValidateProduceWith accepts.
type ProduceRules struct {
	// MaxBytes > 0 bounds the batch's size (max.message.bytes).
	MaxBytes int
	// Transactional accepts transactional data batches (attribute bit 4), which must
	// carry a producer ID, epoch and sequence: only once the broker runs the
	// transaction coordinator (off: ErrTransactional, as ValidateProduce). Control
	// batches (markers) are refused either way: only the partition's leader writes them.
	Transactional bool
}

// ValidateProduceWith is ValidateProduce under rules r.
func ValidateProduceWith(records []byte, r ProduceRules) (Header, error) {
	maxBytes := r.MaxBytes
	h, err := Parse(records)
	if err != nil {
		return h, err
	}
	if h.Length < HeaderLen-12 {
		return h, ErrLength
	}
	total := h.Size()
	if total > len(records) {
		return h, ErrLength
	}
	if total < len(records) {
		return h, ErrMultiple
	}
	if maxBytes > 0 && total > maxBytes {
		return h, fmt.Errorf("%w: %d > %d", ErrMessageTooLarge, total, maxBytes)
	}
	if !CRCOK(records) {
		return h, ErrCRC
	}
	if h.RecordCount <= 0 || h.LastOffsetDelta != h.RecordCount-1 {
		return h, fmt.Errorf("%w: %d records with last offset delta %d", ErrInvalid, h.RecordCount, h.LastOffsetDelta)
	}
	if h.Control() {
		return h, fmt.Errorf("%w: clients may not send control batches", ErrInvalid)
	}
	if h.Transactional() && !r.Transactional {
		return h, ErrTransactional
	}
	if h.Transactional() && h.ProducerID < 0 {
		return h, fmt.Errorf("%w: transactional batch without a producer ID", ErrInvalid)
	}
	if h.ProducerID >= 0 && (h.ProducerEpoch < 0 || h.BaseSequence < 0) {
		return h, fmt.Errorf("%w: idempotent batch without epoch or sequence", ErrInvalid)
	}
	return h, nil
}

// SetOffsetEpoch writes the assigned base offset and leader epoch in place.
func SetOffsetEpoch(b []byte, baseOffset int64, epoch int32) {
	binary.BigEndian.PutUint64(b[0:], uint64(baseOffset))
	binary.BigEndian.PutUint32(b[12:], uint32(epoch))
}

// SetLogAppendTime stamps a batch for message.timestamp.type=LogAppendTime: the
// timestamp type bit and maxTimestamp are covered by the CRC, so it is recomputed.
func SetLogAppendTime(b []byte, nowMs int64) {
	attrs := binary.BigEndian.Uint16(b[21:]) | 0x08
	binary.BigEndian.PutUint16(b[21:], attrs)
	binary.BigEndian.PutUint64(b[35:], uint64(nowMs))
	binary.BigEndian.PutUint32(b[17:], crc32c.Checksum(b[21:]))
}

// CheckStored checks a whole batch read back from a file another process wrote (a
// shared WAL): every header byte the CRC does not cover and a reader can know, since a
// stale or torn page of a shared file system can leave those wrong while the CRC'd part
// is right. It checks batchLength against len(b), magic 2, the CRC field against crc
// (what the writer recorded) and the bytes against it, and that lastOffsetDelta is
// lastDelta with a record count of lastDelta+1 (a produced batch, as ValidateProduce
// requires). baseOffset and partitionLeaderEpoch are not checked: readers overwrite them
// with what their index assigned (SetOffsetEpoch).
func CheckStored(b []byte, crc uint32, lastDelta int32) error {
	if len(b) < HeaderLen {
		return fmt.Errorf("%w: %d bytes", ErrTooShort, len(b))
	}
	if n := int64(int32(binary.BigEndian.Uint32(b[8:]))); n != int64(len(b))-12 {
		return fmt.Errorf("%w: batch length %d in %d bytes", ErrLength, n, len(b))
	}
	if b[16] != 2 {
		return fmt.Errorf("%w: magic %d", ErrMagic, int8(b[16]))
	}
	if binary.BigEndian.Uint32(b[17:]) != crc || crc32c.Checksum(b[21:]) != crc {
		return ErrCRC
	}
	delta, count := int32(binary.BigEndian.Uint32(b[23:])), int32(binary.BigEndian.Uint32(b[57:]))
	if delta != lastDelta || int64(count) != int64(delta)+1 {
		return fmt.Errorf("%w: %d records with last offset delta %d, %d expected", ErrInvalid, count, delta, lastDelta)
	}
	return nil
}
