package metatest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/weir-io/weir/metadata"
)

func changedClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestStorePlacesRegistersAndPublishes(t *testing.T) {
	ctx := context.Background()
	s := NewStore(1, 2, 3)
	v0 := s.View()
	if v0.Version != 0 || v0.ControllerID != 1 || len(v0.Brokers) != 3 || len(v0.Topics) != 0 {
		t.Fatalf("new store: %+v", v0)
	}
	for _, b := range v0.Brokers {
		if !b.Active() {
			t.Fatalf("broker %d not active from the start", b.ID)
		}
	}

	ch := s.Changed()
	top, err := s.CreateTopic(ctx, metadata.TopicSpec{Name: "t", Partitions: 5, Configs: map[string]string{"retention.ms": "1"}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if !changedClosed(ch) {
		t.Fatal("Changed was not closed by CreateTopic")
	}
	v1 := s.View()
	if v1.Version != 1 || v1.Topics["t"] != top || v1.TopicByID(top.ID) != top || top.ID.IsZero() {
		t.Fatalf("after create: version %d, topic %+v", v1.Version, v1.Topics["t"])
	}
	for i, p := range top.Partitions {
		want := int32(i%3 + 1)
		if p.Index != int32(i) || p.Leader != want || p.LeaderEpoch != 0 || p.Moving || p.MovingTo != -1 ||
			len(p.Logs) != 1 || p.Logs[0] != (metadata.LogRange{Broker: want}) {
			t.Fatalf("partition %d: %+v, want leader %d with its own WAL from 0", i, p, want)
		}
	}
	if top.Configs["retention.ms"] != "1" {
		t.Fatalf("configs %v", top.Configs)
	}
	if len(v0.Topics) != 0 || v0.Version != 0 {
		t.Fatal("a published view changed")
	}

	if _, err := s.CreateTopic(ctx, metadata.TopicSpec{Name: "t", Partitions: 1}, false); !errors.Is(err, metadata.ErrTopicExists) {
		t.Fatalf("create twice: %v", err)
	}
	if _, err := s.CreateTopic(ctx, metadata.TopicSpec{Name: "none", Partitions: 0}, false); !errors.Is(err, metadata.ErrInvalidPartitions) {
		t.Fatalf("create with 0 partitions: %v", err)
	}
	ch = s.Changed()
	dry, err := s.CreateTopic(ctx, metadata.TopicSpec{Name: "dry", Partitions: -1}, true)
	if err != nil || dry == nil || len(dry.Partitions) != 1 {
		t.Fatalf("validate only: %+v %v", dry, err)
	}
	if changedClosed(ch) || s.View().Version != 1 || s.View().Topics["dry"] != nil {
		t.Fatal("validate only published a change")
	}

	if err := s.RegisterBroker(ctx, metadata.Broker{ID: 2, Host: "10.0.0.2", Port: 9092, Rack: "b", Epoch: 4, State: metadata.BrokerFenced}); err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterBroker(ctx, metadata.Broker{ID: 9, Host: "10.0.0.9", Port: 9092}); err != nil {
		t.Fatal(err)
	}
	v := s.View()
	if b, _ := v.Broker(2); b.Host != "10.0.0.2" || b.Port != 9092 || b.Rack != "b" || b.Epoch != 4 || !b.Active() {
		t.Fatalf("registered broker 2: %+v", b)
	}
	if _, ok := v.Broker(9); ok || len(v.Brokers) != 3 {
		t.Fatalf("a broker NewStore did not list was added: %+v", v.Brokers)
	}

	for want := int64(1); want <= 3; want++ {
		if id, err := s.AllocateProducerID(ctx); err != nil || id != want {
			t.Fatalf("producer id %d (%v), want %d", id, err, want)
		}
	}
	before := s.View().Version
	if err := s.SetLogStartOffset(ctx, top.ID, 0, 10); err != nil || s.View().Version != before {
		t.Fatalf("SetLogStartOffset: %v, version %d → %d", err, before, s.View().Version)
	}
	if _, err := s.DeleteTopic(ctx, "t"); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("DeleteTopic: %v", err)
	}
	if err := s.CreatePartitions(ctx, "t", 9, false); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("CreatePartitions: %v", err)
	}
	if err := s.AlterTopicConfigs(ctx, "t", nil, false); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("AlterTopicConfigs: %v", err)
	}
}

