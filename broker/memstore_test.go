package broker

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"

	"github.com/weir-io/weir/metadata"
)

// memStore is a test-only cluster metadata store shared by several in-process brokers:
// what the Raft controller provides, minus Raft. Leaders are assigned round-robin.
type memStore struct {
	mu      sync.Mutex
	view    *metadata.View
	changed chan struct{}
	nextPID int64
}

func newMemStore(brokers ...int32) *memStore {
	var bs []metadata.Broker
	for _, id := range brokers {
		bs = append(bs, metadata.Broker{ID: id, Host: "127.0.0.1", Port: 1, State: metadata.BrokerActive})
	}
	return &memStore{view: metadata.NewView(0, "test", brokers[0], bs, nil), changed: make(chan struct{})}
}

func (s *memStore) View() *metadata.View {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.view
}

func (s *memStore) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// update copies the view, lets fn change the copy, and publishes it.
func (s *memStore) update(fn func(v *metadata.View) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := *s.view
	v.Brokers = append([]metadata.Broker(nil), s.view.Brokers...)
	v.Topics = map[string]*metadata.Topic{}
	for k, t := range s.view.Topics {
		c := *t
		c.Partitions = make([]metadata.Partition, len(t.Partitions))
		for i, p := range t.Partitions {
			p.Logs = append([]metadata.LogRange(nil), p.Logs...)
			c.Partitions[i] = p
		}
		v.Topics[k] = &c
	}
	if err := fn(&v); err != nil {
		return err
	}
	s.view = metadata.NewView(v.Version+1, v.ClusterID, v.ControllerID, v.Brokers, v.Topics)
	close(s.changed)
	s.changed = make(chan struct{})
	return nil
}

func (s *memStore) RegisterBroker(_ context.Context, b metadata.Broker) error {
	return s.update(func(v *metadata.View) error {
		for i := range v.Brokers {
			if v.Brokers[i].ID == b.ID {
				b.State = metadata.BrokerActive
				v.Brokers[i] = b
			}
		}
		return nil
	})
}

func (s *memStore) CreateTopic(_ context.Context, spec metadata.TopicSpec, validateOnly bool) (*metadata.Topic, error) {
	var out *metadata.Topic
	err := s.update(func(v *metadata.View) error {
		if v.Topics[spec.Name] != nil {
			return metadata.ErrTopicExists
		}
		n := spec.Partitions
		if n < 0 {
			n = 1
		}
		t := &metadata.Topic{Name: spec.Name, Configs: spec.Configs}
		rand.Read(t.ID[:])
		for i := int32(0); i < n; i++ {
			leader := v.Brokers[int(i)%len(v.Brokers)].ID
			t.Partitions = append(t.Partitions, metadata.Partition{Index: i, Leader: leader, Logs: []metadata.LogRange{{Broker: leader}}})
		}
		if validateOnly {
			return fmt.Errorf("validate only")
		}
		v.Topics[t.Name] = t
		out = t
		return nil
	})
	return out, err
}

func (s *memStore) DeleteTopic(context.Context, string) (*metadata.Topic, error) {
	return nil, fmt.Errorf("not in memStore")
}
func (s *memStore) CreatePartitions(context.Context, string, int32, bool) error {
	return fmt.Errorf("not in memStore")
}
func (s *memStore) AlterTopicConfigs(context.Context, string, []metadata.ConfigOp, bool) error {
	return fmt.Errorf("not in memStore")
}
func (s *memStore) SetLogStartOffset(context.Context, metadata.TopicID, int32, int64) error {
	return nil
}
func (s *memStore) AllocateProducerID(context.Context) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextPID++
	return s.nextPID, nil
}

// beginMove starts a graceful move of topic/partition to target.
func (s *memStore) beginMove(topic string, partition, target int32) error {
	return s.update(func(v *metadata.View) error {
		p := &v.Topics[topic].Partitions[partition]
		p.Moving, p.MovingTo = true, target
		return nil
	})
}

func (s *memStore) CompleteMove(_ context.Context, id metadata.TopicID, partition int32, end int64) error {
	return s.update(func(v *metadata.View) error {
		for _, t := range v.Topics {
			if t.ID != id {
				continue
			}
			p := &t.Partitions[partition]
			if !p.Moving {
				return fmt.Errorf("not moving")
			}
			p.Leader, p.LeaderEpoch, p.Moving = p.MovingTo, p.LeaderEpoch+1, false
			p.Logs = append(p.Logs, metadata.LogRange{Broker: p.Leader, StartOffset: end})
			return nil
		}
		return metadata.ErrUnknownTopic
	})
}
