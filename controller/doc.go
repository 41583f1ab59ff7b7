// Package controller is Weir's Raft controller: a quorum of controllers replicates the
// cluster metadata (brokers, topics, partitions, leader epochs, producer-ID blocks) with
// hashicorp/raft, keeps broker leases in the leader's memory and fences brokers whose
// lease ran out, and serves brokers over an HTTP/JSON API.
//
// Files:
//
//   - state.go, fsm.go: the replicated State and the deterministic state machine (Apply,
//     Snapshot, Restore), publishing an immutable metadata.View after every change.
//   - commands.go, cmd_*.go: the Raft log entries, one type byte + a JSON body, applied by
//     domain (cluster, brokers, topics, partitions, moves, producer IDs).
//   - raft.go: hashicorp/raft wiring (raft-boltdb/v2 log+stable store, file snapshots, TCP
//     transport, static bootstrap), hclog → slog.
//   - controller.go, config.go: the Controller life cycle and its Config.
//   - api*.go: the HTTP API; writes reaching a follower are proxied to the leader.
//   - placement.go: where new partitions go.
//   - leases.go: broker leases and the fencing loop (leader only).
//   - client*.go: what a broker uses: metadata.Store, metadata.Registrar,
//     metadata.Mover and metadata.Leaser over the API, with a long-poll watch.
//
// Anything random or time-based (topic UUIDs, cluster ID, placement) is decided by the
// leader before it proposes a command, so Apply is a pure function of the log.
package controller
