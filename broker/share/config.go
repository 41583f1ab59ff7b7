package share

// config.go is the share groups' per-group configuration: Kafka 4.2's GroupConfig keys for
// share groups (the ConfigResource type GROUP of DescribeConfigs and
// IncrementalAlterConfigs), their validation against the broker's bounds
// (group.share.min/max.*), and what a group's effective settings are. Kafka 4.2 has no
// per-group share.delivery.count.limit (KIP-1240 adds it in 4.3): the broker's flag holds
// for every group.

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The share group config keys (Kafka's GroupConfig).
const (
	KeySessionTimeout    = "share.session.timeout.ms"
	KeyHeartbeatInterval = "share.heartbeat.interval.ms"
	KeyLockDuration      = "share.record.lock.duration.ms"
	KeyAutoOffsetReset   = "share.auto.offset.reset"
	KeyIsolationLevel    = "share.isolation.level"
)

// ErrInvalidConfig: a group config name or value refused (INVALID_CONFIG).
var ErrInvalidConfig = errors.New("share: invalid group config")

// Isolation is share.isolation.level.
type Isolation int8

// The isolation levels.
const (
	// ReadUncommitted delivers every record below the high watermark (the default).
	ReadUncommitted Isolation = 0
	// ReadCommitted delivers only records below the last stable offset that no aborted
	// transaction wrote.
	ReadCommitted Isolation = 1
)

func (i Isolation) String() string {
	if i == ReadCommitted {
		return "read_committed"
	}
	return "read_uncommitted"
}

// ResetKind is how share.auto.offset.reset starts a new share partition.
type ResetKind int8

// The reset strategies.
const (
	ResetLatest     ResetKind = 0 // the high watermark (the default)
	ResetEarliest   ResetKind = 1 // the log start
	ResetByDuration ResetKind = 2 // the first record at or after now - Duration
)

// Reset is share.auto.offset.reset.
type Reset struct {
	Kind     ResetKind
	Duration time.Duration // ResetByDuration only
	text     string        // as given (by_duration keeps the ISO 8601 form)
}

func (r Reset) String() string {
	switch {
	case r.text != "":
		return r.text
	case r.Kind == ResetEarliest:
		return "earliest"
	case r.Kind == ResetByDuration:
		return "by_duration:" + isoDuration(r.Duration)
	}
	return "latest"
}

// ParseReset parses latest, earliest or by_duration:<ISO 8601 duration, PnDTnHnMn.nS>.
func ParseReset(v string) (Reset, error) {
	switch l := strings.ToLower(strings.TrimSpace(v)); {
	case l == "latest":
		return Reset{Kind: ResetLatest}, nil
	case l == "earliest":
		return Reset{Kind: ResetEarliest}, nil
	case strings.HasPrefix(l, "by_duration:"):
		d, err := parseISODuration(l[len("by_duration:"):])
		if err != nil {
			return Reset{}, fmt.Errorf("%w: %s=%q: %w", ErrInvalidConfig, KeyAutoOffsetReset, v, err)
		}
		return Reset{Kind: ResetByDuration, Duration: d, text: strings.TrimSpace(v)}, nil
	}
	return Reset{}, fmt.Errorf("%w: %s=%q: latest, earliest or by_duration:PnDTnHnMn.nS", ErrInvalidConfig, KeyAutoOffsetReset, v)
}

// parseISODuration parses Java's Duration.parse form PnDTnHnMn.nS without signs (Kafka
// refuses a negative duration): days, hours and minutes whole, seconds with a fraction.
func parseISODuration(s string) (time.Duration, error) {
	s = strings.ToUpper(s)
	if !strings.HasPrefix(s, "P") || len(s) < 3 {
		return 0, errors.New("not an ISO 8601 duration (PnDTnHnMn.nS)")
	}
	s = s[1:]
	var d time.Duration
	inTime, parts := false, 0
	units := map[bool]map[byte]time.Duration{false: {'D': 24 * time.Hour}, true: {'H': time.Hour, 'M': time.Minute, 'S': time.Second}}
	for len(s) > 0 {
		if s[0] == 'T' {
			if inTime || len(s) == 1 {
				return 0, errors.New("misplaced T")
			}
			inTime, s = true, s[1:]
			continue
		}
		i := 0
		for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
			i++
		}
		if i == 0 || i == len(s) {
			return 0, fmt.Errorf("bad component %q", s)
		}
		unit, ok := units[inTime][s[i]]
		if !ok {
			return 0, fmt.Errorf("bad unit %q", s[i])
		}
		num := s[:i]
		if strings.Contains(num, ".") && s[i] != 'S' {
			return 0, errors.New("only seconds may have a fraction")
		}
		f, err := strconv.ParseFloat(num, 64)
		if err != nil || f > float64(1<<62)/float64(unit) {
			return 0, fmt.Errorf("bad number %q", num)
		}
		d += time.Duration(f * float64(unit))
		s, parts = s[i+1:], parts+1
	}
	if parts == 0 {
		return 0, errors.New("no components")
	}
	return d, nil
}

