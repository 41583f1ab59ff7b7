package kafka

import "github.com/weir-io/weir/metadata"

// StorageDescriber is an optional Backend capability: where the data of the partitions
// led here lives (DescribeLogDirs) and their idempotent producers (DescribeProducers).
// Without it both APIs answer with nothing for this broker.
type StorageDescriber interface {
	// LogDirs lists the WAL directories holding data of the partitions led here that
	// object storage does not hold yet, and the object store holding the rest.
	LogDirs() []LogDir
	// Producers lists the producers with state in partition index of t, led here;
	// the error is the backend's (not led here: a NOT_LEADER_OR_FOLLOWER sentinel).
	Producers(t *metadata.Topic, index int32) ([]ProducerInfo, error)
}

// LogDir is one place partitions' data lives: a WAL directory (its path on the shared
// file system) or the object store ("objects:" and the store).
type LogDir struct {
	Dir        string
	Partitions []LogDirPartition
}

// LogDirPartition is the bytes of one partition in a LogDir.
type LogDirPartition struct {
	Topic     string
	Partition int32
	Bytes     int64
}

// ProducerInfo is one idempotent producer of a partition.
type ProducerInfo struct {
	ID           int64
	Epoch        int16
	LastSequence int32
	// TxnStart is the first offset of the producer's open transaction here (-1: none).
	TxnStart int64
}
