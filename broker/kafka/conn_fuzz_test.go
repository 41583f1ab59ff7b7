package kafka

import (
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzParseRequest feeds arbitrary frames to the request decoder: it must never panic,
// and anything it accepts must be a served key and version.
func FuzzParseRequest(f *testing.F) {
	for _, req := range []kmsg.Request{kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrMetadataRequest(), kmsg.NewPtrProduceRequest(), kmsg.NewPtrFetchRequest(), kmsg.NewPtrJoinGroupRequest()} {
		for _, v := range []int16{0, 4, 9, 12} {
			if v < apis[req.Key()].min || v > apis[req.Key()].max {
				continue
			}
			req.SetVersion(v)
			frame := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
			frame = binary.BigEndian.AppendUint16(frame, uint16(v))
			frame = binary.BigEndian.AppendUint32(frame, 7)
			frame = binary.BigEndian.AppendUint16(frame, 0xffff) // null client id
			if req.IsFlexible() {
				frame = append(frame, 0)
			}
			f.Add(req.AppendTo(frame))
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		h, req, err := parseRequest(&Server{txn: fakeTxnOff{}}, body) // every key decoded, the transaction ones too
		if err != nil {
			return
		}
		r := apis[h.key]
		if req == nil || h.version < r.min || h.version > r.max {
			t.Fatalf("accepted key %d v%d", h.key, h.version)
		}
	})
}
