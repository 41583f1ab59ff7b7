package metadata

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/weir-io/weir/security/acl"
)

// LocalConfig configures a LocalStore.
type LocalConfig struct {
	// Path of the state file; written atomically (temp file, fsync, rename, dir fsync).
	Path string
	// Self is the only broker; it leads every partition.
	Self Broker
	// DefaultPartitions is used when CreateTopics asks for -1 partitions.
	DefaultPartitions int32
	// MaxPartitions bounds one request so a typo cannot allocate millions of partitions.
	MaxPartitions int32
}

// LocalStore is the single-node metadata store: the whole state in one JSON file,
// rewritten on every change. Changes are rare (topic admin, one commit per object
// upload), so simplicity wins here; the Raft controller replaces it in a cluster.
//
// It keeps the object manifests (ObjectManifest) with the controller's rules
// (ObjectRules). There are no registrations: the only broker (LocalConfig.Self) is
// always current, prepares under its ID and epoch localEpoch, and the View shows it with
// that epoch, so its prepared objects are never GarbageObjects (not even those a
// previous process left behind: the broker collects its own unused prepared objects).
type LocalStore struct {
	cfg LocalConfig

	mu      sync.Mutex
	state   localState
	view    *View
	changed chan struct{}
}

// LocalFormatVersion is the version of the state file's format, written as
// "format_version". Files written before the field existed have none (0 here) and are
// version 1: adding it changed nothing else. A change that an older build would misread
// bumps it, so that the older build refuses the file (ErrFormatVersion) instead of
// running on a wrong state and rewriting the file without the fields it does not know.
const LocalFormatVersion = 1

// ErrFormatVersion: the state file is of a format version this build does not read,
// written by a newer build.
var ErrFormatVersion = errors.New("metadata: unsupported metadata file format version")

type localState struct {
	FormatVersion  uint32            `json:"format_version"`
	ClusterID      string            `json:"cluster_id"`
	Version        uint64            `json:"version"`
	NextProducerID int64             `json:"next_producer_id"`
	Topics         map[string]*Topic `json:"topics"`
	// NextObjectID is the next object ID to hand out (0 before the first: IDs start at 1).
	NextObjectID uint64 `json:"next_object_id,omitempty"`
	// Objects holds the prepared and committed objects by ID. Copy-on-write (a change
	// stores a new map), so Views and rollback copies share it.
	Objects map[uint64]Object `json:"objects,omitempty"`
	// Scram holds the SCRAM credentials (local_scram.go); copy-on-write like Objects.
	Scram ScramUsers `json:"scram,omitempty"`
	// ACLs are the ACL bindings (local_acls.go), sorted; copy-on-write.
	ACLs []acl.Binding `json:"acls,omitempty"`
	// TopicTombstones are the IDs of deleted topics (View.TopicDeleted); copy-on-write.
	TopicTombstones []TopicID `json:"topic_tombstones,omitempty"`
}

// localEpoch is the registration epoch of LocalStore's only broker.
const localEpoch = 1

var (
	_ Store          = (*LocalStore)(nil)
	_ Registrar      = (*LocalStore)(nil)
	_ ObjectManifest = (*LocalStore)(nil)
)

// OpenLocal loads the state file, creating a new cluster if it does not exist.
func OpenLocal(cfg LocalConfig) (*LocalStore, error) {
	if cfg.DefaultPartitions <= 0 {
		cfg.DefaultPartitions = 1
	}
	if cfg.MaxPartitions <= 0 {
		cfg.MaxPartitions = 100000
	}
	s := &LocalStore{cfg: cfg, changed: make(chan struct{})}
	b, err := os.ReadFile(cfg.Path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		s.state = localState{FormatVersion: LocalFormatVersion, ClusterID: newClusterID(), Topics: map[string]*Topic{}}
		if err := os.MkdirAll(filepath.Dir(cfg.Path), 0o700); err != nil {
			return nil, fmt.Errorf("metadata: %w", err)
		}
		if err := s.persist(); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, fmt.Errorf("metadata: read %s: %w", cfg.Path, err)
	default:
		err := json.Unmarshal(b, &s.state)
		// Checked before err: a newer format may well not parse, and its version is the
		// reason to report. Unmarshal fills the fields it can despite type errors.
		if v := s.state.FormatVersion; v != 0 && v != LocalFormatVersion {
			return nil, fmt.Errorf("%w %d in %s (this build reads %d)", ErrFormatVersion, v, cfg.Path, LocalFormatVersion)
		}
		if err != nil {
			return nil, fmt.Errorf("metadata: parse %s: %w", cfg.Path, err)
		}
		// The next write records the version in a file written before it existed.
		s.state.FormatVersion = LocalFormatVersion
		if s.state.Topics == nil {
			s.state.Topics = map[string]*Topic{}
		}
	}
	s.publish()
	return s, nil
}

