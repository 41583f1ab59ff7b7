// Package routing is the pure logic of zone routing: in which zone a Kafka client is,
// which broker of its zone stands in for a partition's leader (the proxy a producer is
// sent to, the replica a consumer reads from), and how many bytes cross zones and why.
// It owns no connections and no partitions and does not import the broker; the broker's
// proxy-produce and read-replica paths ask it and report to it.
//
// # A client's zone
//
// Config.ClientZone decides a client's zone from what the broker knows of it
// (ClientInfo), first match wins:
//
//  1. the listener it connected to, when that is a per-zone listener (SourceListener):
//     an operator's explicit choice, and it leaves client.id alone (tagging client.id
//     changes the identity quotas, logs and metrics see);
//  2. a tag in its client.id (SourceClientID), by the keys of Config.TagKeys in their
//     order (default weir_az, automq_az, warpstream_az, ws_az, zone: the formats users
//     already have, see ZoneTag);
//  3. the rack a Fetch v11+ carries (client.rack, KIP-392; SourceRack). It arrives only
//     with the first Fetch, so a connection's zone may change from CIDR to rack then;
//  4. the source address, by Config.ZoneCIDRs (longest matching prefix; SourceCIDR).
//
// None of these: the zone is unknown ("", SourceNone) and the client is routed as
// Kafka routes it: to the real leaders. Zones are compared exactly as given, byte for
// byte and case-sensitive, as Kafka compares client.rack with broker.rack (KIP-392's
// RackAwareReplicaSelector): a client's zone must be spelled as the brokers' --rack
// (us-east-1a and use1-az1 are different zones to Weir). Tag keys are matched without
// regard to ASCII case; their values are kept as they are.
//
// # The per-zone view of leadership
//
// ZoneView (built once per metadata.View) answers, for a client in zone Z, which broker
// to name as a partition's leader: the real leader when it is in Z; otherwise one of Z's
// accepting brokers (active, not draining, not fenced), chosen by rendezvous
// (highest-random-weight) hashing: every candidate b gets the score
//
//	mix64(fnv64a(topic ID [16] | partition int32 BE | b int32 BE))
//
// (FNV-1a 64, then the splitmix64 finaliser), and the highest score wins, the lower
// broker ID on a tie. The choice depends only on the partition and the set of
// candidates, so every broker computes the same one without talking to the others, a
// restart (new epoch, same ID) changes nothing, and a membership change moves only the
// partitions that chose a broker that left (they spread over the rest) or that now score
// highest on a broker that joined. The hash is part of the cluster protocol: brokers of
// one cluster must agree on it (TestRendezvousGolden pins it). A zone with no such
// broker, an unknown zone, and a partition without a serving leader keep the real
// leader. The same choice is the zone's preferred read replica (KIP-392) for consumers,
// so a zone's proxy for a partition also serves its reads.
//
// # Byte accounting
//
// Traffic counts the bytes a broker moves, by peer zone and kind, in the Prometheus
// counter weir_traffic_bytes_total{local_zone, peer_zone, kind, direction}:
//
//	client_records  record batches of Produce requests (in) and Fetch answers (out)
//	client_other    everything else on client connections (headers, metadata, groups)
//	link            inter-broker connections (KindPeer: proxies' links and their answers,
//	                read replicas' follows, log-end queries)
//	wal_read        reads of another broker's WAL on the shared file system; the peer
//	                is the WAL owner's zone (which is where the bytes would cross if the
//	                file system served each zone locally; the NFS hop itself goes to the
//	                file server, whose placement the broker does not see)
//	controller      the broker's traffic with the controllers
//	gossip          memberlist traffic
//
// direction is in (received by this broker) or out (sent). A byte between two brokers
// (link, gossip) is counted by both, as out by the sender and in by the receiver; `weir
// admin traffic` counts each such byte once, at its sender. Counting is an atomic add on
// cells resolved once per connection (Conn.SetPeer), never a label lookup per call.
// Peer zone labels are bounded (MaxPeerZones; more, and invalid ones, count under
// "_other"); an unknown zone is "unknown".
//
// Nothing here holds global state; every Traffic registers on the Registerer it is
// given and unregisters on Close.
package routing
