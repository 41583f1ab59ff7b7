package peer

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// Authentication of a peer connection (OpChallenge, OpAuth). When the brokers of a
// cluster share a token (--cluster-token-file, security/token), a connection must prove
// it knows one before any other internal request is served: the serving broker gives a
// fresh nonce, the connecting broker answers with an HMAC of it, and the serving broker
// answers with an HMAC of its own so the connecting one knows it reached a broker of its
// cluster. The token never crosses the wire, so plaintext connections do not expose it, and a
// recorded exchange is worthless on another connection (another nonce).
//
//	OpChallenge req:  op
//	            resp: nonce [32]byte
//	OpAuth      req:  op | broker int32 | clientNonce [32]byte | mac [32]byte
//	            resp: code int16 | mac [32]byte (only when code is 0)
//
//	client mac = HMAC-SHA256(token, "weir-peer-auth-v1 client" | nonce | clientNonce | broker)
//	server mac = HMAC-SHA256(token, "weir-peer-auth-v1 server" | nonce | clientNonce | broker)
//
// A nonce answers one OpAuth only. A failed OpAuth is answered with a non-zero code
// (Kafka's SASL_AUTHENTICATION_FAILED, 58) and the connection is closed, as is one that
// sends any other internal request unauthenticated.
const (
	OpChallenge byte = 5
	OpAuth      byte = 6
)

// NonceLen and MACLen are the sizes of the exchange's nonces and MACs.
const (
	NonceLen = 32
	MACLen   = sha256.Size
)

// AuthFailedCode is the code of a refused OpAuth (SASL_AUTHENTICATION_FAILED).
const AuthFailedCode int16 = 58

// ErrAuth: the peer refused this broker's proof, or could not prove itself.
var ErrAuth = errors.New("peer: authentication failed")

// NewNonce returns a random nonce.
func NewNonce() []byte {
	b := make([]byte, NonceLen)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return b
}

// AuthRequest is an OpAuth request.
type AuthRequest struct {
	Broker      int32
	ClientNonce []byte
	MAC         []byte
}

const authRequestLen = 1 + 4 + NonceLen + MACLen

// AppendTo encodes the request body.
func (r *AuthRequest) AppendTo(b []byte) []byte {
	b = append(b, OpAuth)
	b = binary.BigEndian.AppendUint32(b, uint32(r.Broker))
	b = append(b, r.ClientNonce...)
	return append(b, r.MAC...)
}

// DecodeAuthRequest parses a body that starts with OpAuth.
func DecodeAuthRequest(b []byte) (AuthRequest, error) {
	if len(b) != authRequestLen || b[0] != OpAuth {
		return AuthRequest{}, fmt.Errorf("%w: auth request of %d bytes", ErrMalformed, len(b))
	}
	return AuthRequest{
		Broker:      int32(binary.BigEndian.Uint32(b[1:])),
		ClientNonce: bytes.Clone(b[5 : 5+NonceLen]),
		MAC:         bytes.Clone(b[5+NonceLen:]),
	}, nil
}

func authMAC(token []byte, side string, nonce, clientNonce []byte, broker int32) []byte {
	m := hmac.New(sha256.New, token)
	m.Write([]byte("weir-peer-auth-v1 " + side))
	m.Write(nonce)
	m.Write(clientNonce)
	var id [4]byte
	binary.BigEndian.PutUint32(id[:], uint32(broker))
	m.Write(id[:])
	return m.Sum(nil)
}

// ClientMAC is the connecting broker's proof for the serving broker's nonce.
func ClientMAC(token, nonce, clientNonce []byte, broker int32) []byte {
	return authMAC(token, "client", nonce, clientNonce, broker)
}

// ServerMAC is the serving broker's proof, answering an accepted OpAuth.
func ServerMAC(token, nonce, clientNonce []byte, broker int32) []byte {
	return authMAC(token, "server", nonce, clientNonce, broker)
}

