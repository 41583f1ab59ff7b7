package txn

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weir-io/weir/internal/kcode"
)

// Most tests run in a synctest bubble: time is fake (the coordinator's RealClock reads
// it), and synctest.Wait returns once every goroutine of the coordinator (marker loops,
// rounds) is blocked or gone, so a test observes the state they settle in.

const (
	testEpoch   = int32(7) // the coordinator epoch tests load partitions at
	testTimeout = time.Minute
)

// stored is one record the fake store took, in its encoded form.
type stored struct {
	partition, epoch int32
	key, value       []byte
}

// fakeStore keeps records in memory, encoded (so a reload decodes them).
type fakeStore struct {
	mu      sync.Mutex
	records []stored
	err     error            // every Write fails with it while set
	hook    func(rec Record) // called first, unlocked (a test may block in it)
}

func (s *fakeStore) Write(ctx context.Context, partition, epoch int32, rec Record) error {
	s.mu.Lock()
	hook := s.hook
	s.mu.Unlock()
	if hook != nil {
		hook(rec)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	k, v := EncodeRecord(rec)
	s.records = append(s.records, stored{partition, epoch, k, v})
	return nil
}

func (s *fakeStore) setErr(err error) {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
}

func (s *fakeStore) setHook(h func(Record)) {
	s.mu.Lock()
	s.hook = h
	s.mu.Unlock()
}

// replay replays the records of partition, as the broker's loader will.
func (s *fakeStore) replay(partition int32) func(apply func(Record)) error {
	return func(apply func(Record)) error {
		s.mu.Lock()
		recs := slices.Clone(s.records)
		s.mu.Unlock()
		for _, r := range recs {
			if r.partition != partition {
				continue
			}
			rec, err := DecodeRecord(r.key, r.value)
			if err != nil {
				return err
			}
			apply(rec)
		}
		return nil
	}
}

// states is the states of id's records, in order.
func (s *fakeStore) states(id string) []State {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []State
	for _, r := range s.records {
		if string(r.key) == id {
			rec, _ := DecodeRecord(r.key, r.value)
			out = append(out, rec.Meta.State)
		}
	}
	return out
}

// last is id's latest record.
func (s *fakeStore) last(t *testing.T, id string) Meta {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.records) - 1; i >= 0; i-- {
		if r := s.records[i]; string(r.key) == id {
			rec, err := DecodeRecord(r.key, r.value)
			if err != nil {
				t.Fatal(err)
			}
			return rec.Meta
		}
	}
	t.Fatalf("no record of %q", id)
	return Meta{}
}

// markerCall is one WriteMarkers call.
type markerCall struct {
	producer   Producer
	commit     bool
	epoch      int32
	partitions []TopicPartition
}

// fakeMarkers records WriteMarkers calls; answer (nil: all written) decides each.
type fakeMarkers struct {
	mu     sync.Mutex
	calls  []markerCall
	answer func(ctx context.Context, call markerCall) []error
}

func (f *fakeMarkers) WriteMarkers(ctx context.Context, producer Producer, commit bool, epoch int32, partitions []TopicPartition) []error {
	call := markerCall{producer, commit, epoch, slices.Clone(partitions)}
	f.mu.Lock()
	f.calls = append(f.calls, call)
	answer := f.answer
	f.mu.Unlock()
	if answer == nil {
		return make([]error, len(partitions))
	}
	return answer(ctx, call)
}

func (f *fakeMarkers) setAnswer(a func(ctx context.Context, call markerCall) []error) {
	f.mu.Lock()
	f.answer = a
	f.mu.Unlock()
}

func (f *fakeMarkers) callList() []markerCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// block makes every marker write wait until its context ends (the transaction stays in
// Prepare*).
func block(ctx context.Context, call markerCall) []error {
	<-ctx.Done()
	errs := make([]error, len(call.partitions))
	for i := range errs {
		errs[i] = ctx.Err()
	}
	return errs
}

// fakeIDs hands out 1000, 1001, ...
type fakeIDs struct {
	mu   sync.Mutex
	next int64
	err  error
}

func (f *fakeIDs) AllocateProducerID(context.Context) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return 0, f.err
	}
	f.next++
	return 999 + f.next, nil
}

// harness is a coordinator with fakes, partition 0 of 1 loaded at testEpoch.
type harness struct {
	t       *testing.T
	c       *Coordinator
	store   *fakeStore
	markers *fakeMarkers
	ids     *fakeIDs
	cfg     Config
}

func newHarness(t *testing.T, mods ...func(*Config)) *harness {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Partitions = 1
	for _, m := range mods {
		m(&cfg)
	}
	h := &harness{t: t, store: &fakeStore{}, markers: &fakeMarkers{}, ids: &fakeIDs{}, cfg: cfg}
	h.c = h.start()
	for i := range cfg.Partitions {
		if _, err := h.c.Load(int32(i), testEpoch, h.store.replay(int32(i))); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// start is a new coordinator on the harness' fakes, nothing loaded.
func (h *harness) start() *Coordinator {
	h.t.Helper()
	c, err := New(h.cfg, Deps{Store: h.store, Markers: h.markers, ProducerIDs: h.ids,
		OffsetsPartition: func(group string) int32 { return int32(len(group)) }})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(c.Close)
	return c
}

func (h *harness) init(id string, current Producer) (Producer, error) {
	return h.c.InitProducerID(context.Background(), id, testTimeout, current)
}

func (h *harness) mustInit(id string) Producer {
	h.t.Helper()
	p, err := h.init(id, NoProducer)
	if err != nil {
		h.t.Fatalf("InitProducerID(%q): %v", id, err)
	}
	return p
}

func (h *harness) add(id string, p Producer, tps ...TopicPartition) error {
	return h.c.AddPartitions(context.Background(), id, p, tps)
}

// addInFlight starts an AddPartitions whose record the store holds until release is
// called; done has its answer. Other writes go through meanwhile. In a bubble.
func (h *harness) addInFlight(id string, p Producer, tps ...TopicPartition) (release func(), done <-chan error) {
	held := make(chan struct{})
	h.store.setHook(func(Record) { <-held })
	answer := make(chan error, 1)
	go func() { answer <- h.add(id, p, tps...) }()
	synctest.Wait() // the add waits in the store
	h.store.setHook(nil)
	return func() { close(held) }, answer
}

func (h *harness) end(id string, p Producer, commit bool) error {
	return h.c.EndTxn(context.Background(), id, p, commit)
}

func (h *harness) describe(id string) Description {
	h.t.Helper()
	d, err := h.c.Describe(id)
	if err != nil {
		h.t.Fatalf("Describe(%q): %v", id, err)
	}
	return d
}

// wantErr fails unless err is want (nil: no error).
func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if want == nil && err != nil || want != nil && !errors.Is(err, want) {
		t.Fatalf("%s: error %v, want %v", what, err, want)
	}
}

func tp(topic string, p int32) TopicPartition { return TopicPartition{topic, p} }

// codedErr is an error carrying Kafka code code, as the broker's sentinels do.
func codedErr(code int16) error { return kcode.New(fmt.Sprintf("code %d", code), code) }
