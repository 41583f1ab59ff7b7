// Package zonelab is the multi-zone lab: Weir controllers, brokers and clients as
// processes in network namespaces, one namespace per zone, with every byte that crosses
// zones counted on the veth it crossed. It measures Invariant 6 (zone-tagged clients
// cause no cross-zone record bytes) and, with untagged clients, the contrast.
//
// Topology (zones a, b, c; any names and any number work; two brokers per zone shown):
//
//	                    ┌─────────────── <prefix>control ───────────────┐
//	                    │ controllers 10.77.0.11-13    (no forwarding)  │
//	                    └─────x-a───────────x-b───────────x-c───────────┘
//	                          │             │             │      control veths
//	                      x-control     x-control     x-control
//	┌──── <prefix>a ──────────┴──┐  ┌──────┴──────┐  ┌───┴──────── <prefix>c ───┐
//	│ brokers 10.77.1.11, .12    │  │ <prefix>b   │  │ brokers 10.77.3.11, .12  │
//	│ clients                 x-b├──┤x-a     x-c  ├──┤x-b  clients              │
//	│                         x-c├┐ │ 10.77.2.x   │ ┌┤x-a                       │
//	└────────────────────────────┘│ └─────────────┘ │└──────────────────────────┘
//	                              └─────────────────┘        zone veths
//
// (x-<peer> is the end of a veth pair in one namespace; its other end, x-<this>, is in
// the peer's namespace. A "veth" below is such a pair.)
//
// Every address of a namespace sits on its loopback device, so traffic between two
// processes of one zone never leaves the namespace and touches no veth. The namespaces
// are joined by a full mesh of point-to-point veth pairs, one per pair of namespaces,
// with a /24 route per peer over its veth (source address: the namespace's .1); the
// control namespace does not forward. So the bytes a zone sends to another zone cross
// exactly that pair's veth, and the veth's counters (read with `ip -s -j link` at the
// zone's end: tx = sent by the zone, rx = received) are the per-pair, per-direction
// cross-zone bytes. Veths to the control namespace carry controller traffic (and the
// object store's, if it ever runs there) and are summed apart: control traffic may cross
// zones. No iptables/nftables needed; IPv6 is off in every namespace, so nothing but the
// lab's own traffic (and ARP) shows on a veth. The counters count Ethernet frames: IP
// and TCP headers, ACKs, Kafka framing and gossip are included.
//
// What the lab does not see: the WAL root and the localfs object store are directories
// on the local disk that every namespace shares (namespaces share the file system), as
// brokers share the FSx mount in production; storage traffic is not network traffic
// here. Gossip between brokers does cross zone veths and counts as cross-zone bytes
// (about 5-10 KB/s for six brokers).
//
// Processes: `weir controller` in the control namespace, `weir broker` in its zone's
// namespace (`ip netns exec`), bound to its own address (Kafka :9092, metrics :9644,
// gossip :7946), --rack <zone>, a shared --wal-root and --object-dir under Config.Dir.
// Clients: Bench (`weir bench`, franz-go, a process), Kcat (librdkafka, a process) and
// Franz (franz-go in the calling process, connections opened in the zone's namespace by
// DialContext), each untagged or tagged (client.id from Config.TagClientID, default
// "weir_az=<zone>", and rack = zone); RunLoad drives a measured workload and checks that
// every record is read back.
//
// Names and cleanup: namespaces are named <prefix><zone> and <prefix>control, the prefix
// unique per lab ("weir-<6 hex>-" by default). A lab holds an flock on
// /run/weir-zonelab/<prefix>.lock while it lives; the kernel drops it when the process
// dies, so CleanupStale (which Start runs first) can tell a crashed run's leftovers from
// a running lab's namespaces and removes only the former, killing the processes in them.
// Processes started by the lab get SIGKILL as their parent-death signal. Close stops the
// processes and deletes the namespaces, which destroys the veths.
//
// Root is needed (Available says why not); tests skip without it unless
// WEIR_REQUIRE_NETNS=1.
package zonelab
