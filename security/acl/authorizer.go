package acl

import (
	"context"

	"github.com/weir-io/weir/security"
)

// Authorizer decides requests from a Set of bindings with Kafka's rules (see the
// package comment). It holds only its configuration; the bindings come with each call
// (the current View's), so it needs no lock. A nil *Authorizer allows everything (the
// authorizer is off).
type Authorizer struct {
	super        map[security.Principal]bool
	allowIfNoACL bool
}

// NewAuthorizer returns an authorizer with the given super users.
func NewAuthorizer(superUsers []security.Principal, allowEveryoneIfNoACLFound bool) *Authorizer {
	a := &Authorizer{super: map[security.Principal]bool{}, allowIfNoACL: allowEveryoneIfNoACLFound}
	for _, p := range superUsers {
		a.super[p] = true
	}
	return a
}

// IsSuperUser reports whether p may do anything.
func (a *Authorizer) IsSuperUser(p security.Principal) bool { return a == nil || a.super[p] }

// implies reports whether an ALLOW of granted permits op: ALL permits everything,
// Read/Write/Delete/Alter permit Describe, AlterConfigs permits DescribeConfigs.
func implies(granted, op Operation) bool {
	if granted == op || granted == OpAll {
		return true
	}
	switch op {
	case OpDescribe:
		return granted == OpRead || granted == OpWrite || granted == OpDelete || granted == OpAlter
	case OpDescribeConfigs:
		return granted == OpAlterConfigs
	}
	return false
}

func (b *Binding) appliesTo(p security.Principal, host string) bool {
	return (b.Principal == p || b.Principal == WildcardPrincipal) && (b.Host == Wildcard || b.Host == host)
}

// Authorize reports whether principal p, connected from host, may do op on the resource
// rt/name under the bindings of set.
func (a *Authorizer) Authorize(set *Set, p security.Principal, host string, op Operation, rt ResourceType, name string) bool {
	if a == nil || a.super[p] {
		return true
	}
	denied := false
	found := set.each(rt, name, func(b *Binding) bool {
		// A DENY is not widened by implication: DENY READ still lets Describe through.
		if b.Permission == Deny && (b.Operation == op || b.Operation == OpAll) && b.appliesTo(p, host) {
			denied = true
			return false
		}
		return true
	})
	if !found {
		return a.allowIfNoACL
	}
	if denied {
		return false
	}
	allowed := false
	set.each(rt, name, func(b *Binding) bool {
		if b.Permission == Allow && implies(b.Operation, op) && b.appliesTo(p, host) {
			allowed = true
			return false
		}
		return true
	})
	return allowed
}

// AuthorizeAny reports whether p may do op on at least one resource of type rt (Kafka's
// authorizeByResourceType, KIP-679: InitProducerId's "Write on any topic"): some ALLOW
// pattern for p that no DENY pattern covers (a DENY of "*" or of a prefix of it).
func (a *Authorizer) AuthorizeAny(set *Set, p security.Principal, host string, op Operation, rt ResourceType) bool {
	if a == nil || a.super[p] {
		return true
	}
	var allowLit, allowPre, denyLit, denyPre []string
	n := 0
	for _, b := range set.Bindings() {
		if b.ResourceType != rt {
			continue
		}
		n++
		if !b.appliesTo(p, host) {
			continue
		}
		switch {
		case b.Permission == Deny && (b.Operation == op || b.Operation == OpAll):
			if b.PatternType == PatternPrefixed {
				denyPre = append(denyPre, b.ResourceName)
			} else {
				denyLit = append(denyLit, b.ResourceName)
			}
		case b.Permission == Allow && implies(b.Operation, op):
			if b.PatternType == PatternPrefixed {
				allowPre = append(allowPre, b.ResourceName)
			} else {
				allowLit = append(allowLit, b.ResourceName)
			}
		}
	}
	if n == 0 {
		return a.allowIfNoACL
	}
	for _, d := range denyLit {
		if d == Wildcard {
			return false
		}
	}
	coveredByPrefix := func(name string) bool {
		for _, d := range denyPre {
			if len(name) >= len(d) && name[:len(d)] == d {
				return true
			}
		}
		return false
	}
	for _, name := range allowPre {
		if !coveredByPrefix(name) {
			return true
		}
	}
	for _, name := range allowLit {
		if coveredByPrefix(name) {
			continue
		}
		denied := false
		for _, d := range denyLit {
			denied = denied || d == name
		}
		if !denied {
			return true
		}
	}
	return false
}

// Session is who a request comes from, with the authorizer and the bindings to check it
// against. The broker attaches one to every request's context when the authorizer is
// on; code that serves requests asks Allowed.
type Session struct {
	Principal  security.Principal
	Host       string
	Authorizer *Authorizer
	// ACLs returns the current bindings (the metadata View's).
	ACLs func() *Set
}

// Allowed reports whether the session may do op on rt/name.
func (s *Session) Allowed(op Operation, rt ResourceType, name string) bool {
	if s == nil || s.Authorizer == nil {
		return true
	}
	return s.Authorizer.Authorize(s.ACLs(), s.Principal, s.Host, op, rt, name)
}

// AllowedAny reports whether the session may do op on some resource of type rt.
func (s *Session) AllowedAny(op Operation, rt ResourceType) bool {
	if s == nil || s.Authorizer == nil {
		return true
	}
	return s.Authorizer.AuthorizeAny(s.ACLs(), s.Principal, s.Host, op, rt)
}

type sessionKey struct{}

// NewContext returns ctx carrying s.
func NewContext(ctx context.Context, s *Session) context.Context {
	return context.WithValue(ctx, sessionKey{}, s)
}

// FromContext returns the session of ctx, or nil.
func FromContext(ctx context.Context) *Session {
	s, _ := ctx.Value(sessionKey{}).(*Session)
	return s
}

// Allowed reports whether the request of ctx may do op on rt/name. A context without a
// session is allowed: the authorizer is off, or the caller is the broker itself (its
// own group coordinator restoring offsets, tests of one component).
func Allowed(ctx context.Context, op Operation, rt ResourceType, name string) bool {
	return FromContext(ctx).Allowed(op, rt, name)
}
