package kafka

// Internal (key 10000, version 0): Weir's inter-broker requests on the Kafka listener
// (a proxy's links to a partition's leader, queries of log ends, read replicas' follow
// requests; package broker/peer draws their format). The key lies far outside Kafka's
// range and is never advertised in ApiVersions, so clients never send it. The body is
// opaque here: Deps.Internal serves it on the connection's reader goroutine, so requests
// of one connection are handled in arrival order (links of a partition keep their
// order), and it answers later with the response body, from any goroutine. Without
// Deps.Internal the key is refused like any unknown one.

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// InternalKey is the API key of Weir's inter-broker requests.
const InternalKey int16 = 10000

// InternalHandler serves inter-broker requests: it must call respond exactly once.
type InternalHandler interface {
	ServeInternal(body []byte, respond func(resp []byte))
}

// ErrorCode translates an error to the Kafka error code the handlers would answer with
// (for inter-broker answers, which carry codes).
func ErrorCode(err error) int16 { return kafkaCode(err) }

func init() {
	register(api{key: InternalKey, min: 0, max: 0, internal: true, newReq: func() kmsg.Request { return new(internalMsg) },
		handle: func(s *Server, c *conn, sl *slot, req kmsg.Request) {
			if s.internal == nil {
				sl.closeIt = true
				sl.respond(nil)
				return
			}
			s.peerBroker(c, sl.clientID)
			s.internal.ServeInternal(req.(*internalMsg).body, func(b []byte) { sl.respond(&internalMsg{body: b}) })
		}})
}

// internalMsg is an inter-broker request or response body as kmsg sees it.
type internalMsg struct {
	version int16
	body    []byte
}

var errInternalEmpty = errors.New("kafka: empty internal request")

func (m *internalMsg) Key() int16               { return InternalKey }
func (m *internalMsg) MaxVersion() int16        { return 0 }
func (m *internalMsg) SetVersion(v int16)       { m.version = v }
func (m *internalMsg) GetVersion() int16        { return m.version }
func (m *internalMsg) IsFlexible() bool         { return false }
func (m *internalMsg) AppendTo(b []byte) []byte { return append(b, m.body...) }
func (m *internalMsg) ResponseKind() kmsg.Response {
	return &internalMsg{version: m.version}
}
func (m *internalMsg) RequestKind() kmsg.Request { return &internalMsg{version: m.version} }
func (m *internalMsg) ReadFrom(b []byte) error {
	if len(b) == 0 {
		return errInternalEmpty
	}
	m.body = b // the frame is this request's own buffer
	return nil
}
