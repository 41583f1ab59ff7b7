package metadata

import (
	"context"
	"path/filepath"
	"testing"
)

// LocalStore tombstones a deleted topic's ID, across a reopen; an unknown ID is not
// tombstoned (it may be newer than the View).
func TestLocalStoreTopicTombstones(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metadata.json")
	s, err := OpenLocal(LocalConfig{Path: path, Self: Broker{ID: 0}})
	if err != nil {
		t.Fatal(err)
	}
	tp, err := s.CreateTopic(context.Background(), TopicSpec{Name: "x", Partitions: 1, ReplicationFactor: -1}, false)
	if err != nil {
		t.Fatal(err)
	}
	before := s.View()
	if _, err := s.DeleteTopic(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
	if !s.View().TopicDeleted(tp.ID) || before.TopicDeleted(tp.ID) || s.View().TopicDeleted(TopicID{1}) {
		t.Fatalf("tombstones %v (before the delete %v)", s.View().TopicTombstones(), before.TopicTombstones())
	}
	s2, err := OpenLocal(LocalConfig{Path: path, Self: Broker{ID: 0}})
	if err != nil {
		t.Fatal(err)
	}
	if !s2.View().TopicDeleted(tp.ID) {
		t.Fatal("tombstone lost across a reopen")
	}
}
