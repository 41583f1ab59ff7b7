// Package controller is Weir's Raft controller: a quorum of controllers replicates the
// cluster metadata (brokers, topics, partitions, leader epochs, producer-ID blocks, the
// object manifests of the object-storage tier) with
// hashicorp/raft, keeps broker leases in the leader's memory, fences brokers whose
// lease ran out and fails their partitions over to live brokers in the same command,
// and serves brokers over an HTTP/JSON API.
//
// # Files
//
//   - state.go, fsm.go: the replicated State and the deterministic state machine (Apply,
//     Snapshot, Restore), publishing an immutable metadata.View after every change.
//   - commands.go, cmd_*.go: the Raft log entries, applied by domain (cluster, brokers,
//     topics, moves, producer IDs, objects: cmd_objects.go states the manifest rules).
//   - raft.go: hashicorp/raft wiring (raft-boltdb/v2 log+stable store in raft.db, file
//     snapshots, TCP transport, static bootstrap) and hclog → slog. Config's
//     RaftTransport, LogStore, StableStore and SnapshotStore replace any of those
//     defaults; `weir controller` leaves them nil. They are the seam for tests that run
//     a quorum in memory (quorum_mem_test.go: raft.NewInmemTransport and in-memory
//     stores; connections cut with Disconnect to make a minority). An injected transport's
//     address must be the node's RaftAddr in Peers; the Controller closes the transport
//     but never an injected store, which keeps its state across a restart like a data
//     dir does.
//   - controller.go, config.go, metrics.go: the Controller life cycle, Config, metrics.
//   - api*.go: the HTTP API's handlers (routes in api.go); writes reaching a follower
//     are proxied to the leader. The route table, the JSON bodies, the error codes and
//     the watch's delta format are package ctlwire's, shared with the client.
//     errors.go: the errors that never cross the API.
//   - placement.go: where new partitions go. leases.go: quorum broker leases (every
//     controller's table) and the timing argument; leasevote.go: the fence votes and
//     the closed-connection hint; votelog.go: the votes on disk; Config.GrantedLease
//     the lease brokers are granted. cmd_recovery.go, cmd_movebatch.go: batched
//     recovery and hand-off completions (one Raft entry for many partitions).
//     Failover and drain planning is metadata/failover.go (shared with metatest),
//     applied in cmd_brokers.go.
//   - balancer.go: the leader's balancer (planBalance, a pure function, and its loop);
//     loads.go: the partitions' reported traffic (leader only).
//   - delta.go: the step history the metadata watch's deltas are built from.
//   - The client brokers and weir admin use is package ctlclient (controller/ctlclient:
//     metadata.Store, Registrar, Mover, Recoverer, Leaser, Drainer and ObjectManifest
//     over the API, with a long-poll watch, and the lease clock); it imports ctlwire and
//     never this package, which never imports it either (its cluster tests here do).
//
// # Failover
//
// FenceBroker (proposed by the leader when a lease runs out and a majority of the
// controllers voted for it, leases.go) fences one registration
// and, in the same command, plans its partitions (metadata.PlanFence): each partition
// the broker led gets a new leader, its graceful move's target if that is active, else
// an active (not draining) broker in its zone if any, else any, the one leading the
// fewest partitions
// (counting the plan's own picks), ties to the lowest ID; it becomes Recovering with
// the next leader epoch and RecoverEpoch = the fenced epoch (kept if it was Recovering
// already: its taker died), its log chain unchanged; moves to the broker are cancelled.
// With no active broker the partitions wait leaderless (Leader -1, Recovering) and the
// next RegisterBroker takes them all (metadata.PlanAdopt). Because the plan is in the
// log, a change of controller leader between the fence and the recovery loses nothing.
// The new leader seals the fenced broker's WAL directories of epochs <= RecoverEpoch,
// reads them to their end and calls CompleteRecovery: accepted from the partition's
// leader in its current registration, in the takeover's leader epoch, with an end at
// or after the recovered range's start; {leader, end} joins the chain. The same
// completion again is a no-op success (a retry whose answer was lost).
//
// Graceful moves have generations: BeginMove sets Partition.MoveGen to the state
// version it produces, and CompleteMove carrying a MoveGen is refused unless that move
// is the pending one, so a retried completion of a cancelled move cannot complete a
// later move with an old end offset (ctlclient.Client.CompleteMoveGen).
//
// # Drain
//
// DrainBroker (a broker on SIGTERM: ctlclient.Client.DrainBroker; an operator: weir
// admin drain) drains one live registration: in one command (drainBrokerCmd,
// metadata.PlanDrain) the broker turns draining and every partition it leads that is neither Recovering nor
// moving already begins a graceful move (MoveGen = the command's version) to an
// accepting broker: its zone first, then the fewest partitions (moves under way counted
// at their target), then the lowest ID; moves to it are cancelled. A draining broker is
// live (metadata.Broker.Active: it heartbeats, serves, completes hand-offs and
// recoveries, its lease is checked as any) but not accepting (Broker.Accepting):
// placement, the failover plan, BeginMove and the balancer never pick it. Its
// Recovering partitions finish their recovery first; the balancer then moves them, and
// any whose drain move was cancelled. Nothing fails over and nothing is replayed: each
// leader hands off with CompleteMoveGen, so producers see only retriable errors. Draining
// again re-plans what is left; a new registration (next epoch) is active again (moves
// still pending are handed off by the new process). Refused (metadata.ErrFenced) for a
// stale or fenced registration. With no accepting broker the partitions stay put.
//
// # Balancer
//
// The Raft leader runs the balancer (Config.Balance, on by default) every
// BalanceInterval (3 s): planBalance decides, from the View, the reported loads and its
// own recent moves, a few graceful moves, proposed as BeginMove. Cost of a partition:
// 1 + its bytes/s over the mean bytes/s per partition (brokers report rates with their
// heartbeats every ctlclient.ClientConfig.LoadReportInterval, only partitions with
// traffic, the 4096 hottest; the leader keeps them in memory for 30 s, like leases). Throttle: no move
// starts while BalanceMaxMoves (4) partitions are moving, whatever moved them, but for
// a catch-up (below). Never moved: Recovering or moving partitions, or one it moved
// within BalanceCooldown (5 min); no move from A to B within the cooldown of one from B
// to A; both only while A and B are the registrations the move was made between (a
// fenced or re-registered broker is a new process; what it led was failed over, not
// moved by the balancer). Never a target: a draining, fenced or silent (no heartbeat
// within the granted lease) broker. Order: partitions
// left on draining brokers first (to their zone if possible); then zones, whose fair
// share of the total cost is proportional to their accepting brokers, when one is more
// than max(1, 10%) of its share off (a move from the most loaded broker of the zone most
// above its share to the least loaded broker of the zone most below); else, within each
// zone, when a broker is more than max(1, 10%) off the zone's mean (most loaded → least
// loaded). Each move takes the partition whose cost is closest to half the gap and below
// it, so every move lowers the spread: with steady costs it cannot oscillate, and inside
// the thresholds it does nothing. A new leader starts with no memory (loads, cooldowns)
// and decides one interval after its election. GET /v1/balancer (forwarded to the
// leader) and weir admin status show it; metrics weir_controller_balancer_*,
// weir_controller_broker_partitions_led, weir_controller_partitions_moving.
//
// Catch-up (issue 22: leaders spread again within 10 s of a broker's return). A broker
// that returns after a failover is empty: of 1,000 partitions on 3 brokers it is owed
// about 333 (300 to come within the threshold). At 4 moves a 3 s round that took 75
// rounds, about 4 minutes. The soak's 27 s were the same arithmetic on `weir chaos`'s
// 60 partitions: two brokers back, owed 18 each, 36 moves at 4 a round, 9 rounds of
// 3 s, with the one survivor of the two kills leading everything meanwhile. No fixed
// limit serves both a return and a steady state: 10 s leave at most three rounds after
// the return (up to 3 s to the first), so about 100 moves a round, which would also let
// a swing of traffic move a hundred hot partitions at once on 30 s averages. The limit
// therefore scales with the work: a broker the round may move to that is short, below
// the threshold of the mean both in partitions counted (moving ones at their target)
// and in cost, is owed partitions up to the mean count (rounded down: the middle of the
// hysteresis band, not its edge, where noise would move more); the sum is the catch-up.
// Rounds start it whatever else is moving, up to half a share (the mean count) in
// flight (in-flight moves already count at their targets, so none is started twice);
// while a catch-up is under way the loop looks every tenth of BalanceInterval and runs
// the next round as soon as nothing is moving. Catch-up moves come first after the drain
// moves: to the short broker owed the most, from the most loaded broker, the partition
// closest to what it lacks in cost per partition owed (count and cost fill together),
// until it is owed nothing or full in cost. Counts, not costs, decide who is short:
// traffic uneven over even counts (and the partitions a hot broker sheds) is not a
// broker missing partitions, and is corrected at the steady rate. Half a share at once
// is less than what draining one broker begins in one command (PlanDrain), so brokers
// and controllers take it already; a hand-off copies nothing (the old leader syncs what
// it has and completes, a partition without traffic has nothing to sync; the new leader
// indexes its predecessor's WAL tail, one scan for the partitions that arrive together),
// but hundreds at once on a loaded machine made every one of them slower: a whole share
// at once (338 moves) kept the moved partitions' writes waiting 2.8 s (median) where
// moves 4 at a time waited 0.6–1 s (docs/PERFORMANCE.md). The round proposes its moves
// 64 side by side (Raft's leader writes up to 64 entries an append, one fsync). Bound:
// the returned broker is a target as soon as its registration renews its lease; the
// first round comes within BalanceInterval (3 s), then two halves a hand-off each (about
// a second on a loaded machine) with a tenth of an interval between: about 6 s. Steady
// state is unchanged: inside the thresholds nothing is short and nothing moves
// (TestBalancerSteadyUnderNoisyLoads: a balanced cluster under rates jittering ±30 %
// makes no move in 200 rounds).
//
// Registration: a ctlwire.RegisterRequest carries the process's incarnation (random per
// ctlclient.Client). While the ID's active registration belongs to another incarnation
// heard from within the granted lease, the leader refuses it
// (metadata.ErrDuplicateBroker, 409 duplicate_broker); ctlclient.Client.RegisterBroker
// retries until its context ends. A heartbeat answered "fenced" closes
// ctlclient.Client.Fenced(); the client does not register again by itself (the broker
// restarts its storage first).
//
// # Formats
//
// Raft log entry (LogCommand): one type byte (commands.go; never renumbered) followed by
// the command's JSON. Types: 1 InitCluster, 2 RegisterBroker, 3 FenceBroker,
// 4 CreateTopic, 5 DeleteTopic, 6 CreatePartitions, 7 AlterTopicConfigs,
// 8 SetLogStartOffset, 9 AllocateProducerIDs, 10 BeginMove, 11 CompleteMove,
// 12 CancelMove, 13 PrepareObject, 14 CommitObject, 15 DeleteObjects,
// 16 CompleteRecovery, 17 DrainBroker, ..., 25 ReplaceRanges (the log cleaner's commit,
// cmd_objects.go). An entry that does not decode is refused alike by every replica (an
// older controller refuses DrainBroker: upgrade every controller before brokers drain;
// likewise ReplaceRanges before brokers compact).
// Commands whose meaning grew carry a flag the new proposers set, so an entry written
// before replays as it applied then and matches the snapshots of that time:
// FenceBroker "plan" (fail the partitions over), BeginMove "gen" (give the move a
// MoveGen); CompleteMove's "move_gen" is checked only when set.
//
// Snapshot: the JSON of State after the snapshot format version: {"format_version": 1,
// "cluster_id", "version", "next_producer_id", "next_object_id", "brokers": {"<id>":
// metadata.Broker, whose "state" is "active", "fenced" or "draining"}, "topics":
// {"<name>": metadata.Topic, each partition with its manifest "objects": [{"object",
// "first_offset", "last_offset", "max_timestamp", "bytes"}]}, "objects": {"<id>":
// metadata.Object}}. "max_timestamp" and "bytes" are left out while 0 (ranges committed
// before they existed restore with 0), and so are a partition's "move_gen",
// "recovering" and "recover_epoch" (snapshots without them restore as no move
// generation, not recovering) and its idempotent producer snapshot "producers"
// (metadata.ProducerSnapshot, also on CommitObject's ranges; snapshots and entries
// without it restore and replay as before: no producer snapshot). An older controller reading a snapshot with Recovering
// partitions would drop the flag: downgrading across failover is not supported; one
// reading a draining broker would take it for fenced (it refuses DrainBroker entries
// anyway): downgrade only when no broker is draining.
// "next_object_id" and "objects" are left out while there are none; "objects" was
// reserved (never written) before manifests existed, and an absent, null or empty value
// restores as no objects. Object IDs start at 1; an object's key is
// "objects/<ID, 20 digits>.obj". Deleted objects are dropped from "objects" (an ID
// below next_object_id that is not there was deleted). Restore replaces the state.
// "format_version" (SnapshotFormatVersion; "version" counts commands) is absent from
// snapshots written before it existed, which are version 1; Restore refuses any other
// version (ErrSnapshotVersion). Golden snapshots: testdata/snapshot-v1.json and the
// frozen testdata/snapshot-unversioned.json; `go test ./controller/ -run Golden -update`
// rewrites the current version's file only.
//
// Objects: prepare → PUT → commit → trim the WAL; retention and garbage collection
// delete the key from object storage first, then DeleteObjects. The rules are in
// cmd_objects.go, the checks in metadata.ObjectRules (shared with metadata.LocalStore).
// SetLogStartOffset drops the manifest's front ranges wholly below the new log start
// (metadata.TrimManifest). A garbage collector finds its work with
// metadata.View.GarbageObjects (prepared objects of a registration that is over;
// committed objects no partition's manifest references: their topics were deleted or
// the log starts passed all their ranges) and retention with View.ExpiredObjects
// (ranges still in a manifest below the log start: committed below it, or restored
// from a snapshot written before log starts trimmed manifests).
//
// Metadata watch (api_metadata.go, delta.go): GET /v1/metadata?after=V&wait=D is a long
// poll answered with ctlwire.ViewJSON once the version exceeds V. With delta=1 (brokers'
// watches ask for it) the answer is a delta when the FSM's step history (what each of the last
// versions changed, at most maxSteps versions and maxStepParts partition indices) reaches
// back to V: a ViewJSON with "delta_from": V, the cluster fields and "brokers" whole,
// "topics" only topics created or replaced (or changed in most of their partitions),
// "topic_parts": {"<name>": {"id", "count", "configs", "partitions": [...], "at":
// [position, ...]}} for topics that kept name, ID and count, "deleted_topics",
// "objects" only changed ones, "deleted_objects", and "scram"/"acls" only when
// "scram_set"/"acls_set". Otherwise, and without delta=1 (older clients), the full View.
// A client whose View is not at V (or whose topic does not match) drops the delta and
// asks for the full View next.
//
// Data dir: raft.db (bolt, log + stable store), snapshots/ (raft file snapshots, 2 kept);
// neither is created when the corresponding stores are injected.
//
// # Determinism
//
// Anything random or time-based (cluster ID, topic UUIDs, placement) is decided by the
// leader before it proposes, so Apply is a pure function of the log (object IDs and keys
// come from a counter in the state); Version counts the commands that changed the state
// and is therefore equal on every replica at the same log index. Commands re-check their preconditions when applied (a topic created
// meanwhile, a stale partition plan, a stale epoch) and refuse without changing anything.
// Topic administration is serialised on the leader (adminMu) so plans start from the
// previous result; partition, producer-ID and object commands validate entirely in
// Apply.
//
// # Locks
//
// Controller.adminMu → FSM.mu and Controller.regMu → FSM.mu, leaseTable.mu (via
// propose, which waits for Apply); FSM.mu → stepHistory.mu (record on publish) and
// stepHistory.cacheMu → stepHistory.mu (building a delta); FSM.mu, leaseTable.mu, loadTable.mu, balancer.mu
// (never held while proposing) and ctlclient.Client's mutexes are leaves, except
// Client.regMu → Client.leaseMu and Client.pidMu held across an RPC. No lock is held
// while waiting on the network except Client.regMu (registration, including its wait for
// a duplicate's lease to lapse), Controller.regMu (a registration's proposal) and
// Client.pidMu (producer-ID block).
package controller
