package controller

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/security"
	"github.com/weir-io/weir/security/acl"
)

func binding(p security.Principal, topic string, op acl.Operation) acl.Binding {
	return acl.Binding{ResourceType: acl.ResourceTopic, ResourceName: topic, PatternType: acl.PatternLiteral, Principal: p, Host: "*", Operation: op, Permission: acl.Allow}
}

// TestFSMACLs: the commands add (idempotently), refuse invalid bindings alike on every
// replica, delete by filter; a snapshot carries the ACLs and one written before ACLs
// existed restores with none.
func TestFSMACLs(t *testing.T) {
	f := NewFSM(nil)
	alice := security.User("alice")
	b1, b2 := binding(alice, "a", acl.OpRead), binding(alice, "b", acl.OpWrite)
	mustApply(t, f, &createACLsCmd{Bindings: []acl.Binding{b1, b2}})
	v := f.View().Version
	if res := apply(t, f, &createACLsCmd{Bindings: []acl.Binding{b1}}); res.Err != nil || res.Version != v {
		t.Fatalf("re-adding an existing binding: %+v (version %d)", res, v)
	}
	bad := b1
	bad.Operation = acl.OpIdempotentWrite // not a topic operation
	if res := apply(t, f, &createACLsCmd{Bindings: []acl.Binding{bad}}); !errors.Is(res.Err, metadata.ErrACLRejected) || !errors.Is(res.Err, acl.ErrInvalid) {
		t.Fatalf("invalid binding: %v", res.Err)
	}
	if n := f.View().ACLSet().Len(); n != 2 {
		t.Fatalf("%d bindings, want 2", n)
	}
	if !acl.NewAuthorizer(nil, false).Authorize(f.View().ACLSet(), alice, "h", acl.OpDescribe, acl.ResourceTopic, "b") {
		t.Fatal("the View's ACLs do not authorize alice")
	}

	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	name := "a"
	res := mustApply(t, f, &deleteACLsCmd{Filters: []acl.Filter{{ResourceType: acl.ResourceTopic, ResourceName: &name, PatternType: acl.PatternLiteral, Operation: acl.OpAny, Permission: acl.PermissionAny}}})
	if m := res.Value.([][]acl.Binding); len(m) != 1 || len(m[0]) != 1 || m[0][0] != b1 || f.View().ACLSet().Len() != 1 {
		t.Fatalf("delete matched %v, %d left", m, f.View().ACLSet().Len())
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	g := NewFSM(nil)
	if err := g.Restore(readCloser{&sink}); err != nil {
		t.Fatal(err)
	}
	if got := g.View().ACLSet().Bindings(); len(got) != 2 || got[0] != b1 || got[1] != b2 {
		t.Fatalf("restored ACLs %v", got)
	}
	old := NewFSM(nil)
	if err := old.Restore(readCloser{bytes.NewBufferString(`{"format_version":1,"cluster_id":"c","version":3,"next_producer_id":0,"brokers":{},"topics":{}}`)}); err != nil {
		t.Fatal(err)
	}
	if old.View().ACLSet().Len() != 0 || old.View().Version != 3 {
		t.Fatalf("old snapshot: %d ACLs, version %d", old.View().ACLSet().Len(), old.View().Version)
	}
}

// TestClientACLs: through the API and the client, a change is in the caller's View on
// return and in every controller's; bad bindings come back as metadata.ErrACLRejected.
func TestClientACLs(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	tc.waitLeader()
	cl := tc.client(-1, nil)
	ctx := ctxT(t)
	bob := security.User("bob")
	if err := cl.CreateACLs(ctx, []acl.Binding{binding(bob, "x", acl.OpRead), binding(bob, "y", acl.OpAll)}); err != nil {
		t.Fatal(err)
	}
	if n := cl.View().ACLSet().Len(); n != 2 {
		t.Fatalf("client View has %d ACLs", n)
	}
	bad := binding(bob, "", acl.OpRead)
	if err := cl.CreateACLs(ctx, []acl.Binding{bad}); !errors.Is(err, metadata.ErrACLRejected) {
		t.Fatalf("empty resource name: %v", err)
	}
	all, err := cl.ACLs(ctx)
	if err != nil || len(all) != 2 {
		t.Fatalf("ACLs: %v %v", all, err)
	}
	p := bob
	matched, err := cl.DeleteACLs(ctx, []acl.Filter{{ResourceType: acl.ResourceAny, PatternType: acl.PatternAny, Principal: &p, Operation: acl.OpAll, Permission: acl.PermissionAny}})
	if err != nil || len(matched) != 1 || len(matched[0]) != 1 || matched[0][0].ResourceName != "y" {
		t.Fatalf("delete: %v %v", matched, err)
	}
	// Followers apply the delete shortly after the leader answered.
	for i := range tc.ctrls {
		testutil.Eventually(t, 30*time.Second, fmt.Sprintf("controller %d with 1 ACL after the delete", i+1), func() bool {
			return tc.ctrls[i].View().ACLSet().Len() == 1
		})
	}
}
