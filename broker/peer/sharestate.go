package peer

import (
	"encoding/binary"
	"fmt"
)

// OpShareState reads or writes one share partition's state on the broker leading its
// __share_group_state partition (Kafka's ReadShareGroupState and WriteShareGroupState,
// from the share partition's leader to the share coordinator).
//
// Request: op | kind byte (0 read, 1 write) | leader epoch int32 | key length uint16 |
// key | value (a write's snapshot; empty for a read).
// Answer: code int16 | found byte | value (a read's snapshot). A broker that predates
// the op answers an empty body.
const OpShareState byte = 14

// ShareStateRequest is one read or write.
type ShareStateRequest struct {
	Write       bool
	LeaderEpoch int32
	Key, Value  []byte
}

// AppendTo encodes the request body.
func (r *ShareStateRequest) AppendTo(b []byte) []byte {
	b = append(b, OpShareState)
	kind := byte(0)
	if r.Write {
		kind = 1
	}
	b = append(b, kind)
	b = binary.BigEndian.AppendUint32(b, uint32(r.LeaderEpoch))
	b = appendShortString(b, string(r.Key))
	return append(b, r.Value...)
}

// DecodeShareStateRequest parses an OpShareState request.
func DecodeShareStateRequest(b []byte) (ShareStateRequest, error) {
	var r ShareStateRequest
	if len(b) < 6 || b[0] != OpShareState || b[1] > 1 {
		return r, fmt.Errorf("%w: share-state request of %d bytes", ErrMalformed, len(b))
	}
	r.Write = b[1] == 1
	r.LeaderEpoch = int32(binary.BigEndian.Uint32(b[2:]))
	k, rest, ok := readShortString(b[6:])
	if !ok {
		return ShareStateRequest{}, fmt.Errorf("%w: share-state request of %d bytes", ErrMalformed, len(b))
	}
	r.Key, r.Value = []byte(k), append([]byte(nil), rest...)
	return r, nil
}

// AppendShareStateAnswer encodes the answer.
func AppendShareStateAnswer(b []byte, code int16, found bool, value []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(code))
	f := byte(0)
	if found {
		f = 1
	}
	return append(append(b, f), value...)
}

// DecodeShareStateAnswer parses the answer; known is false for an empty one.
func DecodeShareStateAnswer(b []byte) (code int16, found bool, value []byte, known bool, err error) {
	if len(b) == 0 {
		return 0, false, nil, false, nil
	}
	if len(b) < 3 || b[2] > 1 {
		return 0, false, nil, true, fmt.Errorf("%w: share-state answer of %d bytes", ErrMalformed, len(b))
	}
	return int16(binary.BigEndian.Uint16(b)), b[2] == 1, b[3:], true, nil
}