func newClusterID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return strings.TrimRight(base64.URLEncoding.EncodeToString(b[:]), "=")
}

// View implements Store.
func (s *LocalStore) View() *View {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.view
}

// Changed implements Store.
func (s *LocalStore) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// publish builds a fresh immutable View from state; callers hold mu (or are the constructor).
func (s *LocalStore) publish() {
	topics := make(map[string]*Topic, len(s.state.Topics))
	for name, t := range s.state.Topics {
		topics[name] = cloneTopic(t)
	}
	self := s.cfg.Self
	self.Epoch = localEpoch
	s.view = NewViewWithObjects(s.state.Version, s.state.ClusterID, self.ID, []Broker{self}, topics, s.state.Objects)
	s.view.Scram = s.state.Scram
	s.view.ACLs = acl.NewSet(s.state.ACLs)
	s.view.SetTopicTombstones(s.state.TopicTombstones)
	close(s.changed)
	s.changed = make(chan struct{})
}

func cloneTopic(t *Topic) *Topic {
	c := *t
	c.Partitions = append([]Partition(nil), t.Partitions...)
	c.Configs = make(map[string]string, len(t.Configs))
	for k, v := range t.Configs {
		c.Configs[k] = v
	}
	return &c
}

// commit persists the state and publishes it; on a write error the in-memory state is
// rolled back to prev so memory never runs ahead of disk.
func (s *LocalStore) commit(prev localState) error {
	s.state.Version++
	if err := s.persist(); err != nil {
		s.state = prev
		return err
	}
	s.publish()
	return nil
}

func (s *LocalStore) snapshotState() localState {
	prev := s.state
	prev.Topics = make(map[string]*Topic, len(s.state.Topics))
	for k, t := range s.state.Topics {
		prev.Topics[k] = cloneTopic(t)
	}
	return prev
}

func (s *LocalStore) persist() error {
	b, err := json.MarshalIndent(&s.state, "", " ")
	if err != nil {
		return fmt.Errorf("metadata: encode: %w", err)
	}
	return WriteFileAtomic(s.cfg.Path, b)
}

// WriteFileAtomic replaces path with data so that a crash leaves either the old or the new
// contents: write a temp file, fsync it, rename over path, fsync the directory. The file is
// readable by its owner only: it holds SCRAM keys and ACLs.
func WriteFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	if err := f.Chmod(0o600); err != nil { // a temp file left by a crash keeps its old mode
		f.Close()
		return fmt.Errorf("metadata: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("metadata: write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("metadata: sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("metadata: sync dir: %w", err)
	}
	return nil
}

// CreateTopic implements Store.
func (s *LocalStore) CreateTopic(_ context.Context, spec TopicSpec, validateOnly bool) (*Topic, error) {
	if err := ValidTopicName(spec.Name); err != nil {
		return nil, err
	}
	n := spec.Partitions
	if n == -1 {
		n = s.cfg.DefaultPartitions
	}
	if n <= 0 || n > s.cfg.MaxPartitions {
		return nil, fmt.Errorf("%w: %d (must be 1..%d)", ErrInvalidPartitions, n, s.cfg.MaxPartitions)
	}
	if spec.ReplicationFactor == 0 || spec.ReplicationFactor < -1 {
		return nil, fmt.Errorf("%w: %d", ErrInvalidReplication, spec.ReplicationFactor)
	}
	for k, v := range spec.Configs {
		if err := ValidateTopicConfig(k, v); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.state.Topics[spec.Name]; ok {
		return nil, fmt.Errorf("%w: %q", ErrTopicExists, spec.Name)
	}
	t := &Topic{Name: spec.Name, ID: NewTopicID(), Configs: map[string]string{}}
	for k, v := range spec.Configs {
		t.Configs[k] = v
	}
	for i := int32(0); i < n; i++ {
		t.Partitions = append(t.Partitions, Partition{Index: i, Leader: s.cfg.Self.ID})
	}
	if validateOnly {
		return t, nil
	}
	prev := s.snapshotState()
	s.state.Topics[t.Name] = t
	if err := s.commit(prev); err != nil {
		return nil, err
	}
	return cloneTopic(t), nil
}

// DeleteTopic implements Store.
func (s *LocalStore) DeleteTopic(_ context.Context, name string) (*Topic, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.state.Topics[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTopic, name)
	}
	prev := s.snapshotState()
	delete(s.state.Topics, name)
	s.state.TopicTombstones = append(slices.Clip(s.state.TopicTombstones), t.ID)
	if err := s.commit(prev); err != nil {
		return nil, err
	}
	return t, nil
}

// CreatePartitions implements Store.
func (s *LocalStore) CreatePartitions(_ context.Context, name string, total int32, validateOnly bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.state.Topics[name]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownTopic, name)
	}
	have := int32(len(t.Partitions))
	if total <= have {
		return fmt.Errorf("%w: topic %q has %d partitions, asked for %d (can only grow)", ErrInvalidPartitions, name, have, total)
	}
	if total > s.cfg.MaxPartitions {
		return fmt.Errorf("%w: %d exceeds the limit %d", ErrInvalidPartitions, total, s.cfg.MaxPartitions)
	}
	if validateOnly {
		return nil
	}
	prev := s.snapshotState()
	for i := have; i < total; i++ {
		t.Partitions = append(t.Partitions, Partition{Index: i, Leader: s.cfg.Self.ID})
	}
	return s.commit(prev)
}

