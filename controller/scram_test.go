package controller

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/metadata"
)

func scramCred(m metadata.ScramMechanism, b byte) metadata.ScramCredential {
	return metadata.ScramCredential{Mechanism: m, Iterations: 4096, Salt: []byte{b, b},
		StoredKey: bytes.Repeat([]byte{b}, m.KeySize()), ServerKey: bytes.Repeat([]byte{b + 1}, m.KeySize())}
}

func scramUpsert(user string, c metadata.ScramCredential) metadata.ScramAlteration {
	return metadata.ScramAlteration{User: user, Mechanism: c.Mechanism, Credential: c}
}

// TestScramFSMSnapshot: the command changes the View and the version only when an
// alteration applies, and a snapshot carries the credentials through Persist/Restore.
func TestScramFSMSnapshot(t *testing.T) {
	f := NewFSM(nil)
	v0 := f.View().Version
	res := mustApply(t, f, &alterScramCmd{Alterations: []metadata.ScramAlteration{
		scramUpsert("alice", scramCred(metadata.ScramSHA512, 1)),
		{User: "bob", Mechanism: metadata.ScramSHA256, Delete: true},
	}})
	results := res.Value.([]metadata.ScramResult)
	if len(results) != 2 || results[0].Err != nil || !errors.Is(results[1].Err, metadata.ErrScramNotFound) {
		t.Fatalf("results %v", results)
	}
	if v := f.View(); v.Version != v0+1 || len(v.Scram["alice"]) != 1 {
		t.Fatalf("view %d %v", v.Version, v.Scram)
	}
	mustApply(t, f, &alterScramCmd{Alterations: []metadata.ScramAlteration{{User: "bob", Mechanism: metadata.ScramSHA256, Delete: true}}})
	if f.View().Version != v0+1 {
		t.Fatal("a refused alteration bumped the version")
	}
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	b := persist(t, snap.(*fsmSnapshot))
	if !bytes.Contains(b, []byte(`"scram":{"alice":[{"mechanism":2,"iterations":4096`)) {
		t.Fatalf("snapshot without the credentials:\n%s", b)
	}
	g := NewFSM(nil)
	if err := g.Restore(readCloser{bytes.NewReader(b)}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g.State(), f.State()) {
		t.Fatalf("restored\n%s\nwant\n%s", stateJSON(t, g.State()), stateJSON(t, f.State()))
	}
	if c, ok := g.View().Scram.Credential("alice", metadata.ScramSHA512); !ok || !bytes.Equal(c.StoredKey, scramCred(metadata.ScramSHA512, 1).StoredKey) {
		t.Fatalf("restored view: %v %v", c, ok)
	}
	// The wire View carries them to the brokers' clients.
	if w := ctlwire.FromView(g.View()); len(w.Scram["alice"]) != 1 {
		t.Fatal("ViewJSON without the credentials")
	}
}

// TestScramThroughControllers: alterations through a follower's API reach the leader,
// go through Raft, and every client's View shows them; refusals come back as the
// metadata sentinels.
func TestScramThroughControllers(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	leader := tc.waitLeader()
	admin := tc.client(-1, nil, tc.follower(leader))
	res, err := admin.AlterScram(ctxT(t), []metadata.ScramAlteration{
		scramUpsert("alice", scramCred(metadata.ScramSHA256, 7)),
		{User: "ghost", Mechanism: metadata.ScramSHA512, Delete: true},
		{User: "carol", Mechanism: metadata.ScramSHA256, Credential: metadata.ScramCredential{Mechanism: metadata.ScramSHA256, Iterations: 100, Salt: []byte{1}}},
		{User: "dave", Mechanism: 9},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []error{nil, metadata.ErrScramNotFound, metadata.ErrScramCredential, metadata.ErrScramMechanism}
	if len(res) != len(want) {
		t.Fatalf("results %v", res)
	}
	for i, w := range want {
		if (w == nil) != (res[i].Err == nil) || !errors.Is(res[i].Err, w) {
			t.Errorf("result %d (%s): %v, want %v", i, res[i].User, res[i].Err, w)
		}
	}
	if c, ok := admin.View().Scram.Credential("alice", metadata.ScramSHA256); !ok || c.Iterations != 4096 {
		t.Fatal("the altering client's View lacks alice")
	}
	other := tc.client(-1, nil, leader)
	testutil.Eventually(t, 10*time.Second, "another client sees alice", func() bool {
		_, ok := other.View().Scram.Credential("alice", metadata.ScramSHA256)
		return ok
	})
	res, err = admin.AlterScram(ctxT(t), []metadata.ScramAlteration{{User: "alice", Mechanism: metadata.ScramSHA256, Delete: true}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("delete: %v %v", res, err)
	}
	if len(admin.View().Scram) != 0 {
		t.Fatalf("after delete: %v", admin.View().Scram)
	}
}
