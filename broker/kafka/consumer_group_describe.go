package kafka

// ConsumerGroupDescribe (key 69, v0-v1): a KIP-848 consumer group's epochs, members,
// their assignments and targets, served by the group coordinator (broker/group
// consumer_describe.go; Describe on the group, Describe on the topics its members hold).
// Advertised with ConsumerGroupHeartbeat.

import "github.com/twmb/franz-go/pkg/kmsg"

func init() {
	register(api{key: kmsg.ConsumerGroupDescribe.Int16(), min: 0, max: 1, on: consumerGroupsOn, handle: handleGroup})
}
