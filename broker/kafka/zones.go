package kafka

// Zone routing at the protocol edge. Each request's client zone is decided from what the
// connection tells (Config.Routing.ClientZone: the listener's zone, a tag in client.id,
// the rack of its Fetch requests, its source address); a zone no accepting broker is in
// counts as unknown. Metadata then names, for a client of zone Z, a broker of Z as the
// leader of each partition led elsewhere (routing.ZoneView.Leader), with the real leader
// epoch; that broker takes the client's produce as a proxy and serves its reads as a read
// replica (Backend.Writer/Reader get the zone). A consumer that only sends its rack in
// Fetch is pointed at its zone's replica by the leader (PreferredReadReplica, KIP-392).
// Clients of unknown zone see the real leaders, as in Kafka. Every connection's bytes are
// counted by the client's zone (routing.Traffic).

import (
	"context"
	"strconv"
	"strings"
	"sync"

	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/routing"
)

type zoneKey struct{}

// withZone carries the request's client zone to handlers that only see a context.
func withZone(ctx context.Context, zone string) context.Context {
	if zone == "" {
		return ctx
	}
	return context.WithValue(ctx, zoneKey{}, zone)
}

// zoneFrom is the request's client zone ("" unknown).
func zoneFrom(ctx context.Context) string {
	z, _ := ctx.Value(zoneKey{}).(string)
	return z
}

type listenerNameKey struct{}

// withListenerName carries the name of the listener the request came in on ("" the
// main listener; a zone listener is named after its zone) to handlers that only see a
// context: the brokers they name are given by their listeners of that name
// (metadata.Broker.Endpoint), so a client stays on listeners of one name and protocol.
func withListenerName(ctx context.Context, name string) context.Context {
	if name == "" {
		return ctx
	}
	return context.WithValue(ctx, listenerNameKey{}, name)
}

// listenerNameFrom is the name of the request's listener ("" the main listener).
func listenerNameFrom(ctx context.Context) string {
	n, _ := ctx.Value(listenerNameKey{}).(string)
	return n
}

// zoneViews caches the per-zone view of the current metadata view.
type zoneViews struct {
	mu sync.Mutex
	v  *metadata.View
	zv *routing.ZoneView
}

func (s *Server) zoneView(v *metadata.View) *routing.ZoneView {
	s.zones.mu.Lock()
	defer s.zones.mu.Unlock()
	if s.zones.v != v {
		s.zones.v, s.zones.zv = v, routing.NewZoneView(v)
	}
	return s.zones.zv
}

// clientZone decides the zone of the client of a request on c, and counts the
// connection's bytes under it from now on.
func (s *Server) clientZone(c *conn, clientID string, v *metadata.View) string {
	if !s.cfg.ZoneRouting {
		return ""
	}
	info := routing.ClientInfo{ListenerZone: c.listenerZone, ClientID: clientID, Remote: c.nc.RemoteAddr()}
	if r := c.rack.Load(); r != nil {
		info.Rack = *r
	}
	z, _ := s.cfg.Routing.ClientZone(info)
	if z != "" && !s.zoneView(v).HasZone(z) {
		z = ""
	}
	if c.tc != nil {
		if last := c.zone.Load(); last == nil || *last != z {
			c.zone.Store(&z)
			peer := z
			if peer == "" {
				peer = routing.UnknownZone
			}
			c.tc.SetPeer(peer, routing.KindClientOther)
		}
	}
	return z
}

// peerBroker marks c as another broker's connection (inter-broker requests carry the
// client id weir-broker-<id>): its bytes count as kind link (routing.KindPeer) with that broker's zone.
func (s *Server) peerBroker(c *conn, clientID string) {
	if c.tc == nil || c.peer.Load() {
		return
	}
	id, err := strconv.ParseInt(strings.TrimPrefix(clientID, "weir-broker-"), 10, 32)
	if err != nil {
		return
	}
	zone := routing.UnknownZone
	if br, ok := s.meta.View().Broker(int32(id)); ok && br.Rack != "" {
		zone = br.Rack
	}
	c.peer.Store(true)
	c.tc.SetPeer(zone, routing.KindPeer)
}
