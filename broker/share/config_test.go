package share

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"
)

func defaults() Settings {
	return Settings{SessionTimeout: 45 * time.Second, HeartbeatInterval: 5 * time.Second, LockDuration: 30 * time.Second}
}

func kafkaBounds() Bounds {
	return Bounds{MinSessionTimeout: 45 * time.Second, MaxSessionTimeout: time.Minute, MinHeartbeatInterval: 5 * time.Second,
		MaxHeartbeatInterval: 15 * time.Second, MinLockDuration: 15 * time.Second, MaxLockDuration: time.Minute}
}

// Group configs are validated as Kafka's GroupConfig: names known, values parsed, the
// durations within the broker's bounds (widened to the broker's own value), the session
// timeout above the heartbeat interval.
func TestApplyValidatesAsKafka(t *testing.T) {
	ok := []struct {
		set  map[string]string
		want func(Settings) bool
	}{
		{map[string]string{KeyLockDuration: "15000"}, func(s Settings) bool { return s.LockDuration == 15*time.Second }},
		{map[string]string{KeyLockDuration: "60000", KeySessionTimeout: "60000", KeyHeartbeatInterval: "15000"}, func(s Settings) bool {
			return s.LockDuration == time.Minute && s.SessionTimeout == time.Minute && s.HeartbeatInterval == 15*time.Second
		}},
		{map[string]string{KeyAutoOffsetReset: "earliest"}, func(s Settings) bool { return s.AutoOffsetReset.Kind == ResetEarliest }},
		{map[string]string{KeyAutoOffsetReset: "by_duration:P1DT2H3M4.5S"}, func(s Settings) bool {
			return s.AutoOffsetReset.Kind == ResetByDuration && s.AutoOffsetReset.Duration == 26*time.Hour+3*time.Minute+4500*time.Millisecond &&
				s.Value(KeyAutoOffsetReset) == "by_duration:P1DT2H3M4.5S"
		}},
		{map[string]string{KeyIsolationLevel: "read_committed"}, func(s Settings) bool { return s.Isolation == ReadCommitted }},
	}
	for _, c := range ok {
		s, err := Apply(defaults(), kafkaBounds(), c.set)
		if err != nil || !c.want(s) {
			t.Fatalf("%v: %+v %v", c.set, s, err)
		}
	}
	bad := []map[string]string{
		{KeyLockDuration: "14999"},                 // below group.share.min.record.lock.duration.ms
		{KeyLockDuration: "60001"},                 // above the max
		{KeySessionTimeout: "44000"},               // below the min
		{KeyHeartbeatInterval: "16000"},            // above the max
		{KeyLockDuration: "abc"},                   // not an int
		{KeyLockDuration: "0"},                     // at least 1
		{KeyAutoOffsetReset: "newest"},             // not a strategy
		{KeyAutoOffsetReset: "by_duration:-PT1S"},  // negative
		{KeyAutoOffsetReset: "by_duration:P"},      // no components
		{KeyAutoOffsetReset: "by_duration:PT1.5M"}, // fraction of minutes
		{KeyIsolationLevel: "serializable"},
		{"consumer.session.timeout.ms": "45000"}, // not served
		{KeySessionTimeout: "45000", KeyHeartbeatInterval: "15000", "x": "y"},
	}
	for _, set := range bad {
		if s, err := Apply(defaults(), kafkaBounds(), set); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("%v accepted: %+v %v", set, s, err)
		}
	}
	// The session timeout must stay above the heartbeat interval (the effective ones).
	d := defaults()
	d.SessionTimeout = 10 * time.Second
	if _, err := Apply(d, kafkaBounds(), map[string]string{KeyHeartbeatInterval: "10000"}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("heartbeat interval = session timeout accepted: %v", err)
	}
	// A broker whose own lock duration is below the minimum (tests, weir chaos) may still
	// give a group that value.
	d = defaults()
	d.LockDuration = 3 * time.Second
	if s, err := Apply(d, kafkaBounds(), map[string]string{KeyLockDuration: "3000"}); err != nil || s.LockDuration != 3*time.Second {
		t.Fatalf("the broker's own value refused: %v", err)
	}
	if _, err := Apply(d, kafkaBounds(), map[string]string{KeyLockDuration: "2000"}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatal("below the widened minimum accepted")
	}
}

