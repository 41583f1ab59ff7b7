// Package peer is Weir's inter-broker request channel: a persistent, pipelined
// connection from one broker to another's Kafka listener, carrying requests of the
// internal API key (broker/kafka: InternalKey), and the formats of those requests.
//
// Frames are Kafka's: size int32, then a request header v1 (key 10000, version 0,
// correlation id, client id "weir-broker-<id>") and the body; answers come back in request
// order with a response header v0 (correlation id). A body starts with an op byte:
//
//	OpLink     (7) a proxy's links to the leader (zone routing: the batch stays in the
//	           proxy's WAL, see broker/partlog/link.go), on one link session
//	           req:  op | proxy int32 | proxyEpoch int64 | session int64 |
//	                 n int32 | n × link (partlog.AppendLink: v1, or v2 with the
//	                 batch's transactional attribute, each by its version byte)
//	           resp: n int32 | n × (code int16 | class int8 | base int64 | logStart int64)
//	           class (LinkClass): 0 acked (code 0), 1 refused (not in the log, never
//	           will be), 2 maybe logged (written from base, not acked: keep the batch)
//	OpFenceLinks (8) fence the proxy's link sessions below (epoch, session) and give the
//	           log ends that bound every link of them (FenceRequest)
//	           req:  op | proxy int32 | epoch int64 | session int64 |
//	                 n int32 | n × (topic [16]byte | partition int32)
//	           resp: as OpOffsets, hw being the log end (next offset)
//	OpLinkV1   (1) retired (no session, no class): answered with an empty body
//	OpOffsets  log ends of partitions, asked of their leader (a proxy; the group lag
//	           collector of a group's coordinator)
//	           req:  op | n int32 | n × (topic [16]byte | partition int32)
//	           resp: n int32 | n × (code int16 | hw int64 | logStart int64 | leaderEpoch int32)
//	OpFollow   a read replica's long poll for the index entries of partitions it serves
//	           for its zone (wire.go: FollowRequest, FollowResult)
//	OpFollowTxn (10) OpFollow whose answer adds, per partition, the last stable offset
//	           and the aborted transactions from the offset asked (read_committed on
//	           replicas); a leader without it answers an empty body, and the replica
//	           falls back to OpFollow
//	OpWake     answer the replica's long poll in flight now (its partitions changed)
//	OpMarkers (12) a transaction coordinator's markers for partitions of the receiver
//	           (markers.go)
//	OpVerifyTxn (13) a partition leader asks a transaction coordinator whether a
//	           partition is in a producer's transaction (KIP-890, verifytxn.go); a
//	           broker without it answers an empty body, and the leader does not check
//	OpShareState (14) a share partition's leader reads or writes its state on the
//	           broker leading its __share_group_state partition (sharestate.go)
//	OpChallenge (5), OpAuth (6): the peer authentication (auth.go); every op has a
//	           code of its own (TestOpCodesDistinct)
//
// Integers are big endian; codes are Kafka error codes (0: none). A request that could
// not be sent fails with ErrUnavailable (the peer never saw it); one sent whose answer
// never came fails with ErrLost: the peer may or may not have acted on it.
package peer
