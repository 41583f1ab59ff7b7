package recbatch

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/weir-io/weir/internal/crc32c"
)

// Transaction markers (control batches), as Kafka writes them when a transaction ends:
// a batch with the transactional and control attribute bits, the transaction's producer
// ID and epoch, base sequence -1, and one control record whose
//
//	key   = version int16 (0), type int16 (0 abort, 1 commit)
//	value = version int16 (0), coordinator epoch int32
//
// Consumers skip control batches; a read_committed consumer learns from the marker's
// position where an aborted transaction ends.

// Attribute bits of a marker batch.
const (
	attrTransactional = 0x10
	attrControl       = 0x20
)

// Control record types.
const (
	ControlAbort  int16 = 0
	ControlCommit int16 = 1
)

// ErrNotMarker: the batch is not a transaction marker.
var ErrNotMarker = errors.New("recbatch: not a transaction marker")

// Marker is a transaction marker's content.
type Marker struct {
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool
	CoordinatorEpoch int32
}

// EncodeMarker builds the marker batch (base offset 0: the partition assigns it).
func EncodeMarker(m Marker, tsMs int64) []byte {
	typ := ControlAbort
	if m.Commit {
		typ = ControlCommit
	}
	key := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), uint16(typ))
	val := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(nil, 0), uint32(m.CoordinatorEpoch))
	b := EncodeSingle(key, val, tsMs)
	binary.BigEndian.PutUint16(b[21:], attrTransactional|attrControl)
	binary.BigEndian.PutUint64(b[43:], uint64(m.ProducerID))
	binary.BigEndian.PutUint16(b[51:], uint16(m.ProducerEpoch))
	binary.BigEndian.PutUint32(b[17:], crc32c.Checksum(b[21:]))
	return b
}

// ParseMarker decodes a marker batch; ErrNotMarker when batch is not one (not a control
// batch, or a control record of another type).
func ParseMarker(batch []byte) (Marker, error) {
	h, err := Parse(batch)
	if err != nil {
		return Marker{}, err
	}
	if !h.Control() || !h.Transactional() || h.RecordCount != 1 {
		return Marker{}, ErrNotMarker
	}
	m := Marker{ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch}
	var bad error
	err = DecodeRecords(batch, func(key, value []byte) {
		if len(key) < 4 || binary.BigEndian.Uint16(key) != 0 {
			bad = fmt.Errorf("%w: control key %x", ErrNotMarker, key)
			return
		}
		switch int16(binary.BigEndian.Uint16(key[2:])) {
		case ControlAbort:
		case ControlCommit:
			m.Commit = true
		default:
			bad = fmt.Errorf("%w: control type %x", ErrNotMarker, key[2:4])
			return
		}
		if len(value) >= 6 {
			m.CoordinatorEpoch = int32(binary.BigEndian.Uint32(value[2:]))
		}
	})
	if err != nil {
		return Marker{}, err
	}
	if bad != nil {
		return Marker{}, bad
	}
	return m, nil
}
