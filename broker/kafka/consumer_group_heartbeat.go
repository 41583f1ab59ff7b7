package kafka

// ConsumerGroupHeartbeat (key 68, v0-v1): the KIP-848 consumer group protocol's one
// request, served by the group coordinator (broker/group consumer.go), which checks the
// ACLs (Read on the group, Describe on each subscribed topic). Served and advertised only
// with the coordinator's ConsumerProtocol on (--group-consumer-protocol).

import "github.com/twmb/franz-go/pkg/kmsg"

func init() {
	register(api{key: kmsg.ConsumerGroupHeartbeat.Int16(), min: 0, max: 1, on: consumerGroupsOn, handle: handleGroup})
}

// consumerGroupsOn says whether the KIP-848 keys are served.
func consumerGroupsOn(s *Server) bool { return s.groups != nil && s.groups.ConsumerProtocol() }