// AlterTopicConfigs implements Store.
func (s *LocalStore) AlterTopicConfigs(_ context.Context, name string, ops []ConfigOp, validateOnly bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.state.Topics[name]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownTopic, name)
	}
	next, err := ApplyConfigOps(t.Configs, ops)
	if err != nil {
		return err
	}
	if validateOnly {
		return nil
	}
	prev := s.snapshotState()
	t.Configs = next
	return s.commit(prev)
}

// ApplyConfigOps returns configs with ops applied, validating every resulting value.
// Append and subtract treat values as comma-separated lists, as Kafka does.
func ApplyConfigOps(configs map[string]string, ops []ConfigOp) (map[string]string, error) {
	next := make(map[string]string, len(configs))
	for k, v := range configs {
		next[k] = v
	}
	for _, op := range ops {
		def, known := TopicConfigs[op.Key]
		if !known {
			return nil, fmt.Errorf("%w: unknown topic config %q", ErrInvalidConfig, op.Key)
		}
		switch op.Op {
		case OpSet:
			next[op.Key] = op.Value
		case OpDelete:
			delete(next, op.Key)
		case OpAppend, OpSubtract:
			cur, ok := next[op.Key]
			if !ok {
				cur = def.Default
			}
			list := splitList(cur)
			if op.Op == OpAppend {
				for _, v := range splitList(op.Value) {
					if !contains(list, v) {
						list = append(list, v)
					}
				}
			} else {
				var keep []string
				rm := splitList(op.Value)
				for _, v := range list {
					if !contains(rm, v) {
						keep = append(keep, v)
					}
				}
				list = keep
			}
			next[op.Key] = strings.Join(list, ",")
		default:
			return nil, fmt.Errorf("%w: unknown op %d for %q", ErrInvalidConfig, op.Op, op.Key)
		}
		if v, ok := next[op.Key]; ok {
			if err := ValidateTopicConfig(op.Key, v); err != nil {
				return nil, err
			}
		}
	}
	return next, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// SetLogStartOffset implements Store. The offset only moves forward; the manifest's
// front ranges wholly below it are dropped (TrimManifest).
func (s *LocalStore) SetLogStartOffset(_ context.Context, id TopicID, partition int32, offset int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.state.Topics {
		if t.ID != id {
			continue
		}
		if partition < 0 || int(partition) >= len(t.Partitions) {
			return fmt.Errorf("%w: partition %d of %q", ErrUnknownTopic, partition, t.Name)
		}
		if offset <= t.Partitions[partition].LogStartOffset {
			return nil
		}
		prev := s.snapshotState()
		p := &t.Partitions[partition]
		p.LogStartOffset = offset
		p.Objects, _ = TrimManifest(p.Objects, offset)
		return s.commit(prev)
	}
	return fmt.Errorf("%w: id %s", ErrUnknownTopic, id)
}

// RegisterBroker sets the address the only broker advertises (known only once its
// listener is bound, e.g. on port 0 in tests).
func (s *LocalStore) RegisterBroker(_ context.Context, b Broker) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.Self = b
	s.publish()
	return nil
}

