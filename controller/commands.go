package controller

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/weir-io/weir/metadata"
)

// cmdType is the first byte of every Raft log entry; the rest is the command's JSON.
// Values are part of the on-disk format: never renumber, only add.
type cmdType byte

const (
	cmdInitCluster         cmdType = 1
	cmdRegisterBroker      cmdType = 2
	cmdFenceBroker         cmdType = 3
	cmdCreateTopic         cmdType = 4
	cmdDeleteTopic         cmdType = 5
	cmdCreatePartitions    cmdType = 6
	cmdAlterTopicConfigs   cmdType = 7
	cmdSetLogStartOffset   cmdType = 8
	cmdAllocateProducerIDs cmdType = 9
	cmdBeginMove           cmdType = 10
	cmdCompleteMove        cmdType = 11
	cmdCancelMove          cmdType = 12
	cmdPrepareObject       cmdType = 13
	cmdCommitObject        cmdType = 14
	cmdDeleteObjects       cmdType = 15
	cmdCompleteRecovery    cmdType = 16
	cmdDrainBroker         cmdType = 17

	cmdAlterScramCredentials cmdType = 18
	cmdCreateACLs            cmdType = 19
	cmdDeleteACLs            cmdType = 20
	cmdCompleteRecoveries    cmdType = 21
	cmdCompleteMoves         cmdType = 22
	cmdUndrainBroker         cmdType = 23
	cmdDecommissionBroker    cmdType = 24
	cmdReplaceRanges         cmdType = 25
)

// command is one replicated change. apply must be deterministic: it may read and change
// only the machine, never the clock, randomness or anything outside. It returns a value
// for the proposer, whether the state changed (which bumps Version), or an error that
// leaves the state untouched.
type command interface {
	kind() cmdType
	apply(m *machine) (value any, changed bool, err error)
}

var commandDecoders = map[cmdType]func() command{
	cmdInitCluster:         func() command { return &initClusterCmd{} },
	cmdRegisterBroker:      func() command { return &registerBrokerCmd{} },
	cmdFenceBroker:         func() command { return &fenceBrokerCmd{} },
	cmdCreateTopic:         func() command { return &createTopicCmd{} },
	cmdDeleteTopic:         func() command { return &deleteTopicCmd{} },
	cmdCreatePartitions:    func() command { return &createPartitionsCmd{} },
	cmdAlterTopicConfigs:   func() command { return &alterTopicConfigsCmd{} },
	cmdSetLogStartOffset:   func() command { return &setLogStartOffsetCmd{} },
	cmdAllocateProducerIDs: func() command { return &allocateProducerIDsCmd{} },
	cmdBeginMove:           func() command { return &beginMoveCmd{} },
	cmdCompleteMove:        func() command { return &completeMoveCmd{} },
	cmdCancelMove:          func() command { return &cancelMoveCmd{} },
	cmdPrepareObject:       func() command { return &prepareObjectCmd{} },
	cmdCommitObject:        func() command { return &commitObjectCmd{} },
	cmdDeleteObjects:       func() command { return &deleteObjectsCmd{} },
	cmdCompleteRecovery:    func() command { return &completeRecoveryCmd{} },
	cmdDrainBroker:         func() command { return &drainBrokerCmd{} },

	cmdAlterScramCredentials: func() command { return &alterScramCmd{} },
	cmdCreateACLs:            func() command { return &createACLsCmd{} },
	cmdDeleteACLs:            func() command { return &deleteACLsCmd{} },
	cmdCompleteRecoveries:    func() command { return &completeRecoveriesCmd{} },
	cmdCompleteMoves:         func() command { return &completeMovesCmd{} },
	cmdUndrainBroker:         func() command { return &undrainBrokerCmd{} },
	cmdDecommissionBroker:    func() command { return &decommissionBrokerCmd{} },
	cmdReplaceRanges:         func() command { return &replaceRangesCmd{} },
}

var errBadCommand = errors.New("controller: undecodable command")

func encodeCommand(c command) ([]byte, error) {
	body, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("controller: encode command %d: %w", c.kind(), err)
	}
	return append([]byte{byte(c.kind())}, body...), nil
}

func decodeCommand(data []byte) (command, error) {
	if len(data) < 1 {
		return nil, fmt.Errorf("%w: empty entry", errBadCommand)
	}
	mk, ok := commandDecoders[cmdType(data[0])]
	if !ok {
		return nil, fmt.Errorf("%w: unknown type %d", errBadCommand, data[0])
	}
	c := mk()
	if err := json.Unmarshal(data[1:], c); err != nil {
		return nil, fmt.Errorf("%w: type %d: %v", errBadCommand, data[0], err)
	}
	return c, nil
}

