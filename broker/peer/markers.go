package peer

import (
	"encoding/binary"
	"fmt"
)

// OpMarkers asks a partition leader to append a transaction marker (commit or abort of
// one producer's transaction) to each of the partitions named: a transaction
// coordinator's markers for partitions led by another broker (Kafka's WriteTxnMarkers,
// over the peer connection, which is authenticated as a broker's).
const OpMarkers byte = 12

// MarkersRequest is one producer's marker for partitions led by the receiver.
//
// Body: op | producer id int64 | producer epoch int16 | commit byte |
// coordinator epoch int32 | n uint32 | n × (topic id [16]byte | partition int32).
// The answer: n × Kafka error code int16, in request order (0: appended and synced).
type MarkersRequest struct {
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool
	CoordinatorEpoch int32
	Parts            []PartitionRef
}

const markersHdr = 1 + 8 + 2 + 1 + 4 + 4

// AppendTo encodes the request body.
func (r *MarkersRequest) AppendTo(b []byte) []byte {
	b = append(b, OpMarkers)
	b = binary.BigEndian.AppendUint64(b, uint64(r.ProducerID))
	b = binary.BigEndian.AppendUint16(b, uint16(r.ProducerEpoch))
	c := byte(0)
	if r.Commit {
		c = 1
	}
	b = append(b, c)
	b = binary.BigEndian.AppendUint32(b, uint32(r.CoordinatorEpoch))
	b = binary.BigEndian.AppendUint32(b, uint32(len(r.Parts)))
	for _, p := range r.Parts {
		b = append(b, p.Topic[:]...)
		b = binary.BigEndian.AppendUint32(b, uint32(p.Partition))
	}
	return b
}

// DecodeMarkersRequest parses an OpMarkers request.
func DecodeMarkersRequest(b []byte) (MarkersRequest, error) {
	var r MarkersRequest
	if len(b) < markersHdr || b[0] != OpMarkers || b[11] > 1 {
		return r, fmt.Errorf("%w: markers request of %d bytes", ErrMalformed, len(b))
	}
	r.ProducerID = int64(binary.BigEndian.Uint64(b[1:]))
	r.ProducerEpoch = int16(binary.BigEndian.Uint16(b[9:]))
	r.Commit = b[11] == 1
	r.CoordinatorEpoch = int32(binary.BigEndian.Uint32(b[12:]))
	n := binary.BigEndian.Uint32(b[16:])
	rest := b[markersHdr:]
	if n > maxItems || uint64(len(rest)) != uint64(n)*20 {
		return r, fmt.Errorf("%w: markers request of %d bytes for %d partitions", ErrMalformed, len(b), n)
	}
	r.Parts = make([]PartitionRef, n)
	for i := range r.Parts {
		copy(r.Parts[i].Topic[:], rest[:16])
		r.Parts[i].Partition = int32(binary.BigEndian.Uint32(rest[16:]))
		rest = rest[20:]
	}
	return r, nil
}

// AppendMarkersAnswer encodes the answer: one Kafka error code per partition.
func AppendMarkersAnswer(b []byte, codes []int16) []byte {
	for _, c := range codes {
		b = binary.BigEndian.AppendUint16(b, uint16(c))
	}
	return b
}

// DecodeMarkersAnswer parses the answer to a request for n partitions.
func DecodeMarkersAnswer(b []byte, n int) ([]int16, error) {
	if len(b) != 2*n {
		return nil, fmt.Errorf("%w: markers answer of %d bytes for %d partitions", ErrMalformed, len(b), n)
	}
	codes := make([]int16, n)
	for i := range codes {
		codes[i] = int16(binary.BigEndian.Uint16(b[2*i:]))
	}
	return codes, nil
}
