package share

// config_store.go keeps the share groups' per-group configs durable and cached. The
// broker stores a group's own values as one record keyed (group, 'C') in
// __share_group_state, beside the group's membership record:
//
//	v1: byte(0x83) | version uint32 | uvarint(n) | (str(name) str(value))*n
//	str as internal/bincodec writes it; names sorted, so equal configs encode equally
//
// The version sits where the other records keep their writer's epoch (RecordEpoch), and
// the store refuses a write whose version is not above every version written or loaded
// (ErrConfigConflict): an alter is a compare-and-set of read version + 1, retried, so two
// brokers altering one group at once never lose a change. A group with no values left
// keeps a record with none (the version keeps growing).

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/weir-io/weir/internal/bincodec"
)

const configRecordVersion = 0x83

// ErrConfigConflict: another alter of the group's configs was written first (the store
// wraps its refusal with it; Alter retries).
var ErrConfigConflict = errors.New("share: group config changed concurrently")

// ErrBadConfigRecord: a persisted group config record that cannot be decoded.
var ErrBadConfigRecord = errors.New("share: malformed group config record")

// ConfigStore keeps groups' config records.
type ConfigStore interface {
	LoadConfig(ctx context.Context, group string) (rec []byte, ok bool, err error)
	// SaveConfig writes rec as version, refused (ErrConfigConflict) unless version is
	// above every version of the group's record written or loaded.
	SaveConfig(ctx context.Context, group string, version int32, rec []byte) error
}

// EncodeConfig returns a config record of version holding set.
func EncodeConfig(version int32, set map[string]string) []byte {
	w := &bincodec.Writer{B: binary.BigEndian.AppendUint32([]byte{configRecordVersion}, uint32(version))}
	names := make([]string, 0, len(set))
	for k := range set {
		names = append(names, k)
	}
	sort.Strings(names)
	w.Uvarint(uint64(len(names)))
	for _, k := range names {
		w.Str(k)
		w.Str(set[k])
	}
	return w.B
}

// DecodeConfig parses a config record.
func DecodeConfig(v []byte) (version int32, set map[string]string, err error) {
	if len(v) < 5 || v[0] != configRecordVersion {
		return 0, nil, fmt.Errorf("%w: %d bytes", ErrBadConfigRecord, len(v))
	}
	r := bincodec.NewReader(v[5:])
	n := r.Count(2)
	set = make(map[string]string, n)
	for i := 0; i < n && r.Err() == nil; i++ {
		k := r.Str()
		set[k] = r.Str()
	}
	if err := r.End(); err != nil {
		return 0, nil, fmt.Errorf("%w: %w", ErrBadConfigRecord, err)
	}
	return int32(binary.BigEndian.Uint32(v[1:])), set, nil
}

// IsConfigRecord says whether a stored value is a group config record.
func IsConfigRecord(v []byte) bool { return len(v) > 0 && v[0] == configRecordVersion }

// Configs are the share groups' settings as this broker sees them: each group's record
// read from the store at most every refresh (a change made through another broker is
// seen within it; one made here at once), the broker's defaults under it.
type Configs struct {
	defaults Settings
	bounds   Bounds
	store    ConfigStore // nil: defaults only
	refresh  time.Duration
	mu       sync.Mutex
	cache    map[string]cachedConfig
}

type cachedConfig struct {
	s  Settings
	at time.Time
}

// NewConfigs returns the group settings over defaults, bounded by b, kept in store.
func NewConfigs(defaults Settings, b Bounds, store ConfigStore, refresh time.Duration) *Configs {
	return &Configs{defaults: defaults, bounds: b, store: store, refresh: refresh, cache: map[string]cachedConfig{}}
}

// Defaults are the broker's settings, a group's without values of its own.
func (c *Configs) Defaults() Settings { return c.defaults }

// Get returns group's settings at now. When the store cannot be read it returns the
// last settings read, or the error when there are none (a read_committed group must not
// be served as read_uncommitted).
func (c *Configs) Get(ctx context.Context, group string, now time.Time) (Settings, error) {
	if c == nil {
		return Settings{}, errors.New("share: no group configs")
	}
	if c.store == nil {
		return c.defaults, nil
	}
	c.mu.Lock()
	e, ok := c.cache[group]
	c.mu.Unlock()
	if ok && now.Sub(e.at) < c.refresh {
		return e.s, nil
	}
	set, _, err := c.Overrides(ctx, group)
	if err != nil {
		if ok {
			return e.s, nil
		}
		return Settings{}, err
	}
	s := c.effective(set)
	c.mu.Lock()
	if len(c.cache) > 100000 { // a bound, not a policy: entries are cheap to read again
		clear(c.cache)
	}
	c.cache[group] = cachedConfig{s: s, at: now}
	c.mu.Unlock()
	return s, nil
}

// effective applies a stored set; values the bounds refuse now (the broker's flags
// changed since) are skipped one by one rather than failing the group.
func (c *Configs) effective(set map[string]string) Settings {
	if s, err := Apply(c.defaults, c.bounds, set); err == nil {
		return s
	}
	s := c.defaults
	for k, v := range set {
		if t, err := Apply(s, c.bounds, map[string]string{k: v}); err == nil {
			s = t
		}
	}
	return s
}

// Overrides reads group's own values and their version (0: none written).
func (c *Configs) Overrides(ctx context.Context, group string) (map[string]string, int32, error) {
	if c.store == nil {
		return map[string]string{}, 0, nil
	}
	rec, ok, err := c.store.LoadConfig(ctx, group)
	if err != nil || !ok {
		return map[string]string{}, 0, err
	}
	v, set, err := DecodeConfig(rec)
	return set, v, err
}

// Alter applies ops to group's values, validated as a whole (one bad op changes
// nothing); validateOnly writes nothing. A concurrent alter makes it read and apply
// again.
func (c *Configs) Alter(ctx context.Context, group string, ops []ConfigOp, validateOnly bool, now time.Time) error {
	if c.store == nil {
		return fmt.Errorf("%w: group configs are not stored here", ErrInvalidConfig)
	}
	// What needs no stored value is refused before the store is asked.
	if _, err := ApplyOps(nil, ops); err != nil {
		return err
	}
	for _, op := range ops {
		if op.Op == 0 {
			if err := CheckValue(c.defaults, c.bounds, op.Key, op.Value); err != nil {
				return err
			}
		}
	}
	for attempt := 0; ; attempt++ {
		set, version, err := c.Overrides(ctx, group)
		if err != nil {
			return err
		}
		next, err := ApplyOps(set, ops)
		if err != nil {
			return err
		}
		s, err := Apply(c.defaults, c.bounds, next)
		if err != nil || validateOnly {
			return err
		}
		err = c.store.SaveConfig(ctx, group, version+1, EncodeConfig(version+1, next))
		if errors.Is(err, ErrConfigConflict) && attempt < 5 {
			continue
		}
		if err != nil {
			return err
		}
		c.mu.Lock()
		c.cache[group] = cachedConfig{s: s, at: now}
		c.mu.Unlock()
		return nil
	}
}
