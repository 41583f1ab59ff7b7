package group

// consumer_record.go is the durable form of a consumer group (KIP-848): Record.Consumer,
// the group's whole consumer state, which replaces what earlier records said of its
// membership (a Meta, an earlier Consumer). In the binary record (recordbin.go) it is the
// section after the ends, present with flag 32:
//
//	consumer := byte(version = 1 | 2) varint(group epoch) varint(assignment epoch)
//	            str(subscription fingerprint) varint(time, unix ms) uvarint(n) cmember*n
//	cmember  := str(id) optstr(instance_id) optstr(rack) str(client_id) str(client_host)
//	            varint(epoch) varint(previous epoch) byte(state) uvarint(rebalance ms)
//	            uvarint(n) str(topic)*n str(regex) str(assignor)
//	            parts(assigned) parts(revoking) parts(target) [classic]
//	classic  := byte(0: a KIP-848 member | 1: a classic member) [uvarint(session ms)
//	            uvarint(n) (str(protocol name) bytes(protocol metadata))*n]   (version 2)
//	parts    := uvarint(n) (str(topic) uvarint(m) varint(partition)*m)*n
//
// Version 2 adds each member's classic section (a mixed group: classic members kept by
// an online upgrade or joined with JoinGroup, consumer_classic.go). It is written only
// when some member is classic, so a group of KIP-848 members is written as version 1,
// byte for byte what brokers before it wrote and read. A reader that does not know flag
// 32 refuses the record (unknown flags); a version other than 1 and 2 is refused too,
// never half read (a broker that reads only version 1 refuses a mixed group's record).

import (
	"bytes"
	"fmt"
	"sort"
	"time"
)

const flagConsumer = 32

// consumerVersion is the version written for a group with classic members; one of
// KIP-848 members only is written as consumerVersionPlain.
const (
	consumerVersionPlain = 1
	consumerVersion      = 2
)

// ConsumerMeta is a consumer group's state (consumer.go).
type ConsumerMeta struct {
	Epoch           int32                `json:"epoch"`
	AssignmentEpoch int32                `json:"assignment_epoch"`
	SubMeta         string               `json:"sub_meta,omitempty"`
	Time            time.Time            `json:"time"`
	Members         []ConsumerMemberMeta `json:"members,omitempty"`
}

// ConsumerMemberMeta is one member of a ConsumerMeta.
type ConsumerMemberMeta struct {
	ID               string        `json:"id"`
	InstanceID       *string       `json:"instance_id,omitempty"`
	Rack             *string       `json:"rack,omitempty"`
	ClientID         string        `json:"client_id,omitempty"`
	ClientHost       string        `json:"client_host,omitempty"`
	Epoch            int32         `json:"epoch"`
	PrevEpoch        int32         `json:"prev_epoch"`
	State            int8          `json:"state"`
	RebalanceTimeout time.Duration `json:"rebalance_timeout"`
	Topics           []string      `json:"topics,omitempty"`
	Regex            string        `json:"regex,omitempty"`
	Assignor         string        `json:"assignor,omitempty"`
	Assigned         []TopicParts  `json:"assigned,omitempty"`
	Revoking         []TopicParts  `json:"revoking,omitempty"`
	Target           []TopicParts  `json:"target,omitempty"`
	// Classic is set for a member that uses the classic protocol (version 2).
	Classic *ClassicMemberMeta `json:"classic,omitempty"`
}

// ClassicMemberMeta is what a classic member of a consumer group keeps besides: its
// session timeout and the protocols (name, ConsumerProtocol subscription) of its last
// JoinGroup.
type ClassicMemberMeta struct {
	SessionTimeout time.Duration  `json:"session_timeout"`
	Protocols      []ProtocolMeta `json:"protocols,omitempty"`
}

// TopicParts is a topic's partitions in a ConsumerMemberMeta.
type TopicParts struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

func toTopicParts(ps parts) []TopicParts {
	var out []TopicParts
	for _, t := range sortedKeys(ps) {
		if len(ps[t]) > 0 {
			out = append(out, TopicParts{t, append([]int32(nil), ps[t]...)})
		}
	}
	return out
}

func fromTopicParts(tp []TopicParts) parts {
	out := parts{}
	for _, x := range tp {
		out[x.Topic] = append([]int32(nil), x.Partitions...)
	}
	return out
}

