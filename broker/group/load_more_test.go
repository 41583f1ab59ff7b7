package group

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

// Loading gives back exactly what the records say: an Empty group stays Empty, the
// leader and protocol of a Stable group are kept (even when the leader is not the first
// member), a tombstone of one partition leaves the topic's others, and the stats count
// what was replayed.
func TestLoadKeepsWhatTheRecordsSay(t *testing.T) {
	h := newHarness(t)
	now := h.clock.Now()
	recs := []struct {
		group string
		rec   Record
	}{
		{"stable", Record{Meta: &Meta{Generation: 4, ProtocolType: "consumer", Protocol: "range", Leader: "b", Time: now,
			Members: []MemberMeta{{ID: "a", SessionTimeout: 10 * time.Second}, {ID: "b", SessionTimeout: 10 * time.Second}}}}},
		{"stable", Record{Offsets: []Offset{{Topic: "t1", Partition: 0, Offset: 1}, {Topic: "t1", Partition: 1, Offset: 2}}}},
		{"stable", Record{Offsets: []Offset{{Topic: "t1", Partition: 0, Delete: true}}}},
		{"empty", Record{Meta: &Meta{Generation: 2, ProtocolType: "consumer", Time: now}, Offsets: []Offset{{Topic: "t2", Partition: 0, Offset: 9}}}},
	}
	st, err := h.c.Load(all, func(apply func(string, Record)) error {
		for _, r := range recs {
			apply(r.group, r.rec)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.Records != 4 || st.Groups != 2 || st.Members != 2 {
		t.Fatalf("stats %+v, want 4 records, 2 groups, 2 members", st)
	}
	g := h.c.lookup("stable")
	g.lock()
	leader, protocol, state, gen := g.leader, g.protocol, g.state, g.generation
	g.unlock()
	if leader != "b" || protocol != "range" || state != stateStable || gen != 4 {
		t.Fatalf("stable group loaded as leader %q protocol %q state %v generation %d", leader, protocol, state, gen)
	}
	if got := h.fetch("stable", "t1", 1); got.Offset != 2 {
		t.Fatalf("t1/1 at %d after a tombstone of t1/0, want 2", got.Offset)
	}
	if got := h.fetch("stable", "t1", 0); got.Offset != -1 {
		t.Fatalf("t1/0 at %d after its tombstone", got.Offset)
	}
	if st := h.state("empty"); st != "Empty" {
		t.Fatalf("empty group loaded as %s", st)
	}
	// What a takeover writes back keeps the protocol and leader too.
	b := &tmember{h: h, group: "stable", id: "b", gen: 4, version: 9, ptype: "consumer", protos: []string{"range"}, topics: []string{"t1"}, session: 10000, rebal: 20000}
	wantCode(t, "heartbeat", b.heartbeat(), nil)
	if m := g.metaOf(nil, now); m.Leader != "b" || m.Protocol != "range" {
		t.Fatalf("membership written from the loaded group: %+v", m)
	}
}

// Offsets expire once exactly OffsetsRetention has passed (Kafka: >=).
func TestOffsetsExpireAtTheRetention(t *testing.T) {
	h, _ := newIDHarness(t, time.Hour)
	wantCode(t, "commit", commitCode(t, h.do(commitReq(8, "simple", -1, "", "t1", 0, 1))), nil)
	h.clock.Advance(time.Hour - time.Millisecond)
	if n := h.c.Expire(t.Context()); n != 0 {
		t.Fatalf("expired %d offsets before the retention", n)
	}
	h.clock.Advance(time.Millisecond)
	if n := h.c.Expire(t.Context()); n != 1 {
		t.Fatalf("expired %d offsets at the retention, want 1", n)
	}
}

// A Stable consumer group's offsets of topics no member subscribes to expire by commit
// time; those of subscribed topics stay.
func TestUnsubscribedOffsetsExpire(t *testing.T) {
	h, _ := newIDHarness(t, time.Hour)
	a := h.member("g") // subscribes to t1
	h.stableGroup(a)
	for _, c := range []struct {
		topic string
		p     int32
	}{{"t1", 0}, {"t2", 0}, {"t2", 1}} {
		wantCode(t, "commit", commitCode(t, h.do(a.commitReq(8, c.topic, c.p, 5))), nil)
	}
	for i := 0; i < 750; i++ { // an hour and two minutes of a live member
		h.clock.Advance(5 * time.Second)
		wantCode(t, "heartbeat", a.heartbeat(), nil)
	}
	if n := h.c.Expire(t.Context()); n != 2 {
		t.Fatalf("expired %d offsets, want t2's two", n)
	}
	if got := h.fetch("g", "t1", 0); got.Offset != 5 {
		t.Fatalf("subscribed t1/0 at %d", got.Offset)
	}
	if got := h.store.latest("g"); len(got["t2"]) != 0 || got["t1"][0].Offset != 5 {
		t.Fatalf("store after expiry: %+v", got)
	}
}

// Records without offsets or members round-trip exactly, and a forged topic index is
// refused.
func TestRecordEncodingEdges(t *testing.T) {
	for _, rec := range []Record{{Deleted: true}, {Meta: &Meta{Generation: 1}}, {Full: true}} {
		b, _ := EncodeRecord(rec)
		got, err := DecodeRecord(b)
		if err != nil || !reflect.DeepEqual(got, rec) {
			t.Fatalf("round trip of %+v: %+v %v", rec, got, err)
		}
	}
	b, _ := EncodeRecord(Record{Offsets: []Offset{{Topic: "t", Offset: 1}}})
	// magic, flags, 1 topic ("t", ""), 1 offset: its topic index is the byte after.
	i := len(binMagic) + 1 + 1 + 2 + 1 + 1
	if b[i] != 0 {
		t.Fatalf("layout: byte %d is %d, want topic index 0 (% x)", i, b[i], b)
	}
	b[i] = 1
	if _, err := DecodeRecord(b); !errors.Is(err, ErrRecord) {
		t.Fatalf("topic index 1 of 1 topic: %v", err)
	}
}
