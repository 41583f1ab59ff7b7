package kafka

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/metadata/metatest"
)

// Metadata and DescribeCluster answered on a zone listener name, for every broker, its
// listener of that zone (its main address when it has none); on the main listener, and
// on a listener of a zone no broker listens for, the main addresses.
func TestZoneListenerEndpoints(t *testing.T) {
	meta := metatest.NewStore(1, 2, 3)
	ctx := context.Background()
	for id, zone := range map[int32]string{1: "a", 2: "b", 3: "c"} {
		b := metadata.Broker{ID: id, Host: fmt.Sprintf("main-%d", id), Port: 9092, Rack: zone}
		if id != 3 { // broker 3 has no zone listeners
			for i, z := range []string{"a", "b"} {
				b.Listeners = append(b.Listeners, metadata.Listener{Zone: z, Host: fmt.Sprintf("%s-%d", z, id), Port: int32(9093 + i)})
			}
		}
		if err := meta.RegisterBroker(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	s, _ := startServerWith(t, meta)
	serveZone := func(zone string) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s.ServeZone(ln, zone)
		return ln.Addr().String()
	}
	addrs := map[string]string{"": s.lns[0].Addr().String(), "a": serveZone("a"), "b": serveZone("b"), "z": serveZone("z")}

	want := func(zone string, id int32) string {
		switch {
		case id == 3 || zone == "" || zone == "z":
			return fmt.Sprintf("main-%d:9092", id)
		case zone == "a":
			return fmt.Sprintf("a-%d:9093", id)
		default:
			return fmt.Sprintf("b-%d:9094", id)
		}
	}
	for zone, addr := range addrs {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		rc := &rawConn{t: t, nc: nc}

		md := kmsg.NewPtrMetadataRequest()
		md.SetVersion(12)
		rc.send(1, md)
		resp := recvDecode(t, rc, md).(*kmsg.MetadataResponse)
		if len(resp.Brokers) != 3 {
			t.Fatalf("listener %q: %d brokers", zone, len(resp.Brokers))
		}
		for _, b := range resp.Brokers {
			if got := fmt.Sprintf("%s:%d", b.Host, b.Port); got != want(zone, b.NodeID) {
				t.Errorf("listener %q: Metadata names broker %d at %s, want %s", zone, b.NodeID, got, want(zone, b.NodeID))
			}
		}

		dc := kmsg.NewPtrDescribeClusterRequest()
		dc.SetVersion(1)
		dc.EndpointType = 1
		rc.send(2, dc)
		dresp := recvDecode(t, rc, dc).(*kmsg.DescribeClusterResponse)
		if len(dresp.Brokers) != 3 {
			t.Fatalf("listener %q: DescribeCluster: %d brokers (error %d)", zone, len(dresp.Brokers), dresp.ErrorCode)
		}
		for _, b := range dresp.Brokers {
			if got := fmt.Sprintf("%s:%d", b.Host, b.Port); got != want(zone, b.NodeID) {
				t.Errorf("listener %q: DescribeCluster names broker %d at %s, want %s", zone, b.NodeID, got, want(zone, b.NodeID))
			}
		}
	}
}

func recvDecode(t *testing.T, rc *rawConn, req kmsg.Request) kmsg.Response {
	t.Helper()
	_, body, err := rc.recv(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := decode(req, body)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}
