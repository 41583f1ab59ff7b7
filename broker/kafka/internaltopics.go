package kafka

import (
	"fmt"

	"github.com/weir-io/weir/metadata"
)

// Internal topics are the broker's own state: __consumer_offsets holds the groups'
// committed offsets, restored from it at start-up and on failover, so a client record
// forged into it moves another group's offsets. Like Kafka (ReplicaManager with
// internalTopicsAllowed=false, Topic.isInternal), clients may read them but never
// append to them, delete their records, delete them or change their configs, whatever
// their ACLs say; the broker writes them itself (group commits) below this layer.

// errInternalTopic refuses a client operation on an internal topic. It wraps
// metadata.ErrInvalidTopic, so clients get INVALID_TOPIC_EXCEPTION, Kafka's answer to a
// Produce there ("Cannot append to internal topic").
var errInternalTopic = fmt.Errorf("%w: internal topic", metadata.ErrInvalidTopic)

// isInternalTopic is Kafka's Topic.isInternal: the two topics brokers own.
func isInternalTopic(name string) bool {
	return name == metadata.OffsetsTopic || name == "__transaction_state"
}

// refuseInternal returns errInternalTopic, naming the operation, for an internal topic.
func refuseInternal(op, topic string) error {
	if !isInternalTopic(topic) {
		return nil
	}
	return fmt.Errorf("%w %s: clients may not %s it", errInternalTopic, topic, op)
}
