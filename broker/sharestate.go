package broker

// sharestate.go is the share coordinator's store (Kafka's share coordinator and
// persister, KIP-932): each share partition's state (share.Snapshot) is one record in
// the compacted internal topic __share_group_state, key (group, topic ID, partition),
// in partition hash(key) mod N. The broker leading that partition serves the state:
// it replays the partition when it becomes Ready here (the latest record per key wins)
// and appends each write like a produced batch before it answers. The share partition
// itself lives on its data partition's leader (broker/kafka share_fetch.go), which reads
// and writes its state here, or on the broker leading the state partition over the
// peer connection (peer.OpShareState). A state write carries the data partition's
// leader epoch; a write older than the newest epoch that read or wrote the key is
// refused (FENCED_STATE_EPOCH), so a leader that lost its partition cannot overwrite
// its successor's state.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/weir-io/weir/broker/kafka"
	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/broker/peer"
	"github.com/weir-io/weir/broker/share"
	"github.com/weir-io/weir/internal/recbatch"
)

// shareStateTopic holds the share partitions' states.
const shareStateTopic = "__share_group_state"

// errShareLoading: the state partition is not loaded here yet.
var errShareLoading = fmt.Errorf("broker: __share_group_state partition loading: %w", kerr.CoordinatorLoadInProgress)

// errShareNotHere: the state partition is not led here.
var errShareNotHere = fmt.Errorf("broker: __share_group_state partition not led here: %w", kerr.NotCoordinator)

// shareStates is what this broker serves of __share_group_state.
type shareStates struct {
	mu     sync.Mutex
	served map[int32]*partlog.Partition
	values map[int32]map[string][]byte
	fence  map[string]int32 // newest leader epoch that read or wrote a key
	kick   chan struct{}    // wakes the load loop (wakeShareLoads)
	loaded chan struct{}    // closed (and replaced) when a load finishes: wakes waiting requests
	// keyMu orders each key's writes from check to durable append (striped by key
	// hash): a leader's write and an admin reset of one key never cross.
	keyMu [64]sync.Mutex
}

// shareAdminEpoch, as a write's epoch, marks an admin reset of a share partition's state
// (AlterShareGroupOffsets, DeleteShareGroupOffsets, DeleteGroups): the store gives it the
// next state epoch and the newest leader epoch, so the leader's next write is refused and
// it loads the reset state. A reset to -1 (delete) of a key never written writes nothing.
const shareAdminEpoch = -2

// shareStateKey encodes a share partition's key: group length uint16 | group | topic ID
// | partition int32.
func shareStateKey(k share.Key) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(len(k.Group)))
	b = append(b, k.Group...)
	b = append(b, k.Topic[:]...)
	return binary.BigEndian.AppendUint32(b, uint32(k.Partition))
}

// shareGroupKey encodes a share group's membership key: group length uint16 | group |
// 'G' (never the length of a share partition's key for the same group).
func shareGroupKey(group string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(len(group)))
	b = append(b, group...)
	return append(b, 'G')
}

// shareConfigKey encodes a share group's config key: group length uint16 | group | 'C'.
func shareConfigKey(group string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(len(group)))
	b = append(b, group...)
	return append(b, 'C')
}

// shareIndexKey encodes the key of the index of the share groups a __consumer_offsets
// partition coordinates: length uint16 | decimal partition | 'I'.
func shareIndexKey(partition int32) []byte {
	p := strconv.Itoa(int(partition))
	b := binary.BigEndian.AppendUint16(nil, uint16(len(p)))
	b = append(b, p...)
	return append(b, 'I')
}

func shareStateIndex(key []byte, n int) int32 {
	h := fnv.New32a()
	h.Write(key)
	return int32(h.Sum32() % uint32(n))
}

// wakeShareLoads asks the load loop to look at the __share_group_state partitions again
// (a view was applied, or one became Ready here: coordinatorsServe).
func (b *Broker) wakeShareLoads() {
	if b.share == nil {
		return
	}
	select {
	case b.shareStates.kick <- struct{}{}:
	default:
	}
}

// shareSafetyPoll is how often the load loop looks without being woken: only a missed
// wake-up would need it.
const shareSafetyPoll = 5 * time.Second

