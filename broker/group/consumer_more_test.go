package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// reloadConsumers replaces h's coordinator by a new one that loads every record written
// so far, each encoded and decoded as the log would hold it (a coordinator failover).
func reloadConsumers(t *testing.T, h *harness) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Clock, cfg.ConsumerProtocol, cfg.ConsumerSessionTimeout = h.clock, true, 10*time.Second
	c2 := New(cfg, h.store, fakeTopics{"t1": 4, "t2": 4, "t3": 1})
	t.Cleanup(c2.Close)
	_, err := c2.Load(func(string) bool { return true }, func(apply func(string, Record)) error {
		for _, call := range h.store.snapshot() {
			rec, err := DecodeRecord(mustEncode(t, call.rec))
			if err != nil {
				return err
			}
			apply(call.group, rec)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	h.c.Close()
	h.c = c2
}

// A coordinator that takes over in the middle of a revocation still waits for it: the
// partitions the old owner is revoking are not given to the new owner until its
// heartbeat no longer lists them (the revoking set is part of the durable state).
func TestConsumerRevocationSurvivesLoad(t *testing.T) {
	h := newConsumerHarness(t)
	a, b := h.cmember("g", "a"), h.cmember("g", "b")
	a.beat()
	b.beat()
	a.beat() // told to revoke 4 of its 8; it has not acknowledged yet
	if a.count() != 4 || a.epoch != 1 {
		t.Fatalf("a after the revocation request: owns %d at epoch %d, want 4 at epoch 1", a.count(), a.epoch)
	}
	// a's consumer still holds all 8 until its revocation callback finishes.
	stillOwned := map[string][]int32{"t1": {0, 1, 2, 3}, "t2": {0, 1, 2, 3}}
	reloadConsumers(t, h)
	a.owned = stillOwned
	if code := a.beat(); code != 0 {
		t.Fatalf("a after the load: %v", kerr.ErrorForCode(code))
	}
	a.owned = stillOwned
	if code := b.beat(); code != 0 {
		t.Fatalf("b after the load: %v", kerr.ErrorForCode(code))
	}
	if b.count() != 0 {
		t.Fatalf("b was given %v after the load while a still revokes them", b.owned)
	}
	// a acknowledges (its answer set it to its 4): b takes the other 4.
	a.owned = nil
	a.beat() // back to what the coordinator says a owns
	converge(t, a, b)
	if a.count() != 4 || b.count() != 4 || a.epoch != 2 || b.epoch != 2 {
		t.Fatalf("after the acknowledgement: a %d (epoch %d), b %d (epoch %d)", a.count(), a.epoch, b.count(), b.epoch)
	}
}

// A revocation that never completes is still fenced by the rebalance timeout after a
// load: the loaded coordinator restarts the timer.
func TestConsumerRevocationTimeoutAfterLoad(t *testing.T) {
	h := newConsumerHarness(t)
	a, b := h.cmember("g", "a"), h.cmember("g", "b")
	a.beat()
	b.beat()
	a.beat() // told to revoke
	reloadConsumers(t, h)
	for i := 0; i < 4; i++ { // a is silent; b keeps going past a's 5 s rebalance timeout
		h.clock.Advance(2 * time.Second)
		b.beat()
	}
	b.beat()
	if b.count() != 8 {
		t.Fatalf("b owns %d after a's revocation timed out, want 8", b.count())
	}
}

// offsetFetch is OffsetFetch v9 of group's t1/0 as member id (nil: none) at epoch.
func (h *harness) offsetFetch(group string, id *string, epoch int32) kmsg.OffsetFetchResponseGroup {
	h.t.Helper()
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version = 9
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group, rg.MemberID, rg.MemberEpoch = group, id, epoch
	rt := kmsg.NewOffsetFetchRequestGroupTopic()
	rt.Topic, rt.Partitions = "t1", []int32{0}
	rg.Topics = append(rg.Topics, rt)
	r.Groups = append(r.Groups, rg)
	return h.do(r).(*kmsg.OffsetFetchResponse).Groups[0]
}

// OffsetFetch v9+ naming a member of a consumer group checks its epoch as Kafka does.
func TestConsumerOffsetFetchMemberEpoch(t *testing.T) {
	h := newConsumerHarness(t)
	a, b := h.cmember("g", "a"), h.cmember("g", "b")
	converge(t, a, b)
	if code := commitCode(t, h.do(commitReq(9, "g", a.epoch, "a", "t1", 0, 42))); code != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(code))
	}
	id, ghost := "a", "ghost"
	for _, tc := range []struct {
		what  string
		id    *string
		epoch int32
		want  int16
	}{
		{"the member at its epoch", &id, a.epoch, 0},
		{"an admin (no member, epoch -1)", nil, -1, 0},
		{"the member one epoch behind", &id, a.epoch - 1, kerr.StaleMemberEpoch.Code},
		{"the member ahead", &id, a.epoch + 1, kerr.StaleMemberEpoch.Code},
		{"an unknown member", &ghost, a.epoch, kerr.UnknownMemberID.Code},
		{"no member ID with an epoch", nil, a.epoch, kerr.UnknownMemberID.Code},
	} {
		g := h.offsetFetch("g", tc.id, tc.epoch)
		if g.ErrorCode != tc.want {
			t.Fatalf("%s: %v, want %v", tc.what, kerr.ErrorForCode(g.ErrorCode), kerr.ErrorForCode(tc.want))
		}
		if tc.want == 0 && (len(g.Topics) != 1 || g.Topics[0].Partitions[0].Offset != 42) {
			t.Fatalf("%s: offsets %+v, want t1/0 at 42", tc.what, g.Topics)
		}
		if tc.want != 0 && len(g.Topics) != 0 {
			t.Fatalf("%s: offsets returned with the error: %+v", tc.what, g.Topics)
		}
	}
	// A classic group ignores the member fields (Kafka's ClassicGroup.validateOffsetFetch).
	m := h.member("cl")
	h.stableGroup(m)
	if g := h.offsetFetch("cl", &ghost, 99); g.ErrorCode != 0 {
		t.Fatalf("classic group with a member ID: %v", kerr.ErrorForCode(g.ErrorCode))
	}
}