func TestStoreMoves(t *testing.T) {
	ctx := context.Background()
	s := NewStore(1, 2)
	top, err := s.CreateTopic(ctx, metadata.TopicSpec{Name: "mv", Partitions: 2}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CompleteMove(ctx, top.ID, 0, 5); !errors.Is(err, metadata.ErrMoveRefused) {
		t.Fatalf("complete a move never begun: %v", err)
	}
	if err := s.BeginMove("mv", 0, 2); err != nil {
		t.Fatal(err)
	}
	if p := s.View().Topics["mv"].Partitions[0]; !p.Moving || p.MovingTo != 2 || p.Leader != 1 {
		t.Fatalf("after BeginMove: %+v", p)
	}
	if err := s.CompleteMove(ctx, top.ID, 0, 42); err != nil {
		t.Fatal(err)
	}
	p := s.View().Topics["mv"].Partitions[0]
	if p.Leader != 2 || p.LeaderEpoch != 1 || p.Moving || p.MovingTo != -1 ||
		len(p.Logs) != 2 || p.Logs[0] != (metadata.LogRange{Broker: 1}) || p.Logs[1] != (metadata.LogRange{Broker: 2, StartOffset: 42}) {
		t.Fatalf("after CompleteMove: %+v", p)
	}
	if other := s.View().Topics["mv"].Partitions[1]; other.Leader != 2 || other.LeaderEpoch != 0 || len(other.Logs) != 1 {
		t.Fatalf("the other partition changed: %+v", other)
	}
	if got := top.Partitions[0]; got.Leader != 1 || len(got.Logs) != 1 {
		t.Fatalf("the topic CreateTopic returned changed: %+v", got)
	}
	if err := s.BeginMove("nope", 0, 2); !errors.Is(err, metadata.ErrUnknownTopic) {
		t.Fatalf("BeginMove of an unknown topic: %v", err)
	}
	if err := s.BeginMove("mv", 2, 1); !errors.Is(err, metadata.ErrUnknownTopic) {
		t.Fatalf("BeginMove of an unknown partition: %v", err)
	}
	if err := s.CompleteMove(ctx, metadata.TopicID{1}, 0, 0); !errors.Is(err, metadata.ErrUnknownTopic) {
		t.Fatalf("CompleteMove of an unknown topic: %v", err)
	}
}

func TestStoreWithoutBrokers(t *testing.T) {
	s := NewStore()
	if v := s.View(); v.ControllerID != -1 || len(v.Brokers) != 0 {
		t.Fatalf("empty store: %+v", v)
	}
	if _, err := s.CreateTopic(context.Background(), metadata.TopicSpec{Name: "t", Partitions: 1}, false); !errors.Is(err, metadata.ErrNotController) {
		t.Fatalf("create without brokers: %v", err)
	}
}

// Concurrent writers each get their own version and every change is published once.
func TestStoreConcurrentWriters(t *testing.T) {
	s := NewStore(1, 2)
	const n = 32
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.CreateTopic(context.Background(), metadata.TopicSpec{Name: fmt.Sprintf("t-%d", i), Partitions: 1}, false); err != nil {
				t.Error(err)
			}
			s.View()
			s.Changed()
		}()
	}
	wg.Wait()
	if v := s.View(); v.Version != n || len(v.Topics) != n {
		t.Fatalf("version %d with %d topics, want %d", v.Version, len(v.Topics), n)
	}
}

