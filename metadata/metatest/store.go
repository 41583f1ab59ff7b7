// Package metatest is an in-memory cluster metadata store for tests: what the Raft
// controller gives a set of brokers (one shared metadata.View with change notification,
// broker registration, producer IDs, graceful partition moves, object manifests through
// Store.For), without Raft, HTTP or files. Several in-process brokers can share one
// Store, which is what a test needs to run brokers together (moves across WALs,
// cross-broker coordination) without starting a controller quorum. A single broker that wants real persistence uses
// metadata.LocalStore instead.
//
// It is not a model of the controller's rules: it decides what the controller would
// decide only as far as those tests need (see Store), and refuses the rest with
// ErrNotSupported rather than pretending.
package metatest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"

	"github.com/weir-io/weir/metadata"
)

// ErrNotSupported is returned by the metadata.Store operations Store does not implement.
var ErrNotSupported = errors.New("metatest: not supported")

// errValidateOnly ends a validate-only CreateTopic inside update, so nothing is published.
var errValidateOnly = errors.New("metatest: validate only")

// Store is a metadata.Store, metadata.Registrar and metadata.Recoverer shared by
// in-process brokers, with CompleteMove and CompleteMoveGen (what a leader calls to hand
// a partition over), and test helpers for what the controller decides: BeginMove and
// CancelMove (an admin moves a partition), Fence (a broker's lease ran out), Drain (a
// broker shuts down gracefully). Its rules:
//
//   - The brokers are fixed by NewStore, all active from the start, at 127.0.0.1:1 until
//     they register; the first one is reported as the controller. RegisterBroker
//     replaces a listed broker's record (address, rack) and keeps it active, in the
//     next registration epoch (the previous one + 1, as the controller counts; an epoch
//     given explicitly is kept); it ignores an ID NewStore did not list. A broker
//     started with For(id) learns its epoch from BrokerStore.Epoch, so it writes, and
//     its takers fence and seal, real epoch directories.
//   - CreateTopic gives the topic a random ID and places its partitions round-robin
//     over the brokers in NewStore's order (every topic starts at the first broker,
//     whatever their state); -1 partitions means 1. Each partition starts with a log
//     chain of its leader's WAL from offset 0, leader epoch 0, no move.
//   - BeginMove marks a partition as moving to a target, with a new MoveGen (the
//     version it publishes); CancelMove abandons it. CompleteMove makes the target the
//     leader from the given end offset (appended to the log chain), with the next
//     leader epoch; CompleteMoveGen does so only for the pending move of that MoveGen
//     (metadata.ErrMoveRefused otherwise). None checks who asks or whether the target
//     is active.
//   - Fence marks a broker fenced and fails its partitions over exactly as the
//     controller does (metadata.PlanFence: zone first, then fewest partitions led, then
//     lowest ID; Recovering with the next leader epoch and RecoverEpoch = the broker's
//     Epoch as registered); RegisterBroker makes the broker take over every
//     leaderless Recovering partition (metadata.PlanAdopt). CompleteRecovery applies
//     metadata.ApplyRecovery for the partition's current leader: the store does not
//     know who calls, so the leader epoch alone tells a current completion from a stale
//     one.
//   - Drain(id) (and BrokerStore.DrainBroker, what a broker calls on SIGTERM) marks an
//     active broker draining and begins moving its partitions away as the controller
//     does (metadata.PlanDrain: zone first, then fewest partitions, then lowest ID;
//     Recovering partitions stay; moves to it are cancelled). RegisterBroker makes it
//     active again. Nothing moves the partitions left behind later (the controller's
//     balancer does): a test calls Drain again.
//   - SetLogStartOffset is accepted and ignored: log start offsets stay 0, so a test's
//     views change only when it changes something itself.
//   - Object manifests (metadata.ObjectManifest) are kept by the controller's rules
//     (metadata.ObjectRules, producer snapshots included), through For(id): an object
//     is prepared for broker id in the registration epoch the View shows, and a
//     prepare or commit is refused unless that registration is still active. With log
//     starts at 0, only objects no manifest references can be deleted.
//   - DeleteTopic, CreatePartitions and AlterTopicConfigs return ErrNotSupported.
//   - AllocateProducerID counts from 1.
//
// Every change publishes a new View with the next version and closes the channel
// Changed returned; a View, once published, never changes. Safe for concurrent use.
type Store struct {
	mu           sync.Mutex
	view         *metadata.View
	changed      chan struct{}
	nextPID      int64
	nextObjectID uint64
}

