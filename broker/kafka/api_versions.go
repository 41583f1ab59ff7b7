package kafka

import "github.com/twmb/franz-go/pkg/kmsg"

// ApiVersions (key 18), versions 0-4. Lists the registry. A request above v4 is answered
// by the reader itself (conn.parse) with the v0 answer and UNSUPPORTED_VERSION, so the
// client retries with a version we have.
func init() {
	register(api{key: 18, min: 0, max: 4, handle: func(s *Server, c *conn, sl *slot, req kmsg.Request) {
		sl.respond(apiVersionsResponse(s, req.GetVersion()))
	}})
}
