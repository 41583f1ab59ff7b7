package kafka

import (
	"bufio"
	"encoding/binary"
	"time"
)

// Before authentication. A connection of a SASL listener that has neither logged in
// (SASL) nor proved the cluster token (internal.go) is unauthenticated, and anyone can
// open one, so what it may make the broker hold is bounded apart from what logged-in
// clients hold:
//
//   - a frame is at most maxPreAuthFrame bytes, 64 KiB (Kafka's SaslServerAuthenticator
//     caps them at 512 KiB); a larger announced size closes the connection before a
//     byte of the body is read;
//   - the request's API key is looked at (bufio Peek, nothing allocated) before its body
//     is read: anything but ApiVersions, SaslHandshake, SaslAuthenticate (and a broker's
//     internal request when cluster tokens are on) closes the connection unread and
//     unparsed (sasl_gate.go), so no request body of a client that has not logged in is
//     ever decoded but those three small ones;
//   - its bytes come from a budget of their own (limiter.preAuth), so unauthenticated
//     connections stalled half-way through their frames cannot hold the budget of logged
//     in clients' requests;
//   - it may stay idle at most preAuthIdle between requests.
//
// And for every connection, every frame has a read deadline (frameDeadline): seconds
// from its first byte, plus time for its size at a slow client's rate, plus any time it
// waited for budget; a client that stalls in the middle of a frame is closed then, and
// the budget its partial frame held comes back.

const (
	// maxPreAuthFrame bounds a frame of an unauthenticated connection. Kafka allows
	// 512 KiB, for GSSAPI tickets and OAUTHBEARER tokens; PLAIN and SCRAM messages are
	// at most 8 KiB (security/sasl), so 64 KiB is plenty, and it bounds what the few
	// requests decoded before login can make kmsg allocate (unknown tagged fields
	// become map entries: tens of bytes for every two bytes of frame).
	maxPreAuthFrame = 64 << 10
	// preAuthIdle bounds the wait for the next request of an unauthenticated connection
	// (clients authenticate at once after connecting).
	preAuthIdle = 30 * time.Second
	// frameReadRate is the slowest rate a large frame is allowed to arrive at, beyond
	// Limits.FrameReadTimeout: 1 MiB/s.
	frameReadRate = 1 << 20
)

// preAuth reports whether the connection has not authenticated: a SASL listener's,
// before a SASL login or a broker's token proof. Reader goroutine only (c.sasl).
func (c *conn) preAuth() bool {
	return c.lis != nil && c.lis.SASL && c.sasl.user == "" && !c.brokerAuth.ok.Load()
}

// frameDeadline is when a frame of n bytes whose first byte arrived at start must
// have been read whole.
func (c *conn) frameDeadline(start time.Time, n int) time.Time {
	return start.Add(c.s.lim.cfg.FrameReadTimeout + time.Duration(n)*time.Second/frameReadRate)
}

// idleDeadline is how long the connection may wait for its next request (zero: forever).
func (c *conn) idleDeadline() time.Time {
	d := c.s.cfg.IdleTimeout
	if c.preAuth() && (d <= 0 || d > preAuthIdle) {
		d = preAuthIdle
	}
	if d <= 0 {
		return time.Time{}
	}
	return time.Now().Add(d)
}

// peekKey returns the API key of the frame whose body r is at, without consuming it.
func peekKey(r *bufio.Reader) (int16, error) {
	b, err := r.Peek(2)
	if err != nil {
		return 0, err
	}
	return int16(binary.BigEndian.Uint16(b)), nil
}