// consumerMeta is the group's consumer state now. Called with g locked.
func (g *group) consumerMeta() *ConsumerMeta {
	cg := g.cg
	cm := &ConsumerMeta{Epoch: cg.epoch, AssignmentEpoch: cg.assignEpoch, SubMeta: cg.subMeta, Time: g.emptySince}
	ids := make([]string, 0, len(cg.members))
	for id := range cg.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		m := cg.members[id]
		cm.Members = append(cm.Members, ConsumerMemberMeta{
			ID: m.id, InstanceID: m.instanceID, Rack: m.rack, ClientID: m.clientID, ClientHost: m.clientHost,
			Epoch: m.epoch, PrevEpoch: m.prevEpoch, State: int8(m.state), RebalanceTimeout: m.rebalanceTimeout,
			Topics: m.topics, Regex: m.regex, Assignor: m.assignor,
			Assigned: toTopicParts(m.assigned), Revoking: toTopicParts(m.revoking), Target: toTopicParts(cg.target[id]),
			Classic: classicMetaOf(m.classic),
		})
	}
	return cm
}

func classicMetaOf(ci *classicInfo) *ClassicMemberMeta {
	if ci == nil {
		return nil
	}
	cm := &ClassicMemberMeta{SessionTimeout: ci.sessionTimeout}
	for _, p := range ci.protocols {
		cm.Protocols = append(cm.Protocols, ProtocolMeta{Name: p.name, Metadata: p.metadata})
	}
	return cm
}

func classicFrom(cm *ClassicMemberMeta) *classicInfo {
	if cm == nil {
		return nil
	}
	ci := &classicInfo{sessionTimeout: cm.SessionTimeout}
	for _, p := range cm.Protocols {
		ci.protocols = append(ci.protocols, protocol{name: p.Name, metadata: p.Metadata})
	}
	return ci
}

func consumerMetaEqual(a, b *ConsumerMeta) bool {
	var wa, wb binWriter
	encodeConsumer(&wa, a)
	encodeConsumer(&wb, b)
	return bytes.Equal(wa.b, wb.b)
}

// consumerFrom builds a consumer group's state from its record (members without timers).
func consumerFrom(cm *ConsumerMeta) *consumerGroup {
	cg := newConsumerGroup()
	cg.epoch, cg.assignEpoch, cg.subMeta, cg.durable = cm.Epoch, cm.AssignmentEpoch, cm.SubMeta, cm
	for _, mm := range cm.Members {
		m := &cMember{
			id: mm.ID, instanceID: mm.InstanceID, rack: mm.Rack, clientID: mm.ClientID, clientHost: mm.ClientHost,
			epoch: mm.Epoch, prevEpoch: mm.PrevEpoch, state: cState(mm.State), rebalanceTimeout: mm.RebalanceTimeout,
			topics: mm.Topics, regex: mm.Regex, assignor: mm.Assignor,
			assigned: fromTopicParts(mm.Assigned), revoking: fromTopicParts(mm.Revoking),
			classic: classicFrom(mm.Classic),
		}
		cg.members[m.id] = m
		cg.target[m.id] = fromTopicParts(mm.Target)
		if m.instanceID != nil {
			cg.static[*m.instanceID] = m.id
		}
	}
	return cg
}

// restoreConsumer puts the consumer state of cm back (a failed write), timers included.
func (g *group) restoreConsumer(cm *ConsumerMeta) {
	for _, m := range g.cg.members {
		g.stopConsumerTimers(m)
	}
	if cm == nil {
		g.cg = newConsumerGroup()
	} else {
		g.cg = consumerFrom(cm)
	}
	g.startConsumerTimers()
	g.consumerStateChanged()
}

// startConsumerTimers starts every member's session (and, if revoking, rebalance) timer:
// after a load each member must heartbeat within its session timeout from now.
func (g *group) startConsumerTimers() {
	for _, m := range g.cg.members {
		g.scheduleConsumerSession(m)
		g.scheduleConsumerRebalance(m)
	}
}

