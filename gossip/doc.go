// Package gossip is the brokers' membership layer: brokers of one Weir cluster gossip
// among themselves with hashicorp/memberlist (SWIM with Lifeguard) to learn who is
// alive, in which zone, at which Kafka endpoint and with which broker epoch, and to
// suspect quickly that a broker has failed.
//
// Gossip decides nothing. When memberlist declares a peer dead (or the peer leaves
// gracefully), Events.OnLeave fires and the broker reports the peer as suspect to the
// Raft controller, which decides about fencing (leases, fence tokens). Members and
// Lookup give the live view for routing.
//
// # Identity and metadata
//
// A broker's memberlist node name is "broker-<id>", so the broker id is unique in the
// cluster: a restarted broker takes over its name (memberlist refutes the old
// incarnation, or reclaims the name at a new address once the old one is dead), and
// two processes claiming one id are reported as conflicts. The node metadata is a
// compact binary record (magic 'W', version, broker id, epoch, zone, Kafka address;
// about 40 bytes, at most 404, below memberlist.MetaMaxSize = 512). A peer whose
// metadata does not decode, or whose name does not match the id in it, is dropped by
// memberlist's Alive delegate: it never enters the view, is never probed or reported,
// and is logged and counted (weir_gossip_malformed_meta_total) once per distinct
// metadata. A known peer that later announces malformed metadata keeps its last valid
// view. Nothing received from a peer can panic this package.
//
// # Failure detection time
//
// With the defaults (ProbeInterval 100 ms, ProbeTimeout 50 ms, SuspicionMult 4,
// SuspicionMaxTimeoutMult 3, GossipInterval 100 ms) a crashed broker is declared
// dead after
//
//	time until some peer probes it (≤ two probe rounds: each member probes its
//	peers in turn, one per ProbeInterval, in an order reshuffled every round) +
//	one failed probe period (direct, indirect and TCP probes: ProbeInterval) +
//	suspicion timeout (SuspicionMult × ProbeInterval × max(1, log10 n) = 400 ms for
//	n ≤ 10, up to 3× that while no other peer confirms the suspicion) +
//	gossip of the dead message (~GossipInterval)
//
// With 3 brokers a peer is probed within 2 probe rounds, so Close() to OnLeave on every
// survivor takes 0.5 to 0.8 s (0.9 s if a random gossip round misses the second
// survivor): TestCrashDetection checks these bounds on a fake clock (testing/synctest,
// members on an in-memory network; 0.50–0.79 s over a thousand trials), and
// TestCrashDetectionRealNetwork measures 0.6–0.7 s on loopback (1.2 s with the earlier
// 200 ms probes and 800 ms suspicion). A graceful Leave is seen within a gossip round
// or two (0.1–0.2 s).
//
// # Restarts
//
// A broker restarted at the same gossip address takes over its identity at once (the
// peers see OnUpdate with the new epoch, or OnJoin if the old one was already
// declared dead). Restarted at a new address after its old incarnation was declared
// dead, it rejoins at once (OnJoin). Restarted at a new address before that, its
// alive messages conflict with the old incarnation until the old one is declared dead
// (< 1 s); it then joins through its refutation or its first push/pull sync, which
// memberlist staggers to between one and two PushPullIntervals (5–10 s) after start.
// In that case OnLeave still fires for the old incarnation, carrying the old epoch,
// shortly before OnJoin for the new one: the suspect report should name the epoch so
// the controller does not fence the new incarnation.
package gossip