var (
	_ metadata.Store          = (*Store)(nil)
	_ metadata.Registrar      = (*Store)(nil)
	_ metadata.Recoverer      = (*Store)(nil)
	_ metadata.BatchRecoverer = (*Store)(nil)
	_ metadata.BatchMover     = (*Store)(nil)
	_ metadata.MoveCompleter  = (*Store)(nil)
)

// NewStore returns a store at version 0 with the given brokers (their order is the
// placement order) and no topics. Without brokers no topic can be created
// (metadata.ErrNotController, as the controller answers) and the controller ID is -1.
func NewStore(brokers ...int32) *Store {
	bs := make([]metadata.Broker, 0, len(brokers))
	for _, id := range brokers {
		bs = append(bs, metadata.Broker{ID: id, Host: "127.0.0.1", Port: 1, State: metadata.BrokerActive})
	}
	controller := int32(-1)
	if len(brokers) > 0 {
		controller = brokers[0]
	}
	return &Store{view: metadata.NewView(0, "test", controller, bs, nil), changed: make(chan struct{})}
}

// View returns the current view.
func (s *Store) View() *metadata.View {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.view
}

// Changed returns a channel closed at the next change of View.
func (s *Store) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// update lets fn change a copy of the view and publishes it, unless fn fails. Brokers,
// topics, partitions and log chains are copied because fn changes them in place and
// published views are shared; object manifests, producer snapshots, the object table
// and configs are only ever replaced, never changed in place, so the copy shares them.
// The copy's TopicByID still finds the published topics: fn looks topics up in
// v.Topics (topicByID).
func (s *Store) update(fn func(v *metadata.View) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := *s.view
	v.Brokers = append([]metadata.Broker(nil), s.view.Brokers...)
	v.Topics = make(map[string]*metadata.Topic, len(s.view.Topics))
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
	s.view = metadata.NewViewWithObjects(v.Version+1, v.ClusterID, v.ControllerID, v.Brokers, v.Topics, v.Objects)
	s.view.SetTopicTombstones(v.TopicTombstones())
	close(s.changed)
	s.changed = make(chan struct{})
	return nil
}

// RegisterBroker records b, active, if NewStore listed its ID; b takes over every
// Recovering partition without a leader.
func (s *Store) RegisterBroker(_ context.Context, b metadata.Broker) error {
	return s.update(func(v *metadata.View) error {
		for i := range v.Brokers {
			if v.Brokers[i].ID == b.ID {
				b.State = metadata.BrokerActive
				if b.Epoch == 0 {
					b.Epoch = v.Brokers[i].Epoch + 1
				}
				v.Brokers[i] = b
				applyUpdates(v, metadata.PlanAdopt(v.Topics, b))
			}
		}
		return nil
	})
}

// Fence marks broker id fenced and fails the partitions it leads over to the active
// brokers, as the controller does when a lease runs out (see Store). A broker that is
// unknown or not active is refused (metadata.ErrFenced).
func (s *Store) Fence(id int32) error {
	return s.update(func(v *metadata.View) error {
		for i := range v.Brokers {
			b := v.Brokers[i]
			if b.ID != id {
				continue
			}
			if !b.Active() {
				return fmt.Errorf("%w: broker %d is not active", metadata.ErrFenced, id)
			}
			b.State = metadata.BrokerFenced
			v.Brokers[i] = b
			applyUpdates(v, metadata.PlanFence(v.Brokers, v.Topics, b))
			return nil
		}
		return fmt.Errorf("%w: no broker %d", metadata.ErrFenced, id)
	})
}

// Drain marks broker id draining and begins a graceful move of every partition it
// leads (metadata.PlanDrain), as the controller's DrainBroker does; draining again moves
// what was left behind. A broker that is unknown or not live (fenced) is refused
// (metadata.ErrFenced).
func (s *Store) Drain(id int32) error {
	return s.update(func(v *metadata.View) error {
		for i := range v.Brokers {
			b := v.Brokers[i]
			if b.ID != id {
				continue
			}
			if !b.Active() {
				return fmt.Errorf("%w: broker %d is not active", metadata.ErrFenced, id)
			}
			b.State = metadata.BrokerDraining
			v.Brokers[i] = b
			ups, _ := metadata.PlanDrain(v.Brokers, v.Topics, b, v.Version+1)
			applyUpdates(v, ups)
			return nil
		}
		return fmt.Errorf("%w: no broker %d", metadata.ErrFenced, id)
	})
}

// applyUpdates stores a plan's partitions in v (whose topics update copied).
func applyUpdates(v *metadata.View, ups []metadata.PartitionUpdate) {
	for _, u := range ups {
		v.Topics[u.Topic].Partitions[u.Partition.Index] = u.Partition
	}
}