// isoDuration writes d in the PnDTnHnMn.nS form.
func isoDuration(d time.Duration) string {
	return "PT" + strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "S"
}

// Settings are a share group's effective configuration: the broker's defaults with the
// group's own values over them.
type Settings struct {
	SessionTimeout    time.Duration
	HeartbeatInterval time.Duration
	LockDuration      time.Duration
	AutoOffsetReset   Reset
	Isolation         Isolation
}

// Bounds are the broker's limits on the group values (group.share.min/max.*). Each is
// widened to hold the broker's own default, so a group may always be set to it.
type Bounds struct {
	MinSessionTimeout, MaxSessionTimeout       time.Duration
	MinHeartbeatInterval, MaxHeartbeatInterval time.Duration
	MinLockDuration, MaxLockDuration           time.Duration
}

// ConfigKey describes one group config key.
type ConfigKey struct {
	Name string
	Int  bool // an int of milliseconds (else a string)
	Doc  string
}

// ConfigKeys are the share group config keys, sorted by name.
var ConfigKeys = []ConfigKey{
	{KeyAutoOffsetReset, false, "Where a share partition starts when the group first reads it: latest, earliest or by_duration:PnDTnHnMn.nS (the first record at or after that long ago)."},
	{KeyHeartbeatInterval, true, "The heartbeat interval given to the members of the share group."},
	{KeyIsolationLevel, false, "read_committed delivers only committed transactional records; read_uncommitted (the default) every record."},
	{KeyLockDuration, true, "How long a member holds the records it acquired before they are released to others."},
	{KeySessionTimeout, true, "A member silent this long is removed from the share group."},
}

// IsConfigKey says whether name is a share group config key.
func IsConfigKey(name string) bool {
	for _, k := range ConfigKeys {
		if k.Name == name {
			return true
		}
	}
	return false
}

// Value is key's value in s, as DescribeConfigs shows it.
func (s Settings) Value(key string) string {
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	switch key {
	case KeySessionTimeout:
		return ms(s.SessionTimeout)
	case KeyHeartbeatInterval:
		return ms(s.HeartbeatInterval)
	case KeyLockDuration:
		return ms(s.LockDuration)
	case KeyAutoOffsetReset:
		return s.AutoOffsetReset.String()
	case KeyIsolationLevel:
		return s.Isolation.String()
	}
	return ""
}

// Apply returns the settings of a group with overrides set over defaults, validated as
// Kafka's GroupConfig.validate: known names, values parsed, durations within bounds,
// the session timeout above the heartbeat interval.
func Apply(defaults Settings, b Bounds, set map[string]string) (Settings, error) {
	s := defaults
	names := make([]string, 0, len(set))
	for k := range set {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if err := applyKey(&s, defaults, b, k, set[k]); err != nil {
			return Settings{}, err
		}
	}
	if s.SessionTimeout <= s.HeartbeatInterval {
		return Settings{}, fmt.Errorf("%w: %s (%d) must be greater than %s (%d)", ErrInvalidConfig,
			KeySessionTimeout, s.SessionTimeout.Milliseconds(), KeyHeartbeatInterval, s.HeartbeatInterval.Milliseconds())
	}
	return s, nil
}