// shareLoadLoop loads and unloads __share_group_state partitions when woken (retrying a
// failed load with backoff), and releases expired acquisition locks every 100 ms.
func (b *Broker) shareLoadLoop() {
	defer b.wg.Done()
	expire := time.NewTicker(100 * time.Millisecond)
	defer expire.Stop()
	safety := time.NewTicker(shareSafetyPoll)
	defer safety.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	failures := 0
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-expire.C:
			b.share.Parts.Expire(b.ctx, b.now()) // locks run out even when nobody fetches
			continue
		case <-b.shareStates.kick:
		case <-retry.C:
		case <-safety.C:
		}
		if err := b.syncShareLoads(); err != nil {
			failures++
			delay := min(50*time.Millisecond<<min(failures-1, 6), 2*time.Second)
			b.log.Warn("loading share-partition states failed; retried", "attempt", failures, "retry_in", delay, "err", err)
			retry.Reset(delay)
			continue
		}
		failures = 0
	}
}

func (b *Broker) syncShareLoads() error {
	t := b.meta.View().Topics[shareStateTopic]
	ss := &b.shareStates
	ss.mu.Lock()
	for idx, p := range ss.served {
		if t == nil || b.parts.Get(t.ID, idx) != p || p.State() != partlog.Ready {
			delete(ss.served, idx)
			delete(ss.values, idx)
		}
	}
	ss.mu.Unlock()
	if t == nil {
		return nil
	}
	var errs []error
	for i := range t.Partitions {
		idx := int32(i)
		p := b.parts.Get(t.ID, idx)
		ss.mu.Lock()
		done := ss.served[idx] == p
		ss.mu.Unlock()
		if p == nil || p.State() != partlog.Ready || done {
			continue
		}
		vals := map[string][]byte{}
		_, err := b.replayPartition(p, shareStateTopic, errors.New("broker: reading share-partition states failed"), func(off int64, data []byte) {
			_ = recbatch.DecodeRecords(data, func(key, value []byte) {
				if value == nil {
					delete(vals, string(key))
				} else {
					vals[string(key)] = append([]byte(nil), value...)
				}
			})
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("partition %d: %w", idx, err))
			continue
		}
		ss.mu.Lock()
		if b.parts.Get(p.ID(), idx) == p && p.State() == partlog.Ready {
			ss.served[idx], ss.values[idx] = p, vals
			for k, v := range vals {
				if e, ok := share.RecordEpoch(v); ok && e > ss.fence[k] {
					ss.fence[k] = e
				}
			}
		}
		ss.mu.Unlock()
		b.log.Info("share-partition states loaded", "partition", idx, "keys", len(vals))
		ss.mu.Lock()
		close(ss.loaded)
		ss.loaded = make(chan struct{})
		ss.mu.Unlock()
	}
	return errors.Join(errs...)
}

// shareLocal reads or writes a key in a state partition led here, waiting (up to the
// context's deadline, at most 5 s) for its load.
func (b *Broker) shareLocal(ctx context.Context, idx int32, key []byte, epoch int32, value []byte) ([]byte, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	t := b.meta.View().Topics[shareStateTopic]
	if t == nil {
		return nil, false, errShareNotHere
	}
	ss := &b.shareStates
	for {
		p, err := b.lookup(t, idx, true)
		if err != nil {
			return nil, false, fmt.Errorf("%w: %w", errShareNotHere, err)
		}
		ss.mu.Lock()
		served := ss.served[idx] == p
		if served && value == nil {
			if epoch >= 0 { // -1: a read that fences nobody (DescribeShareGroupOffsets)
				if epoch < ss.fence[string(key)] {
					ss.mu.Unlock()
					return nil, false, fmt.Errorf("broker: leader epoch %d: %w", epoch, kerr.FencedStateEpoch)
				}
				ss.fence[string(key)] = epoch
			}
			v, ok := ss.values[idx][string(key)]
			ss.mu.Unlock()
			return v, ok, nil
		}
		loaded := ss.loaded
		ss.mu.Unlock()
		if served {
			return nil, false, b.shareWrite(ctx, p, idx, key, epoch, value)
		}
		b.wakeShareLoads()
		select {
		case <-ctx.Done():
			return nil, false, errShareLoading
		case <-loaded: // a load finished: this one?
		case <-time.After(time.Second): // why: the partition may have become ours unnoticed; look again
		}
	}
}

