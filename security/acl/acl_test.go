package acl

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/weir-io/weir/security"
)

func allow(rt ResourceType, name string, pt PatternType, p security.Principal, op Operation) Binding {
	return Binding{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: p, Host: "*", Operation: op, Permission: Allow}
}

func deny(rt ResourceType, name string, pt PatternType, p security.Principal, op Operation) Binding {
	b := allow(rt, name, pt, p, op)
	b.Permission = Deny
	return b
}

var (
	alice = security.User("alice")
	bob   = security.User("bob")
	admin = security.User("admin")
)

func TestAuthorizeRules(t *testing.T) {
	set := NewSet([]Binding{
		allow(ResourceTopic, "orders", PatternLiteral, alice, OpRead),
		allow(ResourceTopic, "logs-", PatternPrefixed, alice, OpWrite),
		deny(ResourceTopic, "logs-secret", PatternLiteral, alice, OpWrite),
		allow(ResourceTopic, "*", PatternLiteral, bob, OpDescribe),
		allow(ResourceTopic, "shared", PatternLiteral, WildcardPrincipal, OpRead),
		deny(ResourceTopic, "shared", PatternLiteral, bob, OpAll),
		allow(ResourceTopic, "cfg", PatternLiteral, alice, OpAlterConfigs),
		{ResourceType: ResourceTopic, ResourceName: "local", PatternType: PatternLiteral, Principal: alice, Host: "10.0.0.1", Operation: OpRead, Permission: Allow},
		allow(ResourceGroup, "g", PatternLiteral, alice, OpRead),
		allow(ResourceCluster, ClusterName, PatternLiteral, alice, OpAll),
		deny(ResourceCluster, ClusterName, PatternLiteral, alice, OpAlter),
	})
	a := NewAuthorizer([]security.Principal{admin}, false)
	cases := []struct {
		name string
		p    security.Principal
		host string
		op   Operation
		rt   ResourceType
		res  string
		want bool
	}{
		{"literal allow", alice, "h", OpRead, ResourceTopic, "orders", true},
		{"other op", alice, "h", OpWrite, ResourceTopic, "orders", false},
		{"other principal", bob, "h", OpRead, ResourceTopic, "orders", false},
		{"read implies describe", alice, "h", OpDescribe, ResourceTopic, "orders", true},
		{"write implies describe", alice, "h", OpDescribe, ResourceTopic, "logs-a", true},
		{"prefixed", alice, "h", OpWrite, ResourceTopic, "logs-a", true},
		{"prefix itself", alice, "h", OpWrite, ResourceTopic, "logs-", true},
		{"not the prefix", alice, "h", OpWrite, ResourceTopic, "logs", false},
		{"deny wins over prefixed allow", alice, "h", OpWrite, ResourceTopic, "logs-secret", false},
		{"deny write leaves describe", alice, "h", OpDescribe, ResourceTopic, "logs-secret", true},
		{"wildcard name", bob, "h", OpDescribe, ResourceTopic, "anything", true},
		{"wildcard name not more", bob, "h", OpRead, ResourceTopic, "anything", false},
		{"wildcard principal", alice, "h", OpRead, ResourceTopic, "shared", true},
		{"deny ALL beats wildcard allow", bob, "h", OpRead, ResourceTopic, "shared", false},
		{"alter configs implies describe configs", alice, "h", OpDescribeConfigs, ResourceTopic, "cfg", true},
		{"describe configs does not imply alter", alice, "h", OpAlterConfigs, ResourceTopic, "orders", false},
		{"host match", alice, "10.0.0.1", OpRead, ResourceTopic, "local", true},
		{"host mismatch", alice, "10.0.0.2", OpRead, ResourceTopic, "local", false},
		{"group", alice, "h", OpRead, ResourceGroup, "g", true},
		{"group is not topic", alice, "h", OpRead, ResourceGroup, "orders", false},
		{"cluster ALL", alice, "h", OpIdempotentWrite, ResourceCluster, ClusterName, true},
		{"cluster deny", alice, "h", OpAlter, ResourceCluster, ClusterName, false},
		{"no acl: denied", alice, "h", OpRead, ResourceTransactionalID, "tx", false},
		{"super user", admin, "h", OpDelete, ResourceTopic, "orders", true},
		{"super user on resource without acl", admin, "h", OpRead, ResourceTransactionalID, "tx", true},
	}
	for _, c := range cases {
		if got := a.Authorize(set, c.p, c.host, c.op, c.rt, c.res); got != c.want {
			t.Errorf("%s: Authorize(%s %s %s %s:%s) = %v, want %v", c.name, c.p, c.host, c.op, c.rt, c.res, got, c.want)
		}
	}
	var off *Authorizer
	if !off.Authorize(set, bob, "h", OpDelete, ResourceTopic, "orders") {
		t.Error("a nil authorizer (off) must allow everything")
	}
}