// TestStoreMoveGenerations: a completion of a cancelled move does not complete the next
// move of the same partition.
func TestStoreMoveGenerations(t *testing.T) {
	ctx := context.Background()
	s := NewStore(1, 2)
	top, err := s.CreateTopic(ctx, metadata.TopicSpec{Name: "mv", Partitions: 1}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.BeginMove("mv", 0, 2); err != nil {
		t.Fatal(err)
	}
	gen1 := s.View().Topics["mv"].Partitions[0].MoveGen
	if err := s.CancelMove("mv", 0); err != nil {
		t.Fatal(err)
	}
	if p := s.View().Topics["mv"].Partitions[0]; p.Moving || p.MoveGen != 0 || p.MovingTo != -1 {
		t.Fatalf("after CancelMove: %+v", p)
	}
	if err := s.BeginMove("mv", 0, 2); err != nil {
		t.Fatal(err)
	}
	gen2 := s.View().Topics["mv"].Partitions[0].MoveGen
	if gen1 == 0 || gen2 == gen1 {
		t.Fatalf("generations %d, %d", gen1, gen2)
	}
	if err := s.CompleteMoveGen(ctx, top.ID, 0, 10, gen1); !errors.Is(err, metadata.ErrMoveRefused) {
		t.Fatalf("stale completion: %v", err)
	}
	if err := s.CompleteMoveGen(ctx, top.ID, 0, 20, gen2); err != nil {
		t.Fatal(err)
	}
	if p := s.View().Topics["mv"].Partitions[0]; p.Leader != 2 || p.MoveGen != 0 || p.Logs[1] != (metadata.LogRange{Broker: 2, StartOffset: 20}) {
		t.Fatalf("after the completion: %+v", p)
	}
}

// TestStoreFenceAndRecovery: Fence fails a broker's partitions over by the controller's
// rules (zone first, then fewest led), CompleteRecovery completes them once (again: a
// no-op), a stale leader epoch is refused, and with no broker left the next
// registration takes the leaderless partitions.
func TestStoreFenceAndRecovery(t *testing.T) {
	ctx := context.Background()
	s := NewStore(1, 2, 3)
	for _, b := range []metadata.Broker{{ID: 1, Rack: "a", Epoch: 7}, {ID: 2, Rack: "b", Epoch: 1}, {ID: 3, Rack: "a", Epoch: 1}} {
		if err := s.RegisterBroker(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	top, err := s.CreateTopic(ctx, metadata.TopicSpec{Name: "t", Partitions: 6}, false) // leaders 1 2 3 1 2 3
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Fence(1); err != nil {
		t.Fatal(err)
	}
	if err := s.Fence(1); !errors.Is(err, metadata.ErrFenced) {
		t.Fatalf("fencing twice: %v", err)
	}
	for _, i := range []int{0, 3} {
		p := s.View().Topics["t"].Partitions[i]
		if p.Leader != 3 || !p.Recovering || p.RecoverEpoch != 7 || p.LeaderEpoch != 1 || len(p.Logs) != 1 || p.Logs[0].Broker != 1 {
			t.Fatalf("t/%d after fencing 1: %+v, want broker 3 (zone a) recovering epoch 7", i, p)
		}
	}
	if err := s.CompleteRecovery(ctx, top.ID, 0, 0, 9); !errors.Is(err, metadata.ErrRecoveryRefused) {
		t.Fatalf("stale leader epoch: %v", err)
	}
	if err := s.CompleteRecovery(ctx, top.ID, 1, 0, 9); !errors.Is(err, metadata.ErrRecoveryRefused) {
		t.Fatalf("a partition that is not recovering: %v", err)
	}
	if err := s.CompleteRecovery(ctx, top.ID, 0, 1, 9); err != nil {
		t.Fatal(err)
	}
	v := s.View().Version
	if err := s.CompleteRecovery(ctx, top.ID, 0, 1, 9); err != nil || s.View().Version != v {
		t.Fatalf("the same completion again: %v (version %d → %d)", err, v, s.View().Version)
	}
	if p := s.View().Topics["t"].Partitions[0]; p.Recovering || p.Logs[1] != (metadata.LogRange{Broker: 3, StartOffset: 9}) {
		t.Fatalf("t/0 recovered: %+v", p)
	}

	if err := s.Fence(3); err != nil { // t/0 t/2 t/3 t/5 → 2, the only one left
		t.Fatal(err)
	}
	if err := s.Fence(2); err != nil { // nobody left
		t.Fatal(err)
	}
	for i, p := range s.View().Topics["t"].Partitions {
		if p.Leader != -1 || !p.Recovering {
			t.Fatalf("t/%d with no broker left: %+v", i, p)
		}
	}
	if p := s.View().Topics["t"].Partitions[3]; p.RecoverEpoch != 7 {
		t.Fatalf("t/3 forgot the broker it recovers from: %+v", p)
	}
	if err := s.RegisterBroker(ctx, metadata.Broker{ID: 2, Rack: "b", Epoch: 2}); err != nil {
		t.Fatal(err)
	}
	for i, p := range s.View().Topics["t"].Partitions {
		if p.Leader != 2 || !p.Recovering {
			t.Fatalf("t/%d after broker 2 came back: %+v", i, p)
		}
	}
}

// TestStoreDrain: DrainBroker (what a broker calls on SIGTERM) marks it draining and
// begins moving every partition it leads to the other brokers, as the controller does;
// the broker completes the hand-offs and ends up leading nothing; placement of moves and
// failovers never picks it; a new registration is active again.
func TestStoreDrain(t *testing.T) {
	ctx := context.Background()
	s := NewStore(1, 2, 3)
	top, err := s.CreateTopic(ctx, metadata.TopicSpec{Name: "t", Partitions: 6}, false)
	if err != nil {
		t.Fatal(err)
	}
	b1 := s.For(1)
	var d metadata.Drainer = b1
	if d.Draining() {
		t.Fatal("draining before DrainBroker")
	}
	if err := d.DrainBroker(ctx); err != nil {
		t.Fatal(err)
	}
	if !d.Draining() || s.For(2).Draining() {
		t.Fatal("Draining does not tell the drained broker")
	}
	v := s.View()
	if b, _ := v.Broker(1); !b.Active() || b.Accepting() {
		t.Fatalf("drained broker %+v: want live, not accepting", b)
	}
	for _, p := range v.Topics["t"].Partitions {
		switch {
		case p.Leader == 1 && (!p.Moving || p.MovingTo == 1 || p.MoveGen != v.Version):
			t.Fatalf("t/%d of the drained broker: %+v", p.Index, p)
		case p.Leader != 1 && p.Moving:
			t.Fatalf("t/%d moving: %+v", p.Index, p)
		}
	}
	for _, p := range v.Topics["t"].Partitions {
		if p.Leader == 1 {
			if err := b1.CompleteMoveGen(ctx, top.ID, p.Index, 3, p.MoveGen); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := s.View().PartitionsLedBy(1); n != 0 {
		t.Fatalf("the drained broker leads %d", n)
	}
	// Broker 2 fenced: its partitions go to 3, never to the draining 1.
	if err := s.Fence(2); err != nil {
		t.Fatal(err)
	}
	if n := s.View().PartitionsLedBy(1); n != 0 {
		t.Fatalf("a failover gave the draining broker %d partitions", n)
	}
	if err := s.Drain(2); !errors.Is(err, metadata.ErrFenced) {
		t.Fatalf("drain of a fenced broker: %v", err)
	}
	if err := s.RegisterBroker(ctx, metadata.Broker{ID: 1, Host: "h", Port: 2, Epoch: 2}); err != nil {
		t.Fatal(err)
	}
	if b, _ := s.View().Broker(1); !b.Accepting() || d.Draining() {
		t.Fatalf("registered again: %+v", b)
	}
}