// AllocateProducerID implements Store.
func (s *LocalStore) AllocateProducerID(context.Context) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev := s.snapshotState()
	id := s.state.NextProducerID
	s.state.NextProducerID++
	if err := s.commit(prev); err != nil {
		return 0, err
	}
	return id, nil
}

// objectRules checks object manifest changes against the state; callers hold mu. Its
// TopicByID returns the state's own topics, which the caller changes in place (commit
// rolls them back from the snapshot on a write error).
func (s *LocalStore) objectRules() *ObjectRules {
	byID := make(map[TopicID]*Topic, len(s.state.Topics))
	for _, t := range s.state.Topics {
		byID[t.ID] = t
	}
	var refs map[uint64][]PartitionRef
	return &ObjectRules{
		Objects:   s.state.Objects,
		NextID:    s.state.NextObjectID,
		TopicByID: func(id TopicID) *Topic { return byID[id] },
		Refs: func(id uint64) []PartitionRef {
			if refs == nil {
				refs = map[uint64][]PartitionRef{}
				for _, t := range s.state.Topics {
					for _, p := range t.Partitions {
						for _, r := range p.Objects {
							refs[r.Object] = append(refs[r.Object], PartitionRef{t.ID, p.Index})
						}
					}
				}
			}
			return refs[id]
		},
	}
}

// setManifests stores the new manifests in the state's topics.
func (s *LocalStore) setManifests(rules *ObjectRules, changes []ManifestChange) {
	for _, ch := range changes {
		ch.ApplyTo(&rules.TopicByID(ch.Topic).Partitions[ch.Partition])
	}
}

// PrepareObject implements ObjectManifest: a new object of the only broker.
func (s *LocalStore) PrepareObject(context.Context) (Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, err := s.objectRules().Prepare(s.cfg.Self.ID, localEpoch)
	if err != nil {
		return Object{}, err
	}
	prev := s.snapshotState()
	s.state.NextObjectID = o.ID + 1
	s.state.Objects = WithObjects(s.state.Objects, func(objs map[uint64]Object) { objs[o.ID] = o })
	if err := s.commit(prev); err != nil {
		return Object{}, err
	}
	return o, nil
}

// CommitObject implements ObjectManifest: it commits object id, prepared by the only
// broker (ObjectRules.Commit).
func (s *LocalStore) CommitObject(_ context.Context, id uint64, size int64, ranges []PartitionRange) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	rules := s.objectRules()
	o, changes, err := rules.Commit(id, s.cfg.Self.ID, localEpoch, size, ranges)
	if err != nil {
		return err
	}
	prev := s.snapshotState()
	s.setManifests(rules, changes)
	s.state.Objects = WithObjects(s.state.Objects, func(objs map[uint64]Object) { objs[id] = o })
	return s.commit(prev)
}

// DeleteObjects implements ObjectManifest (ObjectRules.Delete); IDs deleted before are
// ignored. Like the controller's Client it takes any number of IDs, applied in chunks of
// MaxDeleteObjects, in order (each chunk must be acceptable on its own); none is a no-op.
func (s *LocalStore) DeleteObjects(_ context.Context, ids []uint64) error {
	for len(ids) > 0 {
		n := min(len(ids), MaxDeleteObjects)
		if err := s.deleteObjects(ids[:n]); err != nil {
			return err
		}
		ids = ids[n:]
	}
	return nil
}

func (s *LocalStore) deleteObjects(ids []uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	rules := s.objectRules()
	drop, changes, err := rules.Delete(ids)
	if err != nil || len(drop) == 0 {
		return err
	}
	prev := s.snapshotState()
	s.setManifests(rules, changes)
	s.state.Objects = WithObjects(s.state.Objects, func(objs map[uint64]Object) {
		for _, id := range drop {
			delete(objs, id)
		}
	})
	return s.commit(prev)
}

// ReplaceRanges implements ObjectCompactor (ObjectRules.Replace) for the only broker.
func (s *LocalStore) ReplaceRanges(_ context.Context, id uint64, size int64, rr RangeReplace) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	rules := s.objectRules()
	o, change, err := rules.Replace(id, s.cfg.Self.ID, localEpoch, size, rr)
	if err != nil {
		return err
	}
	prev := s.snapshotState()
	s.setManifests(rules, []ManifestChange{change})
	s.state.Objects = WithObjects(s.state.Objects, func(objs map[uint64]Object) { objs[id] = o })
	return s.commit(prev)
}
