// Package chaos is `weir chaos`: it runs a cluster of separate processes (or attaches to
// one), drives a load it can verify — idempotent producers over many partitions, a
// consumer group and rack-aware consumers reading everything back — injects faults on a
// schedule or at random (SIGKILL and restart of brokers, SIGSTOP past fencing, the
// controller leader killed, several brokers killed, rolling restarts, a broker cut off
// from the controllers, the file system and zone faults, the consumer group's
// coordinator moved gracefully or killed), measures what each fault did to clients
// (per-partition unavailability, detection, time to a new leader, latency around the
// fault, the consumer group's pause to the millisecond and its rebalances), checks every
// acked record at the end (internal/ackcheck: lost, duplicated, an offset with two
// values, a group that resumed away from its commit), and reports as text, JSON and a
// PNG timeline. It exits non-zero when the checker finds a
// violation, so CI can run a short scenario.
//
// Files: config.go (settings, fault specs), target.go (the cluster: own processes or
// attached through commands), load.go (producers, consumers, per-second samples),
// watch.go (leaders and brokers over time, from Kafka Metadata), faults.go (running the
// schedule), storage.go and zones.go (file system and zone faults), coordinator.go
// (coordinator-move, coordinator-kill), txn.go (--txn: transactional writers and their
// read_committed check; txn-coordinator-kill), txnfaults.go (txn-leader-kill,
// txn-producer-pause: writers of their own at a chosen step), txnctp.go (the
// consume-transform-produce writer and its offsets-against-output check), groupproto.go
// (--group-protocol consumer: KIP-848 members), compacted.go (--compacted: a keyed
// writer to a compacted topic, its latest-version check), share.go (--share: share
// consumers of a queue, every acked record delivered and acknowledged), report.go (per-fault figures, text, JSON, PNG),
// targets.go (issue 22's figures beside their targets, the time to leaders spread again
// after a return), chaos.go (Run).
//
// The group's pause is measured from the members' reads: the longest time in a fault's
// window without one, which cannot be shorter than the time between reads outside
// faults (the report's baseline_group_gap; at a low rate, the time between records).
// Its rebalances come from the members' OnPartitionsAssigned, OnPartitionsRevoked and
// OnPartitionsLost callbacks, counted once per new generation.
package chaos