// shareWrite checks a write against the key's fence and state epoch and makes it
// durable; an admin reset (epoch shareAdminEpoch) is given the next state epoch.
func (b *Broker) shareWrite(ctx context.Context, p *partlog.Partition, idx int32, key []byte, epoch int32, value []byte) error {
	ss := &b.shareStates
	km := &ss.keyMu[shareStateIndex(key, len(ss.keyMu))]
	km.Lock()
	defer km.Unlock()
	ss.mu.Lock()
	cur, had := ss.values[idx][string(key)]
	fence := ss.fence[string(key)]
	ss.mu.Unlock()
	var curSnap share.Snapshot
	if had {
		curSnap, _ = share.DecodeSnapshot(cur) // a group record: state epoch 0, unchecked below
	}
	newSnap, isSnap := share.Snapshot{}, false
	if s, err := share.DecodeSnapshot(value); err == nil {
		newSnap, isSnap = s, true
	}
	switch {
	case epoch == shareAdminEpoch:
		if !isSnap {
			return fmt.Errorf("broker: admin reset of a non-snapshot: %w", kerr.InvalidRequest)
		}
		if !had && newSnap.Start < 0 {
			return nil // nothing to delete
		}
		newSnap.StateEpoch = curSnap.StateEpoch + 1
		newSnap.LeaderEpoch = max(fence, curSnap.LeaderEpoch)
		value = newSnap.Encode(nil)
	case share.IsConfigRecord(value) && epoch <= fence:
		// A group config's compare-and-set: the version read + 1 must be new.
		return fmt.Errorf("broker: group config version %d, the store has %d: %w", epoch, fence, kerr.FencedStateEpoch)
	case epoch < fence:
		return fmt.Errorf("broker: leader epoch %d: %w", epoch, kerr.FencedStateEpoch)
	case isSnap && had && newSnap.StateEpoch != curSnap.StateEpoch:
		return fmt.Errorf("broker: state epoch %d, the store's is %d: %w", newSnap.StateEpoch, curSnap.StateEpoch, kerr.FencedStateEpoch)
	default:
		ss.mu.Lock()
		ss.fence[string(key)] = max(ss.fence[string(key)], epoch)
		ss.mu.Unlock()
	}
	return b.shareAppend(ctx, p, idx, key, value)
}

// shareAppend makes one state record durable, then serves it.
func (b *Broker) shareAppend(ctx context.Context, p *partlog.Partition, idx int32, key, value []byte) error {
	if _, err := b.appendRecord(ctx, p, key, value); err != nil {
		return err
	}
	ss := &b.shareStates
	ss.mu.Lock()
	if ss.served[idx] == p {
		ss.values[idx][string(key)] = value
	}
	ss.mu.Unlock()
	return nil
}

// shareState reads (value nil) or writes a key: here when its state partition is led
// here, else on its leader over the peer connection.
func (b *Broker) shareState(ctx context.Context, key []byte, epoch int32, value []byte) ([]byte, bool, error) {
	t, err := b.internalTopic(ctx, shareStateTopic, int32(b.cfg.Share.StatePartitions), true)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %w", kerr.CoordinatorNotAvailable, err)
	}
	idx := shareStateIndex(key, len(t.Partitions))
	leader := t.Partitions[idx].Leader
	switch {
	case leader < 0:
		return nil, false, kerr.CoordinatorNotAvailable
	case leader == b.cfg.NodeID:
		return b.shareLocal(ctx, idx, key, epoch, value)
	}
	c, err := b.proxy.client(b.meta.View(), leader)
	if err != nil {
		return nil, false, fmt.Errorf("%w: reaching share coordinator %d: %w", kerr.CoordinatorNotAvailable, leader, err)
	}
	req := peer.ShareStateRequest{Write: value != nil, LeaderEpoch: epoch, Key: key, Value: value}
	resp, err := c.Call(ctx, req.AppendTo(nil))
	if err != nil {
		return nil, false, fmt.Errorf("%w: share coordinator %d: %w", kerr.CoordinatorNotAvailable, leader, err)
	}
	code, found, v, known, err := peer.DecodeShareStateAnswer(resp)
	switch {
	case err != nil:
		return nil, false, err
	case !known:
		return nil, false, fmt.Errorf("%w: broker %d does not serve share-partition state", kerr.CoordinatorNotAvailable, leader)
	case code != 0:
		return nil, false, fmt.Errorf("broker: share coordinator %d: %w", leader, kerr.ErrorForCode(code))
	}
	return v, found, nil
}

// serveShareState answers a peer.OpShareState request.
func (b *Broker) serveShareState(body []byte, respond func([]byte)) {
	req, err := peer.DecodeShareStateRequest(body)
	if err != nil || b.share == nil {
		respond(peer.AppendShareStateAnswer(nil, kerr.InvalidRequest.Code, false, nil))
		return
	}
	go func() { // the load wait and the append must not hold the peer reader
		t := b.meta.View().Topics[shareStateTopic]
		if t == nil {
			respond(peer.AppendShareStateAnswer(nil, kerr.NotCoordinator.Code, false, nil))
			return
		}
		var value []byte
		if req.Write {
			value = req.Value
		}
		v, ok, err := b.shareLocal(b.ctx, shareStateIndex(req.Key, len(t.Partitions)), req.Key, req.LeaderEpoch, value)
		respond(peer.AppendShareStateAnswer(nil, kafka.ErrorCode(err), ok, v))
	}()
}

