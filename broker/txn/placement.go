package txn

import "hash/fnv"

// TopicName is the internal topic holding the coordinator's records; OffsetsTopic the
// one holding consumer groups' offsets, whose partitions AddOffsetsToTxn adds.
const (
	TopicName    = "__transaction_state"
	OffsetsTopic = "__consumer_offsets"
)

// PartitionFor is the partition of __transaction_state (of partitions) holding id's
// records, whose leader is id's coordinator: FNV-1a 32 of the ID modulo partitions. It
// must stay the same for ever: an ID placed elsewhere would lose its producer ID and
// epoch, and with them the fencing of its zombies.
func PartitionFor(id string, partitions int) int32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return int32(h.Sum32() % uint32(partitions))
}
