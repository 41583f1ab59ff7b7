package metadata

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
)

func testCred(m ScramMechanism, iterations int32, b byte) ScramCredential {
	return ScramCredential{Mechanism: m, Iterations: iterations, Salt: []byte{b, 1, 2},
		StoredKey: bytes.Repeat([]byte{b}, m.KeySize()), ServerKey: bytes.Repeat([]byte{b + 1}, m.KeySize())}
}

func upsert(user string, c ScramCredential) ScramAlteration {
	return ScramAlteration{User: user, Mechanism: c.Mechanism, Credential: c}
}

// TestApplyScramRules: Kafka's rules, result per user, copy-on-write.
func TestApplyScramRules(t *testing.T) {
	cur, res := ApplyScram(nil, []ScramAlteration{
		upsert("alice", testCred(ScramSHA256, 4096, 1)),
		upsert("bob", testCred(ScramSHA512, 16384, 2)),
	})
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r)
		}
	}
	before := cur
	next, res := ApplyScram(cur, []ScramAlteration{
		{User: "alice", Mechanism: ScramSHA512, Delete: true},                              // not found
		{User: "bob", Mechanism: ScramSHA512, Delete: true},                                // ok
		upsert("carol", testCred(ScramSHA256, 4095, 3)),                                    // too few
		upsert("dave", testCred(ScramSHA256, 16385, 3)),                                    // too many
		upsert("", testCred(ScramSHA256, 4096, 3)),                                         // empty name
		{User: "erin", Mechanism: 3, Credential: testCred(3, 4096, 3)},                     // mechanism
		upsert("frank", testCred(ScramSHA256, 4096, 4)),                                    // duplicate...
		upsert("frank", testCred(ScramSHA512, 4096, 4)),                                    // ...of frank
		upsert("alice", testCred(ScramSHA512, 8192, 5)),                                    // alice again: her first error stands
		{User: "gina", Mechanism: ScramSHA256, Credential: testCred(ScramSHA512, 4096, 6)}, // keys mismatch
		upsert("hank", testCred(ScramSHA512, 4096, 7)),                                     // ok
	})
	want := []struct {
		user string
		err  error
	}{{"alice", ErrScramNotFound}, {"bob", nil}, {"carol", ErrScramCredential}, {"dave", ErrScramCredential}, {"", ErrScramCredential},
		{"erin", ErrScramMechanism}, {"frank", ErrScramDuplicate}, {"gina", ErrScramCredential}, {"hank", nil}}
	if len(res) != len(want) {
		t.Fatalf("results %v", res)
	}
	for i, w := range want {
		if res[i].User != w.user || !errors.Is(res[i].Err, w.err) || (w.err == nil) != (res[i].Err == nil) {
			t.Errorf("result %d: %v, want %s %v", i, res[i], w.user, w.err)
		}
	}
	if _, ok := next.Credential("bob", ScramSHA512); ok || next["bob"] != nil {
		t.Fatal("bob's only credential was not deleted (or the user kept)")
	}
	if c, ok := next.Credential("hank", ScramSHA512); !ok || c.Iterations != 4096 {
		t.Fatal("hank not added")
	}
	if len(next["frank"]) != 0 || len(next["carol"]) != 0 {
		t.Fatal("refused alterations applied")
	}
	if _, ok := before.Credential("bob", ScramSHA512); !ok || before["hank"] != nil {
		t.Fatal("the old table was modified")
	}
	// Both mechanisms, ascending; replacing keeps one per mechanism.
	next, _ = ApplyScram(next, []ScramAlteration{upsert("hank", testCred(ScramSHA256, 5000, 8))})
	next, _ = ApplyScram(next, []ScramAlteration{upsert("hank", testCred(ScramSHA256, 6000, 9))})
	if h := next["hank"]; len(h) != 2 || h[0].Mechanism != ScramSHA256 || h[0].Iterations != 6000 || h[1].Mechanism != ScramSHA512 {
		t.Fatalf("hank %v", h)
	}
	if same, _ := ApplyScram(next, []ScramAlteration{{User: "zed", Mechanism: ScramSHA256, Delete: true}}); fmt.Sprintf("%p", same) != fmt.Sprintf("%p", next) {
		t.Fatal("a refused request made a new table")
	}
}

// TestScramCredentialNotLogged: the keys stay out of %v and slog.
func TestScramCredentialNotLogged(t *testing.T) {
	c := testCred(ScramSHA256, 4096, 'K')
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "cred", c)
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%v", c), buf.String()} {
		if strings.Contains(s, "KKKK") || strings.Contains(s, "S0tL") {
			t.Fatalf("key in %q", s)
		}
	}
}

// TestLocalStoreScram: LocalStore keeps credentials in its file across a reopen, and
// its View shows them.
func TestLocalStoreScram(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metadata.json")
	s, err := OpenLocal(LocalConfig{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	v0 := s.View().Version
	res, err := s.AlterScram(context.Background(), []ScramAlteration{upsert("alice", testCred(ScramSHA512, 4096, 1)), {User: "nobody", Mechanism: ScramSHA256, Delete: true}})
	if err != nil || len(res) != 2 || res[0].Err != nil || !errors.Is(res[1].Err, ErrScramNotFound) {
		t.Fatalf("%v %v", res, err)
	}
	if v := s.View(); v.Version != v0+1 || len(v.Scram["alice"]) != 1 {
		t.Fatalf("view %d %v", v.Version, v.Scram)
	}
	// Nothing valid: no new version.
	if _, err := s.AlterScram(context.Background(), []ScramAlteration{{User: "nobody", Mechanism: ScramSHA256, Delete: true}}); err != nil || s.View().Version != v0+1 {
		t.Fatal("a refused alteration bumped the version")
	}
	s2, err := OpenLocal(LocalConfig{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	c, ok := s2.View().Scram.Credential("alice", ScramSHA512)
	if !ok || !bytes.Equal(c.StoredKey, testCred(ScramSHA512, 4096, 1).StoredKey) {
		t.Fatalf("after reopening: %v %v", c, ok)
	}
	if _, err := s2.AlterScram(context.Background(), []ScramAlteration{{User: "alice", Mechanism: ScramSHA512, Delete: true}}); err != nil || s2.View().Scram != nil && len(s2.View().Scram) != 0 {
		t.Fatalf("delete: %v %v", err, s2.View().Scram)
	}
}