func TestApplyOps(t *testing.T) {
	set := map[string]string{KeyLockDuration: "20000", KeyIsolationLevel: "read_committed"}
	got, err := ApplyOps(set, []ConfigOp{{Key: KeyLockDuration, Op: 1}, {Key: KeyAutoOffsetReset, Op: 0, Value: "earliest"}})
	if want := map[string]string{KeyIsolationLevel: "read_committed", KeyAutoOffsetReset: "earliest"}; err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v %v, want %v", got, err, want)
	}
	if set[KeyLockDuration] != "20000" {
		t.Fatal("ApplyOps changed its input")
	}
	for _, op := range []ConfigOp{{Key: KeyLockDuration, Op: 2, Value: "1"}, {Key: KeyLockDuration, Op: 3}, {Key: "nope", Op: 0}} {
		if _, err := ApplyOps(set, []ConfigOp{op}); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("%+v accepted: %v", op, err)
		}
	}
}

func TestConfigRecordRoundTrip(t *testing.T) {
	set := map[string]string{KeyLockDuration: "20000", KeyAutoOffsetReset: "by_duration:PT1H"}
	rec := EncodeConfig(7, set)
	if v, ok := RecordEpoch(rec); !ok || v != 7 {
		t.Fatalf("record epoch %d %v, want the version 7", v, ok)
	}
	v, got, err := DecodeConfig(rec)
	if err != nil || v != 7 || !reflect.DeepEqual(got, set) {
		t.Fatalf("decoded %d %v %v", v, got, err)
	}
	for i := range rec {
		if _, _, err := DecodeConfig(rec[:i]); err == nil {
			t.Fatalf("a record cut at %d of %d decoded", i, len(rec))
		}
	}
	if _, _, err := DecodeConfig(append(rec, 0)); err == nil {
		t.Fatal("trailing bytes accepted")
	}
}

// memConfigStore fences versions as the broker's store does: a write must be newer than
// every version written.
type memConfigStore struct {
	mu     sync.Mutex
	recs   map[string][]byte
	ver    map[string]int32
	reads  int
	before func() // runs before each save (a concurrent alter)
	fail   error
}

func (s *memConfigStore) LoadConfig(_ context.Context, g string) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	if s.fail != nil {
		return nil, false, s.fail
	}
	r, ok := s.recs[g]
	return r, ok, nil
}

func (s *memConfigStore) SaveConfig(_ context.Context, g string, v int32, rec []byte) error {
	if f := s.before; f != nil {
		s.before = nil
		f()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if v <= s.ver[g] {
		return fmt.Errorf("version %d: %w", v, ErrConfigConflict)
	}
	s.ver[g], s.recs[g] = v, rec
	return nil
}

// Two alters at once both land (a compare-and-set retried), one bad op changes nothing,
// validate_only writes nothing, and another broker sees a change after its refresh.
func TestConfigsAlterAndRefresh(t *testing.T) {
	ctx := context.Background()
	st := &memConfigStore{recs: map[string][]byte{}, ver: map[string]int32{}}
	here := NewConfigs(defaults(), kafkaBounds(), st, 5*time.Second)
	other := NewConfigs(defaults(), kafkaBounds(), st, 5*time.Second)
	if s, err := other.Get(ctx, "g", t0); err != nil || s != defaults() {
		t.Fatalf("an unconfigured group: %+v %v", s, err)
	}
	st.before = func() { // another broker's alter lands between this one's read and write
		if err := other.Alter(ctx, "g", []ConfigOp{{Key: KeyIsolationLevel, Value: "read_committed"}}, false, t0); err != nil {
			t.Error(err)
		}
	}
	if err := here.Alter(ctx, "g", []ConfigOp{{Key: KeyLockDuration, Value: "20000"}}, false, t0); err != nil {
		t.Fatal(err)
	}
	set, v, err := here.Overrides(ctx, "g")
	if want := map[string]string{KeyLockDuration: "20000", KeyIsolationLevel: "read_committed"}; err != nil || v != 2 || !reflect.DeepEqual(set, want) {
		t.Fatalf("after two concurrent alters: %v version %d %v, want %v", set, v, err, want)
	}
	if s, _ := here.Get(ctx, "g", t0); s.LockDuration != 20*time.Second {
		t.Fatalf("the altering broker does not see its change at once: %+v", s)
	}
	if err := here.Alter(ctx, "g", []ConfigOp{{Key: KeyAutoOffsetReset, Value: "earliest"}, {Key: KeyLockDuration, Value: "1"}}, false, t0); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("a bad op: %v", err)
	}
	if err := here.Alter(ctx, "g", []ConfigOp{{Key: KeyAutoOffsetReset, Value: "earliest"}}, true, t0); err != nil {
		t.Fatal(err)
	}
	if set, v, _ := here.Overrides(ctx, "g"); v != 2 || set[KeyAutoOffsetReset] != "" {
		t.Fatalf("a refused or validate-only alter wrote: %v version %d", set, v)
	}
	// The other broker read "g" at t0 (defaults) and serves that until its refresh.
	if s, _ := other.Get(ctx, "g", t0.Add(4*time.Second)); s.LockDuration != 30*time.Second {
		t.Fatalf("read again before the refresh: %+v", s)
	}
	if s, _ := other.Get(ctx, "g", t0.Add(5*time.Second)); s.LockDuration != 20*time.Second || s.Isolation != ReadCommitted {
		t.Fatalf("not read again after the refresh: %+v", s)
	}
	// A store that fails: the last settings serve; a group never read is an error (a
	// read_committed group must not be served read_uncommitted).
	st.fail = errors.New("down")
	if s, err := other.Get(ctx, "g", t0.Add(time.Minute)); err != nil || s.Isolation != ReadCommitted {
		t.Fatalf("stale settings not served: %+v %v", s, err)
	}
	if _, err := other.Get(ctx, "h", t0); err == nil {
		t.Fatal("settings of a group never read served without its record")
	}
}