// CheckValue validates one key's value on its own (the checks that need no other key).
func CheckValue(defaults Settings, b Bounds, k, v string) error {
	s := defaults
	return applyKey(&s, defaults, b, k, v)
}

// applyKey parses and checks one value into s.
func applyKey(s *Settings, defaults Settings, b Bounds, k, v string) error {
	bad := func(why string) error { return fmt.Errorf("%w: %s=%q: %s", ErrInvalidConfig, k, v, why) }
	msv := func(min, max, def time.Duration) (time.Duration, error) {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil {
			return 0, bad("not an int")
		}
		d := time.Duration(n) * time.Millisecond
		min, max = minD(min, def), max2(max, def)
		switch {
		case n < 1:
			return 0, bad("must be at least 1")
		case min > 0 && d < min:
			return 0, bad(fmt.Sprintf("must be at least the broker's minimum %d", min.Milliseconds()))
		case max > 0 && d > max:
			return 0, bad(fmt.Sprintf("must be at most the broker's maximum %d", max.Milliseconds()))
		}
		return d, nil
	}
	var err error
	switch k {
	case KeySessionTimeout:
		s.SessionTimeout, err = msv(b.MinSessionTimeout, b.MaxSessionTimeout, defaults.SessionTimeout)
	case KeyHeartbeatInterval:
		s.HeartbeatInterval, err = msv(b.MinHeartbeatInterval, b.MaxHeartbeatInterval, defaults.HeartbeatInterval)
	case KeyLockDuration:
		s.LockDuration, err = msv(b.MinLockDuration, b.MaxLockDuration, defaults.LockDuration)
		if err == nil && s.LockDuration < time.Second && s.LockDuration != defaults.LockDuration {
			err = bad("must be at least 1000")
		}
	case KeyAutoOffsetReset:
		s.AutoOffsetReset, err = ParseReset(v)
	case KeyIsolationLevel:
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "read_committed":
			s.Isolation = ReadCommitted
		case "read_uncommitted":
			s.Isolation = ReadUncommitted
		default:
			err = bad("read_committed or read_uncommitted")
		}
	default:
		err = fmt.Errorf("%w: unknown share group config %q", ErrInvalidConfig, k)
	}
	return err
}

// minD is the bound min widened down to def (min 0: no bound).
func minD(min, def time.Duration) time.Duration {
	if min > 0 && def > 0 && def < min {
		return def
	}
	return min
}

// max2 is the bound max widened up to def (max 0: no bound).
func max2(max, def time.Duration) time.Duration {
	if max > 0 && def > max {
		return def
	}
	return max
}

// ConfigOp is one IncrementalAlterConfigs operation.
type ConfigOp struct {
	Key   string
	Op    int8 // 0 set, 1 delete, 2 append, 3 subtract
	Value string
}

// ApplyOps returns set changed by ops (set is not modified); append and subtract,
// which need a list value, are refused as Kafka refuses them for a non-list key.
func ApplyOps(set map[string]string, ops []ConfigOp) (map[string]string, error) {
	out := make(map[string]string, len(set)+len(ops))
	for k, v := range set {
		out[k] = v
	}
	for _, op := range ops {
		if !IsConfigKey(op.Key) {
			return nil, fmt.Errorf("%w: unknown share group config %q (Weir serves the share.* group configs)", ErrInvalidConfig, op.Key)
		}
		switch op.Op {
		case 0:
			out[op.Key] = op.Value
		case 1:
			delete(out, op.Key)
		default:
			return nil, fmt.Errorf("%w: %s is not a list: operation %d not allowed", ErrInvalidConfig, op.Key, op.Op)
		}
	}
	return out, nil
}
