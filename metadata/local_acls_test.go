package metadata

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/weir-io/weir/security"
	"github.com/weir-io/weir/security/acl"
)

// TestLocalACLs: the single broker's store keeps ACLs in its file across a reopen,
// refuses invalid ones, and deletes by filter.
func TestLocalACLs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metadata.json")
	s, err := OpenLocal(LocalConfig{Path: path, Self: Broker{ID: 0, Host: "127.0.0.1", Port: 9092}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	b := acl.Binding{ResourceType: acl.ResourceGroup, ResourceName: "g-", PatternType: acl.PatternPrefixed, Principal: security.User("alice"), Host: "*", Operation: acl.OpRead, Permission: acl.Allow}
	if err := s.CreateACLs(ctx, []acl.Binding{b, b}); err != nil {
		t.Fatal(err)
	}
	bad := b
	bad.Principal = "alice"
	if err := s.CreateACLs(ctx, []acl.Binding{bad}); !errors.Is(err, ErrACLRejected) {
		t.Fatalf("invalid principal: %v", err)
	}
	s2, err := OpenLocal(LocalConfig{Path: path, Self: Broker{ID: 0, Host: "127.0.0.1", Port: 9092}})
	if err != nil {
		t.Fatal(err)
	}
	if got := s2.View().ACLSet().Bindings(); len(got) != 1 || got[0] != b {
		t.Fatalf("reopened store has %v", got)
	}
	if !acl.NewAuthorizer(nil, false).Authorize(s2.View().ACLSet(), security.User("alice"), "h", acl.OpDescribe, acl.ResourceGroup, "g-1") {
		t.Fatal("the View's ACLs do not let alice describe group g-1")
	}
	m, err := s2.DeleteACLs(ctx, []acl.Filter{{ResourceType: acl.ResourceAny, PatternType: acl.PatternAny, Operation: acl.OpAny, Permission: acl.PermissionAny}})
	if err != nil || len(m[0]) != 1 || s2.View().ACLSet().Len() != 0 {
		t.Fatalf("delete all: %v %v, %d left", m, err, s2.View().ACLSet().Len())
	}
}
