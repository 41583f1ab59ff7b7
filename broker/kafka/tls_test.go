package kafka

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/metadata/metatest"
	"github.com/weir-io/weir/security"
	"github.com/weir-io/weir/security/tlsconf"
	"github.com/weir-io/weir/security/tlstest"
)

// serveListener serves l on a new loopback port of s and returns its address.
func serveListener(t *testing.T, s *Server, l Listener) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.ServeListener(ln, l)
	return ln.Addr().String()
}

// principals are the principals of the server's connections on TLS listeners.
func tlsPrincipals(s *Server) []security.Principal {
	s.connsMu.Lock()
	defer s.connsMu.Unlock()
	var ps []security.Principal
	for c := range s.conns {
		if c.lis.TLS != nil {
			ps = append(ps, c.Principal())
		}
	}
	return ps
}

// A client's verified certificate makes the connection's principal User:<subject DN>
// (Kafka's default, not the CN alone), or what the principal mapping rules make of the
// DN, set by the handshake before the first request; a certificate no rule maps is
// refused; on a listener that only requests certificates, a client without one stays
// anonymous.
func TestTLSClientCertificatePrincipal(t *testing.T) {
	ca, err := tlstest.NewCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := ca.Issue("broker", "broker")
	alice, _ := ca.Issue("alice", "alice")
	for _, tc := range []struct {
		auth  string
		cert  *tlstest.Pair
		rules string
		want  security.Principal
	}{
		{"require", &alice, "", security.User("CN=alice")},
		{"request", &alice, "", security.User("CN=alice")},
		{"require", &alice, "RULE:^CN=([^,]*)$/$1/U", security.User("ALICE")},
		{"require", &alice, "RULE:^CN=(admin)$/$1/", ""}, // no rule matches: refused
		{"request", nil, "", security.Anonymous},
		{"none", &alice, "", security.Anonymous}, // not asked for: not sent
	} {
		t.Run(fmt.Sprintf("%s/cert=%v/rules=%s", tc.auth, tc.cert != nil, tc.rules), func(t *testing.T) {
			s, _ := startServer(t)
			if s.cfg.PrincipalRules, err = tlsconf.ParsePrincipalRules(tc.rules); err != nil {
				t.Fatal(err)
			}
			src, err := tlsconf.New(tlsconf.Files{CertFile: srv.CertFile, KeyFile: srv.KeyFile, CAFile: ca.CAFile, ClientAuth: tc.auth}, nil)
			if err != nil {
				t.Fatal(err)
			}
			addr := serveListener(t, s, Listener{Name: "SSL", TLS: src.Server()})
			f := tlsconf.Files{CAFile: ca.CAFile}
			if tc.cert != nil {
				f.CertFile, f.KeyFile = tc.cert.CertFile, tc.cert.KeyFile
			}
			csrc, err := tlsconf.New(f, nil)
			if err != nil {
				t.Fatal(err)
			}
			nc, err := tls.Dial("tcp", addr, csrc.Client())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			rc := &rawConn{t: t, nc: nc}
			req := kmsg.NewPtrApiVersionsRequest()
			rc.send(1, req)
			if tc.want == "" {
				if _, _, err := rc.recv(10 * time.Second); err == nil {
					t.Fatal("a certificate no rule maps was served")
				}
				return
			}
			if resp := recvDecode(t, rc, req).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
				t.Fatalf("ApiVersions error %d", resp.ErrorCode)
			}
			if ps := tlsPrincipals(s); len(ps) != 1 || ps[0] != tc.want {
				t.Fatalf("principals %v, want %s", ps, tc.want)
			}
		})
	}
}

// On a named listener (not a zone's), Metadata and DescribeCluster name every broker's
// listener of that name, the main address of a broker without one (FindCoordinator:
// cluster/tls_test.go, with a real coordinator).
func TestNamedListenerEndpoints(t *testing.T) {
	meta := metatest.NewStore(1, 2)
	ctx := context.Background()
	for _, id := range []int32{1, 2} {
		b := metadata.Broker{ID: id, Host: fmt.Sprintf("main-%d", id), Port: 9092}
		if id == 1 {
			b.Listeners = []metadata.Listener{
				{Name: "EXTERNAL", Protocol: metadata.ProtocolSSL, Host: "ext-1", Port: 9093},
				{Name: "a", Zone: "a", Host: "zone-a-1", Port: 9094},
			}
		}
		if err := meta.RegisterBroker(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	s, _ := startServerWith(t, meta)
	addr := serveListener(t, s, Listener{Name: "EXTERNAL"})
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	rc := &rawConn{t: t, nc: nc}
	want := map[int32]string{1: "ext-1:9093", 2: "main-2:9092"}

	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(12)
	rc.send(1, md)
	resp := recvDecode(t, rc, md).(*kmsg.MetadataResponse)
	if len(resp.Brokers) != 2 {
		t.Fatalf("%d brokers", len(resp.Brokers))
	}
	for _, b := range resp.Brokers {
		if got := fmt.Sprintf("%s:%d", b.Host, b.Port); got != want[b.NodeID] {
			t.Errorf("Metadata names broker %d at %s, want %s", b.NodeID, got, want[b.NodeID])
		}
	}

	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.SetVersion(1)
	dc.EndpointType = 1
	rc.send(2, dc)
	dresp := recvDecode(t, rc, dc).(*kmsg.DescribeClusterResponse)
	if len(dresp.Brokers) != 2 {
		t.Fatalf("DescribeCluster: %d brokers (error %d)", len(dresp.Brokers), dresp.ErrorCode)
	}
	for _, b := range dresp.Brokers {
		if got := fmt.Sprintf("%s:%d", b.Host, b.Port); got != want[b.NodeID] {
			t.Errorf("DescribeCluster names broker %d at %s, want %s", b.NodeID, got, want[b.NodeID])
		}
	}
}