// sharePersister is share.Persister over shareState.
type sharePersister struct{ b *Broker }

func (s sharePersister) Read(ctx context.Context, k share.Key, epoch int32) (share.Snapshot, bool, error) {
	v, ok, err := s.b.shareState(ctx, shareStateKey(k), epoch, nil)
	if err != nil || !ok {
		return share.Snapshot{}, false, err
	}
	snap, err := share.DecodeSnapshot(v)
	return snap, err == nil, err
}

func (s sharePersister) Write(ctx context.Context, k share.Key, snap share.Snapshot) error {
	_, _, err := s.b.shareState(ctx, shareStateKey(k), snap.LeaderEpoch, snap.Encode(nil))
	return err
}

// LoadGroup reads a share group's membership, fencing coordinators older than
// coordEpoch (share.GroupStore).
func (s sharePersister) LoadGroup(ctx context.Context, group string, coordEpoch int32) ([]byte, bool, error) {
	v, ok, err := s.b.shareState(ctx, shareGroupKey(group), coordEpoch, nil)
	if err != nil {
		return nil, false, fmt.Errorf("%w: loading %s: %w", share.ErrGroupStore, group, err)
	}
	return v, ok, nil
}

// SaveGroup writes a share group's membership (share.GroupStore).
func (s sharePersister) SaveGroup(ctx context.Context, group string, coordEpoch int32, rec []byte) error {
	if _, _, err := s.b.shareState(ctx, shareGroupKey(group), coordEpoch, rec); err != nil {
		return fmt.Errorf("%w: saving %s: %w", share.ErrGroupStore, group, err)
	}
	return nil
}

// LoadIndex reads the share group index of a __consumer_offsets partition, fencing
// coordinators older than coordEpoch (share.IndexStore).
func (s sharePersister) LoadIndex(ctx context.Context, partition, coordEpoch int32, create bool) ([]byte, bool, error) {
	if !create && s.b.meta.View().Topics[shareStateTopic] == nil {
		return nil, false, share.ErrNoState // listing groups does not create the topic
	}
	v, ok, err := s.b.shareState(ctx, shareIndexKey(partition), coordEpoch, nil)
	if err != nil {
		return nil, false, fmt.Errorf("%w: loading the index of partition %d: %w", share.ErrGroupStore, partition, err)
	}
	return v, ok, nil
}

// SaveIndex writes the share group index of a __consumer_offsets partition
// (share.IndexStore).
func (s sharePersister) SaveIndex(ctx context.Context, partition, coordEpoch int32, rec []byte) error {
	if _, _, err := s.b.shareState(ctx, shareIndexKey(partition), coordEpoch, rec); err != nil {
		return fmt.Errorf("%w: saving the index of partition %d: %w", share.ErrGroupStore, partition, err)
	}
	return nil
}

// LoadConfig reads a share group's config record without fencing anyone
// (share.ConfigStore).
func (s sharePersister) LoadConfig(ctx context.Context, group string) ([]byte, bool, error) {
	return s.b.shareState(ctx, shareConfigKey(group), -1, nil)
}

// SaveConfig writes a share group's config record as version, refused when that
// version was written already (share.ConfigStore).
func (s sharePersister) SaveConfig(ctx context.Context, group string, version int32, rec []byte) error {
	_, _, err := s.b.shareState(ctx, shareConfigKey(group), version, rec)
	if errors.Is(err, kerr.FencedStateEpoch) {
		return fmt.Errorf("%w: %w", share.ErrConfigConflict, err)
	}
	return err
}

// reset is an admin reset of a share partition's state to start at start (-1: deleted).
func (s sharePersister) reset(ctx context.Context, k share.Key, start int64) error {
	_, _, err := s.b.shareState(ctx, shareStateKey(k), shareAdminEpoch, share.Snapshot{Start: start}.Encode(nil))
	return err
}

// readOnly reads a state without fencing anyone (DescribeShareGroupOffsets).
func (s sharePersister) readOnly(ctx context.Context, k share.Key) (share.Snapshot, bool, error) {
	return s.Read(ctx, k, -1)
}