// CreateTopic creates a topic placed round-robin; with validateOnly it returns the topic
// it would create and publishes nothing.
func (s *Store) CreateTopic(_ context.Context, spec metadata.TopicSpec, validateOnly bool) (*metadata.Topic, error) {
	var out *metadata.Topic
	err := s.update(func(v *metadata.View) error {
		if v.Topics[spec.Name] != nil {
			return fmt.Errorf("%w: %q", metadata.ErrTopicExists, spec.Name)
		}
		if len(v.Brokers) == 0 {
			return fmt.Errorf("%w: no brokers", metadata.ErrNotController)
		}
		n := spec.Partitions
		if n < 0 {
			n = 1
		}
		if n == 0 {
			return fmt.Errorf("%w: topic %q with 0 partitions", metadata.ErrInvalidPartitions, spec.Name)
		}
		t := &metadata.Topic{Name: spec.Name, Configs: map[string]string{}}
		for k, val := range spec.Configs {
			t.Configs[k] = val
		}
		if _, err := rand.Read(t.ID[:]); err != nil {
			return fmt.Errorf("metatest: topic ID: %w", err)
		}
		for i := int32(0); i < n; i++ {
			leader := v.Brokers[int(i)%len(v.Brokers)].ID
			t.Partitions = append(t.Partitions, metadata.Partition{Index: i, Leader: leader, Logs: []metadata.LogRange{{Broker: leader}}, MovingTo: -1})
		}
		out = t
		if validateOnly {
			return errValidateOnly
		}
		v.Topics[t.Name] = t
		return nil
	})
	if errors.Is(err, errValidateOnly) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteTopic is not supported.
func (s *Store) DeleteTopic(_ context.Context, name string) (*metadata.Topic, error) {
	return nil, fmt.Errorf("%w: DeleteTopic(%q)", ErrNotSupported, name)
}

// CreatePartitions is not supported.
func (s *Store) CreatePartitions(_ context.Context, name string, _ int32, _ bool) error {
	return fmt.Errorf("%w: CreatePartitions(%q)", ErrNotSupported, name)
}

// AlterTopicConfigs is not supported.
func (s *Store) AlterTopicConfigs(_ context.Context, name string, _ []metadata.ConfigOp, _ bool) error {
	return fmt.Errorf("%w: AlterTopicConfigs(%q)", ErrNotSupported, name)
}

// SetLogStartOffset accepts and ignores the new log start offset.
func (s *Store) SetLogStartOffset(context.Context, metadata.TopicID, int32, int64) error {
	return nil
}

// AllocateProducerID returns 1, 2, 3, ...
func (s *Store) AllocateProducerID(context.Context) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextPID++
	return s.nextPID, nil
}

// BeginMove starts a graceful move of a partition to target: its leader sees the
// partition moving and hands it over with CompleteMove.
func (s *Store) BeginMove(topic string, partition, target int32) error {
	return s.update(func(v *metadata.View) error {
		t := v.Topics[topic]
		if t == nil || partition < 0 || int(partition) >= len(t.Partitions) {
			return fmt.Errorf("%w: %s/%d", metadata.ErrUnknownTopic, topic, partition)
		}
		p := &t.Partitions[partition]
		p.Moving, p.MovingTo, p.MoveGen = true, target, v.Version+1
		return nil
	})
}

// CancelMove abandons a partition's pending move (none: nothing changes but the
// version).
func (s *Store) CancelMove(topic string, partition int32) error {
	return s.update(func(v *metadata.View) error {
		t := v.Topics[topic]
		if t == nil || partition < 0 || int(partition) >= len(t.Partitions) {
			return fmt.Errorf("%w: %s/%d", metadata.ErrUnknownTopic, topic, partition)
		}
		p := &t.Partitions[partition]
		p.Moving, p.MovingTo, p.MoveGen = false, -1, 0
		return nil
	})
}

// CompleteMove hands a moving partition to its target, which leads from endOffset on
// with the next leader epoch. A partition that is not moving is refused
// (metadata.ErrMoveRefused).
//
// Deprecated: use CompleteMoveGen, as with the controller.
func (s *Store) CompleteMove(ctx context.Context, id metadata.TopicID, partition int32, endOffset int64) error {
	return s.CompleteMoveGen(ctx, id, partition, endOffset, 0)
}