func TestAllowEveryoneIfNoACLFound(t *testing.T) {
	set := NewSet([]Binding{allow(ResourceTopic, "orders", PatternLiteral, alice, OpRead)})
	a := NewAuthorizer(nil, true)
	if !a.Authorize(set, bob, "h", OpWrite, ResourceTopic, "free") {
		t.Error("a topic without ACLs must be open with allow.everyone.if.no.acl.found")
	}
	if a.Authorize(set, bob, "h", OpRead, ResourceTopic, "orders") {
		t.Error("a topic with ACLs stays closed to others")
	}
	if NewAuthorizer(nil, false).Authorize(set, bob, "h", OpWrite, ResourceTopic, "free") {
		t.Error("by default a topic without ACLs is closed")
	}
	if !a.Authorize(nil, bob, "h", OpWrite, ResourceTopic, "free") {
		t.Error("no ACLs at all: open with allow.everyone.if.no.acl.found")
	}
}

func TestAuthorizeAny(t *testing.T) {
	a := NewAuthorizer(nil, false)
	set := NewSet([]Binding{
		allow(ResourceTopic, "a", PatternLiteral, alice, OpWrite),
		allow(ResourceTopic, "p-", PatternPrefixed, bob, OpWrite),
		deny(ResourceTopic, "p", PatternPrefixed, bob, OpWrite),
		allow(ResourceTopic, "x", PatternLiteral, security.User("carol"), OpWrite),
		deny(ResourceTopic, "*", PatternLiteral, security.User("carol"), OpWrite),
	})
	if !a.AuthorizeAny(set, alice, "h", OpWrite, ResourceTopic) {
		t.Error("alice may write topic a")
	}
	if a.AuthorizeAny(set, bob, "h", OpWrite, ResourceTopic) {
		t.Error("bob's prefix is covered by a deny prefix")
	}
	if a.AuthorizeAny(set, security.User("carol"), "h", OpWrite, ResourceTopic) {
		t.Error("carol is denied every topic")
	}
	if a.AuthorizeAny(set, alice, "h", OpWrite, ResourceGroup) {
		t.Error("no group ACLs")
	}
}

func TestFilterMatch(t *testing.T) {
	bs := []Binding{
		allow(ResourceTopic, "orders", PatternLiteral, alice, OpRead),
		allow(ResourceTopic, "*", PatternLiteral, alice, OpRead),
		allow(ResourceTopic, "ord", PatternPrefixed, alice, OpRead),
		allow(ResourceTopic, "x", PatternPrefixed, alice, OpRead),
		deny(ResourceGroup, "orders", PatternLiteral, bob, OpRead),
	}
	name := "orders"
	count := func(f Filter) int { return len(NewSet(bs).Select(f)) }
	if n := count(Filter{ResourceType: ResourceTopic, ResourceName: &name, PatternType: PatternMatch, Operation: OpAny, Permission: PermissionAny}); n != 3 {
		t.Errorf("MATCH orders selected %d, want 3 (literal, *, prefix ord)", n)
	}
	if n := count(Filter{ResourceType: ResourceAny, ResourceName: &name, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}); n != 2 {
		t.Errorf("ANY orders selected %d, want 2", n)
	}
	if n := count(Filter{ResourceType: ResourceAny, PatternType: PatternPrefixed, Operation: OpAny, Permission: PermissionAny}); n != 2 {
		t.Errorf("PREFIXED selected %d, want 2", n)
	}
	p := bob
	if n := count(Filter{ResourceType: ResourceAny, PatternType: PatternAny, Principal: &p, Operation: OpRead, Permission: Deny}); n != 1 {
		t.Errorf("bob's denies: %d, want 1", n)
	}
	kept, matched := Remove(bs, []Filter{{ResourceType: ResourceTopic, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}})
	if len(kept) != 1 || len(matched[0]) != 4 {
		t.Errorf("remove topics: kept %d, matched %d", len(kept), len(matched[0]))
	}
	all, added := Add(bs[:2], bs)
	if len(all) != 5 || added != 3 {
		t.Errorf("add: %d bindings, %d new", len(all), added)
	}
}

