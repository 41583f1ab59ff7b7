// Package peer is Weir's inter-broker request channel: a persistent, pipelined
// connection from one broker to another's Kafka listener, carrying requests of the
// internal API key (broker/kafka: InternalKey), and the formats of those requests.
//
// Frames are Kafka's: size int32, then a request header v1 (key 10000, version 0,
// correlation id, client id "weir-broker-<id>") and the body; answers come back in request
// order with a response header v0 (correlation id). A body starts with an op byte:
//
//	OpLink     a proxy's links to the leader (zone routing: the batch stays in the
//	           proxy's WAL, see broker/partlog/link.go)
//	           req:  op | proxy int32 | proxyEpoch int64 | n int32 | n × link (partlog.LinkLen)
//	           resp: n int32 | n × (code int16 | base int64 | logStart int64)
//	OpOffsets  log ends of partitions, asked of their leader
//	           req:  op | n int32 | n × (topic [16]byte | partition int32)
//	           resp: n int32 | n × (code int16 | hw int64 | logStart int64 | leaderEpoch int32)
//	OpFollow   a read replica's long poll for the index entries of partitions it serves
//	           for its zone (wire.go: FollowRequest, FollowResult)
//	OpWake     answer the replica's long poll in flight now (its partitions changed)
//
// Integers are big endian; codes are Kafka error codes (0: none). A request that could
// not be sent fails with ErrUnavailable (the peer never saw it); one sent whose answer
// never came fails with ErrLost: the peer may or may not have acted on it.
package peer
