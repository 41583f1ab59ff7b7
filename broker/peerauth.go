package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/weir-io/weir/broker/kafka"
	"github.com/weir-io/weir/broker/peer"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/security/tlsconf"
	"github.com/weir-io/weir/security/token"
)

// Security of the connections between brokers (broker/peer): with a cluster token file, a
// connection to another broker proves it knows the token before any internal request
// (peer/auth.go), and this broker's Kafka listener refuses internal requests of
// connections that did not (kafka/internal.go); with PeerTLS, connections to other
// brokers are TLS, verified against PeerTLS.CAFile. Every broker of a cluster needs the
// same token file (any of its tokens is accepted, the first is presented).

// peerSecurity is what Config's ClusterTokenFile and PeerTLS load to.
type peerSecurity struct {
	tokens *token.File // nil: peer connections are not authenticated
	tls    *tls.Config // nil: peer connections are plaintext
}

func newPeerSecurity(cfg *Config) (peerSecurity, error) {
	var ps peerSecurity
	if cfg.ClusterTokenFile != "" {
		f, err := token.Load(cfg.ClusterTokenFile, cfg.Logger)
		if err != nil {
			return ps, fmt.Errorf("broker: %w", err)
		}
		ps.tokens = f
	}
	if cfg.PeerTLS.Enabled() {
		src, err := tlsconf.New(cfg.PeerTLS, cfg.Logger)
		if err != nil {
			return ps, fmt.Errorf("broker: connections to other brokers: %w", err)
		}
		ps.tls = src.Client()
	}
	return ps, nil
}

// peerTokens returns every cluster token a peer connection may prove (nil: peer
// connections are not authenticated).
func (b *Broker) peerTokens() [][]byte {
	if t := b.peerSec.tokens; t != nil {
		return t.Keys(token.PurposePeer)
	}
	return nil
}

// peerHandshake gives the Kafka front end broker/peer's handshake (peer/auth.go) for the
// connections internal requests come on (kafka.PeerAuthenticator): the front end keeps
// each connection's state, this answers the steps. tokens is read at every step, so a
// reloaded token file applies to the next handshake.
type peerHandshake struct{ tokens func() [][]byte }

var _ kafka.PeerAuthenticator = peerHandshake{}

// PeerAuthRequired implements kafka.PeerAuthenticator.
func (a peerHandshake) PeerAuthRequired() bool { return len(a.tokens()) > 0 }

// PeerHandshake implements kafka.PeerAuthenticator: a challenge gets a fresh nonce; a
// proof is checked against nonce and every accepted token (a malformed one is refused
// with the same answer as a wrong one).
func (a peerHandshake) PeerHandshake(body, nonce []byte) kafka.PeerStep {
	switch body[0] {
	case peer.OpChallenge:
		n := peer.NewNonce()
		return kafka.PeerStep{Kind: kafka.PeerChallenge, Answer: n, Nonce: n}
	case peer.OpAuth:
		req, err := peer.DecodeAuthRequest(body)
		step := kafka.PeerStep{Kind: kafka.PeerProof, Broker: req.Broker, Malformed: err != nil}
		if err == nil {
			step.Answer, step.OK = peer.VerifyAuth(a.tokens(), nonce, req)
		} else {
			step.Answer, _ = peer.VerifyAuth(nil, nil, req)
		}
		return step
	}
	return kafka.PeerStep{Kind: kafka.PeerRequest}
}

// securePeer sets the TLS and the authentication of a connection to another broker.
func (b *Broker) securePeer(cfg *peer.Config) {
	cfg.BrokerID = b.cfg.NodeID
	cfg.TLS = b.peerSec.tls
	if t := b.peerSec.tokens; t != nil {
		cfg.Token = func() []byte { return t.Key(token.PurposePeer) }
	}
}

// bindPeerFlags registers the flags of connections to other brokers. The cluster token file
// is --cluster-token-file, shared with the controller client (cluster.StartBroker).
func (c *Config) bindPeerFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.PeerTLS.CAFile, "peer-tls-ca", c.PeerTLS.CAFile, "PEM CA bundle verifying other brokers' listeners; setting it makes connections to other brokers (zone proxies, read replicas) TLS: use it when the Kafka listeners are TLS")
	fs.StringVar(&c.PeerTLS.CertFile, "peer-tls-cert", c.PeerTLS.CertFile, "PEM client certificate presented on connections to other brokers (when their listener asks for one)")
	fs.StringVar(&c.PeerTLS.KeyFile, "peer-tls-key", c.PeerTLS.KeyFile, "PEM private key of --peer-tls-cert")
	fs.StringVar(&c.PeerTLS.ServerName, "peer-tls-server-name", c.PeerTLS.ServerName, "name verified in other brokers' certificates (default: the advertised host dialled)")
}

// ErrOpenControllers: the broker enforces ACLs but the controllers' API does not
// authenticate its callers, so anyone could change the ACLs (and read the SCRAM keys).
var ErrOpenControllers = errors.New("broker: --authorizer acl, but the controllers' API is open to unauthenticated callers: " +
	"anyone reaching it could grant themselves ALL; give the controllers --cluster-token-file (with TLS) or client certificates, and --authorizer acl")

// checkControllerAuth refuses to start a broker that enforces ACLs against controllers
// whose API is open (controllers older than the status field count as open).
// Controllers that cannot be asked (down) are not held against it: registration fails
// or succeeds on its own.
func (b *Broker) checkControllerAuth() error {
	if b.cfg.ACL.Authorizer == "" {
		return nil
	}
	ca, ok := b.meta.(metadata.ControllerAuth)
	if !ok {
		return nil // a standalone broker: no controller API (a cluster's store is one: checkStore)
	}
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	required, err := ca.APIAuthRequired(ctx)
	if err == nil && !required {
		return ErrOpenControllers
	}
	return nil
}
