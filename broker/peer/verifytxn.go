package peer

import (
	"encoding/binary"
	"fmt"
	"math"
)

// OpVerifyTxn asks a transaction coordinator whether a partition is in a producer's
// ongoing transaction (KIP-890 part 1, Kafka's AddPartitionsToTxn v4 with VerifyOnly):
// a partition leader asks before it appends the producer's first transactional batch
// there. The answer is one Kafka error code int16: 0 (in the transaction), or the
// coordinator's refusal (TRANSACTION_ABORTABLE: not in it; PRODUCER_FENCED,
// NOT_COORDINATOR, CONCURRENT_TRANSACTIONS, ...). A broker that predates the op answers
// with an empty body; the leader then appends without the check, as Kafka does when
// the coordinator does not know the verify-only version.
const OpVerifyTxn byte = 13

// VerifyTxnRequest is one partition of one producer's transaction to verify.
//
// Body: op | producer id int64 | producer epoch int16 | partition int32 |
// transactional id length uint16 | transactional id | topic length uint16 | topic.
type VerifyTxnRequest struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	Topic           string
	Partition       int32
}

const verifyTxnHdr = 1 + 8 + 2 + 4

// AppendTo encodes the request body; ids and topic names longer than 65,535 bytes
// (Kafka's are shorter) are cut.
func (r *VerifyTxnRequest) AppendTo(b []byte) []byte {
	b = append(b, OpVerifyTxn)
	b = binary.BigEndian.AppendUint64(b, uint64(r.ProducerID))
	b = binary.BigEndian.AppendUint16(b, uint16(r.ProducerEpoch))
	b = binary.BigEndian.AppendUint32(b, uint32(r.Partition))
	b = appendShortString(b, r.TransactionalID)
	return appendShortString(b, r.Topic)
}

func appendShortString(b []byte, s string) []byte {
	s = s[:min(len(s), math.MaxUint16)]
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// readShortString splits a length-prefixed string off b.
func readShortString(b []byte) (string, []byte, bool) {
	if len(b) < 2 {
		return "", nil, false
	}
	n := int(binary.BigEndian.Uint16(b))
	if len(b) < 2+n {
		return "", nil, false
	}
	return string(b[2 : 2+n]), b[2+n:], true
}

// DecodeVerifyTxnRequest parses an OpVerifyTxn request.
func DecodeVerifyTxnRequest(b []byte) (VerifyTxnRequest, error) {
	var r VerifyTxnRequest
	if len(b) < verifyTxnHdr || b[0] != OpVerifyTxn {
		return r, fmt.Errorf("%w: verify-txn request of %d bytes", ErrMalformed, len(b))
	}
	r.ProducerID = int64(binary.BigEndian.Uint64(b[1:]))
	r.ProducerEpoch = int16(binary.BigEndian.Uint16(b[9:]))
	r.Partition = int32(binary.BigEndian.Uint32(b[11:]))
	rest := b[verifyTxnHdr:]
	var ok1, ok2 bool
	r.TransactionalID, rest, ok1 = readShortString(rest)
	if ok1 {
		r.Topic, rest, ok2 = readShortString(rest)
	}
	if !ok1 || !ok2 || len(rest) != 0 {
		return VerifyTxnRequest{}, fmt.Errorf("%w: verify-txn request of %d bytes", ErrMalformed, len(b))
	}
	return r, nil
}

// AppendVerifyTxnAnswer encodes the answer: the coordinator's Kafka error code.
func AppendVerifyTxnAnswer(b []byte, code int16) []byte {
	return binary.BigEndian.AppendUint16(b, uint16(code))
}

// DecodeVerifyTxnAnswer parses the answer; known is false for an empty answer (a
// broker that does not know the op).
func DecodeVerifyTxnAnswer(b []byte) (code int16, known bool, err error) {
	switch len(b) {
	case 0:
		return 0, false, nil
	case 2:
		return int16(binary.BigEndian.Uint16(b)), true, nil
	}
	return 0, false, fmt.Errorf("%w: verify-txn answer of %d bytes", ErrMalformed, len(b))
}