// CompleteMoveGen is CompleteMove for the pending move moveGen (its MoveGen); another
// move or none is refused (metadata.ErrMoveRefused). 0 completes any pending move.
func (s *Store) CompleteMoveGen(_ context.Context, id metadata.TopicID, partition int32, endOffset int64, moveGen uint64) error {
	return s.updatePartition(id, partition, func(t *metadata.Topic, p *metadata.Partition) error {
		if !p.Moving {
			return fmt.Errorf("%w: %s/%d is not moving", metadata.ErrMoveRefused, t.Name, partition)
		}
		if moveGen != 0 && moveGen != p.MoveGen {
			return fmt.Errorf("%w: %s/%d: move %d is not the pending one (%d)", metadata.ErrMoveRefused, t.Name, partition, moveGen, p.MoveGen)
		}
		p.Leader, p.LeaderEpoch, p.Moving = p.MovingTo, p.LeaderEpoch+1, false
		p.MovingTo, p.MoveGen = -1, 0
		p.Logs = append(p.Logs, metadata.LogRange{Broker: p.Leader, StartOffset: endOffset})
		return nil
	})
}

// CompleteRecovery implements metadata.Recoverer for the partition's current leader
// (metadata.ApplyRecovery): refused unless the partition is Recovering in leaderEpoch.
// A completion already applied (the same leader epoch and end offset) succeeds again,
// as the controller's client's retry does.
func (s *Store) CompleteRecovery(_ context.Context, id metadata.TopicID, partition int32, leaderEpoch int32, endOffset int64) error {
	return s.updatePartition(id, partition, func(t *metadata.Topic, p *metadata.Partition) error {
		if metadata.RecoveryDone(*p, p.Leader, leaderEpoch, endOffset) {
			return errUnchanged
		}
		np, err := metadata.ApplyRecovery(t.Name, *p, p.Leader, leaderEpoch, endOffset)
		if err != nil {
			return err
		}
		*p = np
		return nil
	})
}

// CompleteMovesGen implements metadata.BatchMover: each item as CompleteMoveGen.
func (s *Store) CompleteMovesGen(ctx context.Context, done []metadata.MoveDone) ([]error, error) {
	errs := make([]error, len(done))
	for i, d := range done {
		errs[i] = s.CompleteMoveGen(ctx, d.Topic, d.Partition, d.EndOffset, d.MoveGen)
	}
	return errs, nil
}

// CompleteRecoveries implements metadata.BatchRecoverer: each item as CompleteRecovery.
func (s *Store) CompleteRecoveries(ctx context.Context, done []metadata.Recovered) ([]error, error) {
	errs := make([]error, len(done))
	for i, d := range done {
		errs[i] = s.CompleteRecovery(ctx, d.Topic, d.Partition, d.LeaderEpoch, d.EndOffset)
	}
	return errs, nil
}

// errUnchanged ends an update that has nothing to change, so nothing is published.
var errUnchanged = errors.New("metatest: unchanged")

// updatePartition lets fn change partition of topic id in a copy of the view.
func (s *Store) updatePartition(id metadata.TopicID, partition int32, fn func(t *metadata.Topic, p *metadata.Partition) error) error {
	err := s.update(func(v *metadata.View) error {
		for _, t := range v.Topics {
			if t.ID != id {
				continue
			}
			if partition < 0 || int(partition) >= len(t.Partitions) {
				return fmt.Errorf("%w: partition %d of %q", metadata.ErrUnknownTopic, partition, t.Name)
			}
			return fn(t, &t.Partitions[partition])
		}
		return fmt.Errorf("%w: id %s", metadata.ErrUnknownTopic, id)
	})
	if errors.Is(err, errUnchanged) {
		return nil
	}
	return err
}

// topicByID finds a topic of v by ID in v.Topics (the copy update made).
func topicByID(v *metadata.View, id metadata.TopicID) *metadata.Topic {
	for _, t := range v.Topics {
		if t.ID == id {
			return t
		}
	}
	return nil
}

// BrokerStore is the Store as broker id uses it: every metadata.Store method of the
// shared Store, and object manifests on the broker's behalf (the controller knows the
// caller of a prepare or commit; a shared Store does not).
type BrokerStore struct {
	*Store
	id int32
}

var (
	_ metadata.ObjectManifest = (*BrokerStore)(nil)
	_ metadata.Drainer        = (*BrokerStore)(nil)
	_ metadata.Epocher        = (*BrokerStore)(nil)
)

// DrainBroker implements metadata.Drainer: Store.Drain of this broker.
func (b *BrokerStore) DrainBroker(context.Context) error { return b.Drain(b.id) }

// Draining implements metadata.Drainer: the View shows this broker draining.
func (b *BrokerStore) Draining() bool {
	br, ok := b.View().Broker(b.id)
	return ok && br.Draining()
}

