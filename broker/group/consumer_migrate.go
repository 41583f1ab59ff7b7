package group

// consumer_migrate.go converts a group between the classic and the consumer (KIP-848)
// protocol while it has members, as Kafka 4's GroupMetadataManager does under
// group.consumer.migration.policy (Config.MigrationPolicy):
//
//	upgrade    the first ConsumerGroupHeartbeat (epoch 0) to a classic group with
//	           members whose protocol type is "consumer" (convertToConsumer): every
//	           classic member becomes a classic member of a consumer group at the
//	           group's generation, Stable, its last assignment its current and target
//	           assignment, with its session timeout and protocols; parked JoinGroup
//	           and SyncGroup requests are answered REBALANCE_IN_PROGRESS. The joining
//	           member then bumps the group epoch and the assignor moves partitions to
//	           it: the classic members give them up through the classic APIs
//	           (consumer_classic.go).
//	downgrade  a KIP-848 member leaving (or expiring, or fenced) when every other member
//	           uses the classic protocol (convertToClassic): the group becomes a classic
//	           group at the group epoch, Stable, each member's target assignment encoded
//	           as its classic assignment, and a rebalance starts at once.
//
// Both are made durable by the record the change writes anyway: the Consumer record
// (with its classic members) replaces the classic Meta, and a Meta replaces the Consumer
// record; committed offsets are not touched. If the upgrade's first write fails, the
// classic group the log still holds is put back (revertToClassic).