// machine is the state plus derived indexes; only the FSM's apply goroutine changes it.
type machine struct {
	st   State
	byID map[metadata.TopicID]string
	// refs lists, per object, the partitions whose manifests hold a range of it (in no
	// particular order; built from the topics, kept up to date by the commands).
	refs map[uint64][]metadata.PartitionRef
}

func newMachine(st State) *machine {
	if st.Brokers == nil {
		st.Brokers = map[int32]metadata.Broker{}
	}
	if st.Topics == nil {
		st.Topics = map[string]*metadata.Topic{}
	}
	m := &machine{st: st, byID: make(map[metadata.TopicID]string, len(st.Topics)), refs: map[uint64][]metadata.PartitionRef{}}
	for name, t := range st.Topics {
		m.byID[t.ID] = name
		m.addRefs(t)
	}
	return m
}

// addRefs indexes the manifests of t.
func (m *machine) addRefs(t *metadata.Topic) {
	for _, p := range t.Partitions {
		for _, r := range p.Objects {
			m.refs[r.Object] = append(m.refs[r.Object], metadata.PartitionRef{Topic: t.ID, Partition: p.Index})
		}
	}
}

// dropRefs removes the manifests of t from the index (t is being deleted).
func (m *machine) dropRefs(t *metadata.Topic) {
	for _, p := range t.Partitions {
		for _, r := range p.Objects {
			m.dropRef(r.Object, metadata.PartitionRef{Topic: t.ID, Partition: p.Index})
		}
	}
}

func (m *machine) dropRef(obj uint64, ref metadata.PartitionRef) {
	l := m.refs[obj]
	if i := slices.Index(l, ref); i >= 0 {
		l = slices.Delete(l, i, i+1)
	}
	if len(l) == 0 {
		delete(m.refs, obj)
	} else {
		m.refs[obj] = l
	}
}

func (m *machine) topicByID(id metadata.TopicID) *metadata.Topic {
	name, ok := m.byID[id]
	if !ok {
		return nil
	}
	return m.st.Topics[name]
}

func (m *machine) putTopic(t *metadata.Topic) {
	m.st.Topics[t.Name] = t
	m.byID[t.ID] = t.Name
}

// removeTopic deletes a topic; its partitions' object ranges go with it (the objects
// stay, unreferenced unless other partitions hold ranges of them: see
// metadata.View.GarbageObjects).
func (m *machine) removeTopic(t *metadata.Topic) {
	delete(m.st.Topics, t.Name)
	delete(m.byID, t.ID)
	m.dropRefs(t)
}

// topicClones gives a batch command one modifiable clone per topic (a failover of 300
// partitions of one topic of 1,000 would otherwise copy the topic 300 times) and puts
// back the ones it changed.
type topicClones struct {
	m       *machine
	clones  map[metadata.TopicID]*metadata.Topic
	changed map[metadata.TopicID]bool
}

func newTopicClones(m *machine) *topicClones {
	return &topicClones{m: m, clones: map[metadata.TopicID]*metadata.Topic{}, changed: map[metadata.TopicID]bool{}}
}

// partition is partitionForUpdate on the batch's clone of the topic.
func (tc *topicClones) partition(id metadata.TopicID, partition int32) (*metadata.Topic, *metadata.Partition, error) {
	t := tc.clones[id]
	if t == nil {
		orig := tc.m.topicByID(id)
		if orig == nil {
			return nil, nil, fmt.Errorf("%w: id %s", metadata.ErrUnknownTopic, id)
		}
		t = cloneTopic(orig)
		tc.clones[id] = t
	}
	if partition < 0 || int(partition) >= len(t.Partitions) {
		return nil, nil, fmt.Errorf("%w: partition %d of %q", metadata.ErrUnknownTopic, partition, t.Name)
	}
	return t, &t.Partitions[partition], nil
}

// changedTopic marks the clone of topic id changed.
func (tc *topicClones) changedTopic(id metadata.TopicID) { tc.changed[id] = true }

// put puts the changed clones in the state and reports whether there were any.
func (tc *topicClones) put() bool {
	for id := range tc.changed {
		tc.m.putTopic(tc.clones[id])
	}
	return len(tc.changed) > 0
}

// partition returns a modifiable clone of the topic and the index of the partition.
func (m *machine) partitionForUpdate(id metadata.TopicID, partition int32) (*metadata.Topic, *metadata.Partition, error) {
	t := m.topicByID(id)
	if t == nil {
		return nil, nil, fmt.Errorf("%w: id %s", metadata.ErrUnknownTopic, id)
	}
	if partition < 0 || int(partition) >= len(t.Partitions) {
		return nil, nil, fmt.Errorf("%w: partition %d of %q", metadata.ErrUnknownTopic, partition, t.Name)
	}
	c := cloneTopic(t)
	return c, &c.Partitions[partition], nil
}