// VerifyAuth checks an OpAuth against the nonce this connection was given and every
// accepted token; it returns the answer body (code 0 and the server's proof, or
// AuthFailedCode) and whether the connection is now authenticated. Every token is
// tried, so timing does not tell which matched.
func VerifyAuth(tokens [][]byte, nonce []byte, req AuthRequest) ([]byte, bool) {
	var match []byte
	if len(nonce) == NonceLen {
		for _, t := range tokens {
			if hmac.Equal(ClientMAC(t, nonce, req.ClientNonce, req.Broker), req.MAC) && match == nil {
				match = t
			}
		}
	}
	if match == nil {
		return binary.BigEndian.AppendUint16(nil, uint16(AuthFailedCode)), false
	}
	out := binary.BigEndian.AppendUint16(make([]byte, 0, 2+MACLen), 0)
	return append(out, ServerMAC(match, nonce, req.ClientNonce, req.Broker)...), true
}

// checkAuthAnswer verifies the serving broker's answer to this client's OpAuth.
func checkAuthAnswer(resp, token, nonce, clientNonce []byte, broker int32) error {
	if len(resp) < 2 {
		return fmt.Errorf("%w: auth answer of %d bytes", ErrAuth, len(resp))
	}
	if code := int16(binary.BigEndian.Uint16(resp)); code != 0 {
		return fmt.Errorf("%w: the broker refused this broker's cluster token (code %d): do both have the same --cluster-token-file?", ErrAuth, code)
	}
	if len(resp) != 2+MACLen || !hmac.Equal(resp[2:], ServerMAC(token, nonce, clientNonce, broker)) {
		return fmt.Errorf("%w: the broker could not prove it knows the cluster token", ErrAuth)
	}
	return nil
}

// secure puts TLS on a new connection and authenticates it, as configured; it returns
// the connection to use and the last correlation ID used.
func (c *Client) secure(ctx context.Context, nc net.Conn) (net.Conn, int32, error) {
	deadline := time.Now().Add(c.cfg.Timeout)
	if c.cfg.TLS != nil {
		cfg := c.cfg.TLS
		if cfg.ServerName == "" {
			cfg = cfg.Clone()
			cfg.ServerName, _, _ = net.SplitHostPort(c.addr)
		}
		tc := tls.Client(nc, cfg)
		hctx, cancel := context.WithDeadline(ctx, deadline)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			return nc, 0, fmt.Errorf("TLS handshake: %w", err)
		}
		nc = tc
	}
	if c.cfg.Token == nil {
		return nc, 0, nil
	}
	nc.SetDeadline(deadline)
	defer nc.SetDeadline(time.Time{})
	nonce, err := c.exchange(nc, 1, []byte{OpChallenge})
	if err != nil {
		return nc, 0, fmt.Errorf("%w: asking for a challenge: %w", ErrAuth, err)
	}
	if len(nonce) != NonceLen {
		return nc, 0, fmt.Errorf("%w: the broker offers no authentication (a challenge of %d bytes): is --cluster-token-file set on it?", ErrAuth, len(nonce))
	}
	token := c.cfg.Token()
	req := AuthRequest{Broker: c.cfg.BrokerID, ClientNonce: NewNonce()}
	req.MAC = ClientMAC(token, nonce, req.ClientNonce, req.Broker)
	resp, err := c.exchange(nc, 2, req.AppendTo(nil))
	if err != nil {
		return nc, 0, fmt.Errorf("%w: %w", ErrAuth, err)
	}
	return nc, 2, checkAuthAnswer(resp, token, nonce, req.ClientNonce, req.Broker)
}

// exchange sends one request and reads its answer, on a connection not yet shared.
func (c *Client) exchange(nc net.Conn, corr int32, body []byte) ([]byte, error) {
	id := c.cfg.ClientID
	b := make([]byte, 4, 4+2+2+4+2+len(id)+len(body))
	b = binary.BigEndian.AppendUint16(b, uint16(InternalKey))
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, uint16(len(id)))
	b = append(append(b, id...), body...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	if _, err := nc.Write(b); err != nil {
		return nil, err
	}
	var hdr [8]byte
	if _, err := io.ReadFull(nc, hdr[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(hdr[:]))
	if got := int32(binary.BigEndian.Uint32(hdr[4:])); got != corr || n < 4 || n > 4+64 {
		return nil, fmt.Errorf("unexpected answer (correlation id %d, %d bytes)", got, n)
	}
	resp := make([]byte, n-4)
	_, err := io.ReadFull(nc, resp)
	return resp, err
}