// A share partition's acquisitions are locked for the duration last set (the group's
// share.record.lock.duration.ms), not the manager's default.
func TestSetLockDuration(t *testing.T) {
	p := NewPartition(0, lim()) // 30 s
	p.SetLockDuration(2 * time.Second)
	p.Acquire("a", t0, spans(0, 0), nil, 0)
	if d := p.NextDeadline(); !d.Equal(t0.Add(2 * time.Second)) {
		t.Fatalf("lock deadline %v, want t0+2s", d.Sub(t0))
	}
	if !p.Expire(t0.Add(2 * time.Second)) {
		t.Fatal("the 2 s lock did not run out at 2 s")
	}
}

// A share session ends with the connection that opened it: Drop returns the sessions of
// that connection (to release what their members hold) and no other's; a session
// reopened on another connection goes with that one.
func TestSessionsDropWithConnection(t *testing.T) {
	ss := NewSessions(0)
	a, b := new(int), new(int)
	tp := func(p int32) []TP { return []TP{{Partition: p}} }
	if _, err := ss.Fetch("g", "m1", 0, tp(0), nil, a); err != nil {
		t.Fatal(err)
	}
	if _, err := ss.Fetch("g", "m2", 0, tp(1), nil, b); err != nil {
		t.Fatal(err)
	}
	if _, err := ss.Fetch("g", "m1", 1, tp(2), nil, b); err != nil { // a later request on b keeps the owner
		t.Fatal(err)
	}
	if o, ok := ss.Owner("g", "m1"); !ok || o != any(a) {
		t.Fatalf("owner %v %v", o, ok)
	}
	ended := ss.Drop(a)
	if len(ended) != 1 || ended[0].Member != "m1" || len(ended[0].Parts) != 2 {
		t.Fatalf("dropped %+v, want m1's session of 2 partitions", ended)
	}
	if _, err := ss.Fetch("g", "m1", 2, nil, nil, a); !errors.Is(err, ErrSessionNotFound) {
		t.Fatalf("a dropped session still served: %v", err)
	}
	if _, err := ss.Fetch("g", "m2", 1, nil, nil, b); err != nil {
		t.Fatalf("another connection's session dropped: %v", err)
	}
	if _, err := ss.Fetch("g", "m2", 0, tp(1), nil, a); err != nil { // m2 reopens on a
		t.Fatal(err)
	}
	if ended := ss.Drop(b); len(ended) != 0 {
		t.Fatalf("the old connection dropped a session reopened elsewhere: %+v", ended)
	}
}