// Epoch implements metadata.Epocher: broker id's registration epoch as the View shows
// it (what the controller client's Epoch says after RegisterBroker).
func (b *BrokerStore) Epoch() int64 {
	br, _ := b.View().Broker(b.id)
	return br.Epoch
}

// For returns the store broker id hands to its broker.New.
func (s *Store) For(id int32) *BrokerStore { return &BrokerStore{Store: s, id: id} }

// objectRules checks object commands against v (a copy update made).
func (s *Store) objectRules(v *metadata.View) *metadata.ObjectRules {
	return &metadata.ObjectRules{
		Objects:   v.Objects,
		NextID:    s.nextObjectID,
		TopicByID: func(id metadata.TopicID) *metadata.Topic { return topicByID(v, id) },
		Refs: func(id uint64) []metadata.PartitionRef {
			var refs []metadata.PartitionRef
			for _, t := range v.Topics {
				for _, p := range t.Partitions {
					for _, r := range p.Objects {
						if r.Object == id {
							refs = append(refs, metadata.PartitionRef{Topic: t.ID, Partition: p.Index})
							break
						}
					}
				}
			}
			return refs
		},
		Current: func(broker int32, epoch int64) error {
			if b, ok := v.Broker(broker); !ok || b.Epoch != epoch || !b.Active() {
				return fmt.Errorf("%w: %w: broker %d epoch %d is not current", metadata.ErrObjectRejected, metadata.ErrFenced, broker, epoch)
			}
			return nil
		},
	}
}

// PrepareObject implements metadata.ObjectManifest for the broker in its registration
// epoch as the View shows it.
func (b *BrokerStore) PrepareObject(context.Context) (metadata.Object, error) {
	var o metadata.Object
	err := b.update(func(v *metadata.View) error {
		reg, _ := v.Broker(b.id)
		var err error
		if o, err = b.objectRules(v).Prepare(b.id, reg.Epoch); err != nil {
			return err
		}
		b.nextObjectID = o.ID + 1
		v.Objects = metadata.WithObjects(v.Objects, func(objs map[uint64]metadata.Object) { objs[o.ID] = o })
		return nil
	})
	return o, err
}

// CommitObject implements metadata.ObjectManifest (metadata.ObjectRules.Commit) for the
// broker in its registration epoch as the View shows it.
func (b *BrokerStore) CommitObject(_ context.Context, id uint64, size int64, ranges []metadata.PartitionRange) error {
	return b.update(func(v *metadata.View) error {
		reg, _ := v.Broker(b.id)
		o, changes, err := b.objectRules(v).Commit(id, b.id, reg.Epoch, size, ranges)
		if err != nil {
			return err
		}
		for _, ch := range changes {
			t := topicByID(v, ch.Topic)
			ch.ApplyTo(&t.Partitions[ch.Partition])
		}
		v.Objects = metadata.WithObjects(v.Objects, func(objs map[uint64]metadata.Object) { objs[id] = o })
		return nil
	})
}

// DeleteObjects implements metadata.ObjectManifest (metadata.ObjectRules.Delete); IDs
// deleted before are ignored.
func (b *BrokerStore) DeleteObjects(_ context.Context, ids []uint64) error {
	err := b.update(func(v *metadata.View) error {
		drop, changes, err := b.objectRules(v).Delete(ids)
		if err != nil {
			return err
		}
		if len(drop) == 0 {
			return errUnchanged
		}
		for _, ch := range changes {
			t := topicByID(v, ch.Topic)
			ch.ApplyTo(&t.Partitions[ch.Partition])
		}
		v.Objects = metadata.WithObjects(v.Objects, func(objs map[uint64]metadata.Object) {
			for _, id := range drop {
				delete(objs, id)
			}
		})
		return nil
	})
	if errors.Is(err, errUnchanged) {
		return nil
	}
	return err
}

// ReplaceRanges implements metadata.ObjectCompactor (metadata.ObjectRules.Replace) for
// the broker in its registration epoch as the View shows it.
func (b *BrokerStore) ReplaceRanges(_ context.Context, id uint64, size int64, rr metadata.RangeReplace) error {
	return b.update(func(v *metadata.View) error {
		reg, _ := v.Broker(b.id)
		o, ch, err := b.objectRules(v).Replace(id, b.id, reg.Epoch, size, rr)
		if err != nil {
			return err
		}
		t := topicByID(v, ch.Topic)
		ch.ApplyTo(&t.Partitions[ch.Partition])
		v.Objects = metadata.WithObjects(v.Objects, func(objs map[uint64]metadata.Object) { objs[id] = o })
		return nil
	})
}
