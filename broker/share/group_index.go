package share

// group_index.go: which share groups a __consumer_offsets partition coordinates, so the
// broker that takes the partition over lists them (ListGroups) before any of them
// heartbeats. Kafka finds them in the partition itself; here the membership records live
// in __share_group_state by hash of the group, so the coordinator keeps an index record
// per __consumer_offsets partition beside them, keyed (partition, 'I'):
//
//	v1: byte(0x84) | coordinator epoch uint32 | uvarint(n) | str(group)*n (sorted)
//
// A group enters the index at a heartbeat (before its first membership record is
// written, so no group exists unlisted; a group from before the index enters at its next
// heartbeat) and leaves it when a listing finds it deleted. Written with the
// coordinator's epoch, so a coordinator that lost the partition is fenced as for the
// membership records.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/weir-io/weir/internal/bincodec"
)

const groupIndexVersion = 0x84

// IndexStore keeps the index records (a GroupStore that also implements it gets them).
type IndexStore interface {
	// LoadIndex reads partition's index; without create, a store that holds no share
	// state at all answers ErrNoState (a listing then creates nothing).
	LoadIndex(ctx context.Context, partition, coordEpoch int32, create bool) (rec []byte, ok bool, err error)
	SaveIndex(ctx context.Context, partition, coordEpoch int32, rec []byte) error
}

// ErrNoState: the store holds no share state yet (no share group ever written).
var ErrNoState = errors.New("share: no share state stored yet")

// Coord is a coordinator's hold on one __consumer_offsets partition: the partition and
// its leader epoch.
type Coord struct{ Partition, Epoch int32 }

// groupIndex is one partition's index as loaded at a coordinator epoch.
type groupIndex struct {
	epoch int32
	ids   map[string]bool
}

func encodeIndex(coordEpoch int32, ids map[string]bool) []byte {
	w := &bincodec.Writer{B: binary.BigEndian.AppendUint32([]byte{groupIndexVersion}, uint32(coordEpoch))}
	names := make([]string, 0, len(ids))
	for id := range ids {
		names = append(names, id)
	}
	sort.Strings(names)
	w.Uvarint(uint64(len(names)))
	for _, id := range names {
		w.Str(id)
	}
	return w.B
}

func decodeIndex(v []byte) (map[string]bool, error) {
	if len(v) < 5 || v[0] != groupIndexVersion {
		return nil, fmt.Errorf("%w: index of %d bytes", ErrBadGroupRecord, len(v))
	}
	r := bincodec.NewReader(v[5:])
	n := r.Count(1)
	ids := make(map[string]bool, n)
	for i := 0; i < n && r.Err() == nil; i++ {
		ids[r.Str()] = true
	}
	if err := r.End(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadGroupRecord, err)
	}
	return ids, nil
}

// loadIndex returns c's index, read from the store when not loaded at c's epoch (an
// index read without create is never kept when the store has no state: the store's view
// may be behind). Called with gs.imu held.
func (gs *Groups) loadIndex(ctx context.Context, is IndexStore, c Coord, create bool) (*groupIndex, error) {
	if x := gs.index[c.Partition]; x != nil && x.epoch == c.Epoch {
		return x, nil
	}
	rec, ok, err := is.LoadIndex(ctx, c.Partition, c.Epoch, create)
	if err != nil {
		return nil, err
	}
	x := &groupIndex{epoch: c.Epoch, ids: map[string]bool{}}
	if ok {
		if x.ids, err = decodeIndex(rec); err != nil {
			return nil, err
		}
	}
	gs.index[c.Partition] = x
	return x, nil
}

// indexed makes sure group is in c's index before the group's membership is written.
func (gs *Groups) indexed(ctx context.Context, c Coord, group string) error {
	is, ok := gs.store.(IndexStore)
	if !ok || c.Partition < 0 {
		return nil
	}
	gs.imu.Lock()
	defer gs.imu.Unlock()
	x, err := gs.loadIndex(ctx, is, c, true)
	if err != nil || x.ids[group] {
		return err
	}
	ids := make(map[string]bool, len(x.ids)+1)
	for id := range x.ids {
		ids[id] = true
	}
	ids[group] = true
	if err := is.SaveIndex(ctx, c.Partition, c.Epoch, encodeIndex(c.Epoch, ids)); err != nil {
		delete(gs.index, c.Partition) // unknown whether it was written: read it again
		return err
	}
	x.ids = ids
	return nil
}

// Coordinated lists the share groups of the __consumer_offsets partitions held (coords),
// loading each (once per coordinator epoch), so a new coordinator lists them before they
// heartbeat. Groups found deleted leave the index. Partitions whose index cannot be read
// are skipped and their errors returned with the rest.
func (gs *Groups) Coordinated(ctx context.Context, coords []Coord, now time.Time) ([]string, error) {
	is, ok := gs.store.(IndexStore)
	if !ok {
		return gs.List(), nil
	}
	var out []string
	var errs []error
	for _, c := range coords {
		gs.imu.Lock()
		x, err := gs.loadIndex(ctx, is, c, false)
		var ids []string
		if err == nil {
			for id := range x.ids {
				ids = append(ids, id)
			}
		}
		gs.imu.Unlock()
		if errors.Is(err, ErrNoState) {
			continue // no share group anywhere yet
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("partition %d: %w", c.Partition, err))
			continue
		}
		var gone []string
		for _, id := range ids {
			e, err := gs.entry(ctx, id, c.Epoch, false, now)
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("group %s: %w", id, err))
			case e == nil:
				gone = append(gone, id)
			default:
				out = append(out, id)
			}
		}
		if len(gone) > 0 {
			gs.unindex(ctx, is, c, gone)
		}
	}
	sort.Strings(out)
	if len(errs) > 0 {
		return out, fmt.Errorf("share: listing groups: %v", errs)
	}
	return out, nil
}

// unindex removes deleted groups from c's index (best effort: a later listing retries).
func (gs *Groups) unindex(ctx context.Context, is IndexStore, c Coord, gone []string) {
	gs.imu.Lock()
	defer gs.imu.Unlock()
	x, err := gs.loadIndex(ctx, is, c, true)
	if err != nil {
		return
	}
	ids := make(map[string]bool, len(x.ids))
	for id := range x.ids {
		ids[id] = true
	}
	for _, id := range gone {
		gs.mu.Lock()
		back := gs.groups[id] != nil // created again since it was found deleted
		gs.mu.Unlock()
		if !back {
			delete(ids, id)
		}
	}
	if is.SaveIndex(ctx, c.Partition, c.Epoch, encodeIndex(c.Epoch, ids)) == nil {
		x.ids = ids
	} else {
		delete(gs.index, c.Partition)
	}
}
