package kafkatest

import (
	"encoding/binary"
	"errors"
	"io"
)

// ReadResponse reads one response frame (size, correlation ID, body) from r, for tests
// that speak the protocol by hand.
func ReadResponse(r io.Reader) (corr int32, body []byte, err error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return 0, nil, err
	}
	body = make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, nil, err
	}
	if len(body) < 4 {
		return 0, nil, errors.New("kafkatest: short response")
	}
	return int32(binary.BigEndian.Uint32(body)), body[4:], nil
}
