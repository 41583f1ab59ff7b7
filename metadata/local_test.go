package metadata

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestLocalStorePersistsAndValidates(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "meta.json")
	s, err := OpenLocal(LocalConfig{Path: path, Self: Broker{ID: 3}})
	if err != nil {
		t.Fatal(err)
	}
	changed := s.Changed()
	tp, err := s.CreateTopic(ctx, TopicSpec{Name: "a", Partitions: 3, ReplicationFactor: -1, Configs: map[string]string{"retention.ms": "1000"}}, false)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	default:
		t.Fatal("Changed not closed after a change")
	}
	if _, err := s.CreateTopic(ctx, TopicSpec{Name: "a", Partitions: 1, ReplicationFactor: -1}, false); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("duplicate: %v", err)
	}
	if _, err := s.CreateTopic(ctx, TopicSpec{Name: "b", Partitions: 1, ReplicationFactor: -1, Configs: map[string]string{"retention.ms": "soon"}}, false); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("bad config: %v", err)
	}
	if _, err := s.CreateTopic(ctx, TopicSpec{Name: "v", Partitions: 1, ReplicationFactor: -1}, true); err != nil || s.View().Topics["v"] != nil {
		t.Fatalf("validate only created the topic or failed: %v", err)
	}
	if err := s.CreatePartitions(ctx, "a", 2, false); !errors.Is(err, ErrInvalidPartitions) {
		t.Fatalf("shrink: %v", err)
	}
	if err := s.CreatePartitions(ctx, "a", 5, false); err != nil {
		t.Fatal(err)
	}
	if err := s.AlterTopicConfigs(ctx, "a", []ConfigOp{{Key: "cleanup.policy", Op: OpAppend, Value: "compact"}, {Key: "retention.ms", Op: OpDelete}}, false); err != nil {
		t.Fatal(err)
	}
	if err := s.SetLogStartOffset(ctx, tp.ID, 1, 42); err != nil {
		t.Fatal(err)
	}
	id1, _ := s.AllocateProducerID(ctx)
	id2, _ := s.AllocateProducerID(ctx)

	// Everything survives a reopen; producer IDs never repeat.
	s2, err := OpenLocal(LocalConfig{Path: path, Self: Broker{ID: 3}})
	if err != nil {
		t.Fatal(err)
	}
	v := s2.View()
	a := v.Topics["a"]
	if a == nil || len(a.Partitions) != 5 || a.Partitions[1].LogStartOffset != 42 || a.ID != tp.ID || v.TopicByID(tp.ID) != a {
		t.Fatalf("reopened topic: %+v", a)
	}
	if a.Configs["cleanup.policy"] != "delete,compact" || a.Configs["retention.ms"] != "" {
		t.Fatalf("configs: %v", a.Configs)
	}
	id3, _ := s2.AllocateProducerID(ctx)
	if id1 == id2 || id3 <= id2 {
		t.Fatalf("producer ids %d %d %d", id1, id2, id3)
	}
	if _, err := s2.DeleteTopic(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.DeleteTopic(ctx, "a"); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("delete twice: %v", err)
	}
}

func TestValidTopicName(t *testing.T) {
	for _, ok := range []string{"a", "A-b_c.d", string(make([]byte, 0)) + "x"} {
		if ValidTopicName(ok) != nil {
			t.Errorf("%q rejected", ok)
		}
	}
	for _, bad := range []string{"", ".", "..", "a/b", "a b", string(make([]rune, 250))} {
		if ValidTopicName(bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// The metadata file holds SCRAM keys and ACLs: only its owner may read it, also when a
// temp file of a crashed write was left with a wider mode.
func TestLocalStoreFileIsPrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meta.json")
	if err := os.WriteFile(path+".tmp", []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := OpenLocal(LocalConfig{Path: path, Self: Broker{ID: 3}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateTopic(context.Background(), TopicSpec{Name: "a", Partitions: 1, ReplicationFactor: -1}, false); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if m := st.Mode().Perm(); m != 0o600 {
		t.Fatalf("metadata file mode %v, want 0600", m)
	}
}