func encodeConsumer(w *binWriter, cm *ConsumerMeta) {
	version := byte(consumerVersionPlain)
	for _, m := range cm.Members {
		if m.Classic != nil {
			version = consumerVersion
		}
	}
	w.byte1(version)
	w.varint(int64(cm.Epoch))
	w.varint(int64(cm.AssignmentEpoch))
	w.str(cm.SubMeta)
	w.varint(unixMs(cm.Time))
	w.uvarint(uint64(len(cm.Members)))
	opt := func(s *string) {
		if s == nil {
			w.byte1(0)
			return
		}
		w.byte1(1)
		w.str(*s)
	}
	ps := func(tp []TopicParts) {
		w.uvarint(uint64(len(tp)))
		for _, x := range tp {
			w.str(x.Topic)
			w.uvarint(uint64(len(x.Partitions)))
			for _, p := range x.Partitions {
				w.varint(int64(p))
			}
		}
	}
	for _, m := range cm.Members {
		w.str(m.ID)
		opt(m.InstanceID)
		opt(m.Rack)
		w.str(m.ClientID)
		w.str(m.ClientHost)
		w.varint(int64(m.Epoch))
		w.varint(int64(m.PrevEpoch))
		w.byte1(byte(m.State))
		w.uvarint(uint64(m.RebalanceTimeout / time.Millisecond))
		w.uvarint(uint64(len(m.Topics)))
		for _, t := range m.Topics {
			w.str(t)
		}
		w.str(m.Regex)
		w.str(m.Assignor)
		ps(m.Assigned)
		ps(m.Revoking)
		ps(m.Target)
		if version < consumerVersion {
			continue
		}
		if m.Classic == nil {
			w.byte1(0)
			continue
		}
		w.byte1(1)
		w.uvarint(uint64(max(m.Classic.SessionTimeout.Milliseconds(), 0)))
		w.uvarint(uint64(len(m.Classic.Protocols)))
		for _, p := range m.Classic.Protocols {
			w.str(p.Name)
			w.bytes(p.Metadata)
		}
	}
}

func decodeConsumer(r *binReader) *ConsumerMeta {
	version := r.byte1()
	if r.err == nil && version != consumerVersionPlain && version != consumerVersion {
		r.fail(fmt.Errorf("consumer group record version %d (this broker reads %d and %d)", version, consumerVersionPlain, consumerVersion))
		return nil
	}
	cm := &ConsumerMeta{Epoch: r.int32v(), AssignmentEpoch: r.int32v(), SubMeta: r.str(), Time: fromMs(r.varint())}
	opt := func() *string {
		if r.byte1() == 0 {
			return nil
		}
		s := r.str()
		return &s
	}
	ps := func() []TopicParts {
		n := r.count(2)
		var out []TopicParts
		for i := 0; i < n && r.err == nil; i++ {
			x := TopicParts{Topic: r.str()}
			np := r.count(1)
			x.Partitions = make([]int32, 0, np)
			for j := 0; j < np && r.err == nil; j++ {
				x.Partitions = append(x.Partitions, r.int32v())
			}
			out = append(out, x)
		}
		return out
	}
	n := r.count(16)
	for i := 0; i < n && r.err == nil; i++ {
		m := ConsumerMemberMeta{ID: r.str(), InstanceID: opt(), Rack: opt(), ClientID: r.str(), ClientHost: r.str()}
		m.Epoch, m.PrevEpoch = r.int32v(), r.int32v()
		st := r.byte1()
		if st > byte(cUnreleased) {
			r.fail(fmt.Errorf("bad member state %d", st))
		}
		m.State = int8(st)
		m.RebalanceTimeout = ms2d(r.uvarint())
		nt := r.count(1)
		for j := 0; j < nt && r.err == nil; j++ {
			m.Topics = append(m.Topics, r.str())
		}
		m.Regex, m.Assignor = r.str(), r.str()
		m.Assigned, m.Revoking, m.Target = ps(), ps(), ps()
		if version >= consumerVersion && r.bool1("classic") {
			m.Classic = &ClassicMemberMeta{SessionTimeout: ms2d(r.uvarint())}
			np := r.count(2)
			for j := 0; j < np && r.err == nil; j++ {
				m.Classic.Protocols = append(m.Classic.Protocols, ProtocolMeta{Name: r.str(), Metadata: r.bytes()})
			}
		}
		cm.Members = append(cm.Members, m)
	}
	return cm
}