func TestValidate(t *testing.T) {
	good := allow(ResourceTopic, "t", PatternLiteral, alice, OpRead)
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := []Binding{
		allow(ResourceAny, "t", PatternLiteral, alice, OpRead),
		allow(ResourceTopic, "t", PatternMatch, alice, OpRead),
		allow(ResourceTopic, "", PatternLiteral, alice, OpRead),
		allow(ResourceCluster, "other", PatternLiteral, alice, OpAlter),
		allow(ResourceTopic, "t", PatternLiteral, "alice", OpRead),
		allow(ResourceGroup, "g", PatternLiteral, alice, OpWrite),
		allow(ResourceTopic, "t", PatternLiteral, alice, OpAny),
		{ResourceType: ResourceTopic, ResourceName: "t", PatternType: PatternLiteral, Principal: alice, Host: "", Operation: OpRead, Permission: Allow},
		{ResourceType: ResourceTopic, ResourceName: "t", PatternType: PatternLiteral, Principal: alice, Host: "*", Operation: OpRead, Permission: PermissionAny},
	}
	for _, b := range bad {
		if err := b.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%v: Validate = %v, want ErrInvalid", b, err)
		}
	}
}

func TestJSONAndParse(t *testing.T) {
	b := allow(ResourceTransactionalID, "tx", PatternPrefixed, alice, OpDescribeConfigs)
	js, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"resource_type":"TRANSACTIONAL_ID","resource_name":"tx","pattern_type":"PREFIXED","principal":"User:alice","host":"*","operation":"DESCRIBE_CONFIGS","permission":"ALLOW"}`
	if string(js) != want {
		t.Fatalf("JSON %s, want %s", js, want)
	}
	var back Binding
	if err := json.Unmarshal(js, &back); err != nil || back != b {
		t.Fatalf("round trip: %v %v", back, err)
	}
	if rt, err := ParseResourceType("transactional-id"); err != nil || rt != ResourceTransactionalID {
		t.Errorf("parse transactional-id: %v %v", rt, err)
	}
	if _, err := ParseOperation("fly"); !errors.Is(err, ErrInvalid) {
		t.Errorf("parse fly: %v", err)
	}
	ps, err := ParseSuperUsers("User:admin; User:weir;")
	if err != nil || len(ps) != 2 || ps[1] != "User:weir" {
		t.Errorf("super users %v %v", ps, err)
	}
	if _, err := ParseSuperUsers("admin"); err == nil {
		t.Error("a super user without a type must be refused")
	}
}

// BenchmarkAuthorize measures a check against a large set (the index, not a scan).
func BenchmarkAuthorize(b *testing.B) {
	var bs []Binding
	for i := 0; i < 10000; i++ {
		bs = append(bs, allow(ResourceTopic, "topic-"+string(rune('a'+i%26))+string(rune('a'+i/26%26))+string(rune('a'+i/676)), PatternLiteral, alice, OpRead))
	}
	bs = append(bs, allow(ResourceTopic, "logs-", PatternPrefixed, alice, OpWrite))
	set := NewSet(bs)
	a := NewAuthorizer(nil, false)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if !a.Authorize(set, alice, "h", OpDescribe, ResourceTopic, "logs-x") {
			b.Fatal("denied")
		}
	}
}