import (
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// errNoUpgrade: the classic group cannot be converted (the message says why); the
// joining member is answered GROUP_ID_NOT_FOUND, as in Kafka.
var errNoUpgrade = errors.New("group: cannot upgrade the classic group")

// convertToConsumer makes the classic group g (with members) a consumer group holding
// its members as classic members (Kafka's validateOnlineUpgrade, convertToConsumerGroup
// and ConsumerGroup.fromClassicGroup). Called with g locked.
func (g *group) convertToConsumer() error {
	switch {
	case !g.c.cfg.MigrationPolicy.upgrade():
		return fmt.Errorf("%w %s: the online upgrade is disabled (migration policy %s)", errNoUpgrade, g.name, g.c.cfg.MigrationPolicy)
	case g.state == stateDead:
		return fmt.Errorf("%w %s: it is being deleted", errNoUpgrade, g.name)
	case g.protocolType != "consumer":
		return fmt.Errorf("%w %s: protocol type %q is not consumer", errNoUpgrade, g.name, g.protocolType)
	case g.protocol == "" || g.meta == nil:
		// Its first generation is not complete (durable): no assignment to keep.
		return fmt.Errorf("%w %s: its first rebalance is in progress", errNoUpgrade, g.name)
	}
	cg := newConsumerGroup()
	cg.epoch, cg.assignEpoch, cg.fromClassic = g.generation, g.generation, g.meta
	for _, mm := range g.sortedMembers() {
		var sub kmsg.ConsumerMemberMetadata
		if err := sub.ReadFrom(mm.metadataFor(g.protocol)); err != nil {
			return fmt.Errorf("%w %s: member %s: malformed subscription: %w", errNoUpgrade, g.name, mm.id, err)
		}
		assigned, err := decodeAssignment(mm.assignment)
		if err != nil {
			return fmt.Errorf("%w %s: member %s: malformed assignment: %w", errNoUpgrade, g.name, mm.id, err)
		}
		topics := append([]string(nil), sub.Topics...)
		sort.Strings(topics)
		m := &cMember{
			id: mm.id, instanceID: mm.instanceID, rack: sub.Rack, clientID: mm.clientID, clientHost: mm.clientHost,
			epoch: g.generation, prevEpoch: g.generation, state: cStable, rebalanceTimeout: mm.rebalanceTimeout,
			topics: topics, assigned: assigned, revoking: parts{},
			classic: &classicInfo{sessionTimeout: mm.sessionTimeout, protocols: mm.protocols},
		}
		cg.members[m.id] = m
		cg.target[m.id] = assigned
		if m.instanceID != nil {
			cg.static[*m.instanceID] = m.id
		}
	}
	cg.subMeta = fingerprint(g.cgSubscribed(cg))
	// The classic group ends here: whoever waits in a rebalance rejoins the consumer
	// group (Kafka answers them REBALANCE_IN_PROGRESS too).
	g.stopAll(kerr.RebalanceInProgress.Code)
	g.members, g.static = map[string]*member{}, map[string]string{}
	g.pending, g.pendingSync = map[string]*pendingMember{}, map[string]struct{}{}
	g.leader, g.protocol, g.protocolType = "", "", "consumer"
	g.cg = cg
	g.startConsumerTimers()
	g.consumerStateChanged()
	return nil
}

// cgSubscribed is what g.subscribed computes, for a consumer group not installed yet.
func (g *group) cgSubscribed(cg *consumerGroup) map[string]TopicInfo {
	was := g.cg
	g.cg = cg
	defer func() { g.cg = was }()
	return g.subscribed(g.c.topicInfos())
}

// revertToClassic puts back the classic group m describes (the log's last Meta) after
// the write that would have made its upgrade durable failed. Called with g locked.
func (g *group) revertToClassic(m *Meta) {
	for _, cm := range g.cg.members {
		g.stopConsumerTimers(cm)
	}
	g.cg = nil
	g.installMeta(m)
	for _, mm := range g.members {
		g.scheduleHeartbeat(mm, mm.sessionTimeout)
	}
}

// canDowngradeWithout reports whether leaving (a KIP-848 member about to be removed)
// is the last member that does not use the classic protocol, with others left, and the
// policy allows the downgrade (Kafka's validateOnlineDowngradeWithFencedMember).
func (g *group) canDowngradeWithout(leaving *cMember) bool {
	if leaving.classic != nil || len(g.cg.members) <= 1 || !g.c.cfg.MigrationPolicy.downgrade() {
		return false
	}
	for _, m := range g.cg.members {
		if m != leaving && m.classic == nil {
			return false
		}
	}
	return true
}

// convertToClassic makes the consumer group g a classic group of its classic members,
// leaving out leaving, and starts a rebalance (Kafka's convertToClassicGroup and
// ClassicGroup.fromConsumerGroup). Each member's assignment is its target assignment,
// encoded in the version of its subscription's ConsumerProtocol. The caller makes the
// group durable (persistGroup writes its Meta). Called with g locked.
func (g *group) convertToClassic(leaving *cMember) {
	cg := g.cg
	for _, m := range cg.members {
		g.stopConsumerTimers(m)
	}
	ids := make([]string, 0, len(cg.members))
	for id := range cg.members {
		if id != leaving.id {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	g.cg = nil
	// The last classic Meta is older than the consumer records after it: until the new
	// Meta is durable a Full record (compaction) carries no membership rather than it.
	g.meta = nil
	g.members, g.static = map[string]*member{}, map[string]string{}
	g.pending, g.pendingSync = map[string]*pendingMember{}, map[string]struct{}{}
	g.leader, g.protocolType, g.generation = "", "consumer", cg.epoch
	for _, id := range ids {
		cm := cg.members[id]
		g.addMember(&member{
			id: cm.id, instanceID: cm.instanceID, clientID: cm.clientID, clientHost: cm.clientHost,
			protocolType: "consumer", protocols: cm.classic.protocols,
			sessionTimeout: cm.classic.sessionTimeout, rebalanceTimeout: cm.rebalanceTimeout,
		})
	}
	g.protocol = g.selectProtocol()
	for _, id := range ids {
		m := g.members[id]
		m.assignment = encodeAssignment(cg.target[id], m.metadataFor(g.protocol))
		g.scheduleHeartbeat(m, m.sessionTimeout)
	}
	g.transition(stateStable)
	g.prepareRebalance()
}
