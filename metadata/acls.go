package metadata

import (
	"context"
	"errors"

	"github.com/weir-io/weir/security/acl"
)

// ErrACLRejected: an ACL change was refused (an invalid binding or filter, too many
// bindings); the message says why, and it also matches acl.ErrInvalid when a binding
// or filter is malformed. Nothing changed.
var ErrACLRejected = errors.New("metadata: ACL change rejected")

// ACLStore is implemented by stores that keep the cluster's ACLs (the Raft controller's
// client, LocalStore). The bindings are in every View (View.ACLs), so each broker
// authorizes from its own View; a change returns once this store's View shows it.
type ACLStore interface {
	// CreateACLs adds bindings (each valid: acl.Binding.Validate); existing ones are
	// kept, so a retry is harmless.
	CreateACLs(ctx context.Context, bindings []acl.Binding) error
	// DeleteACLs removes every binding a filter matches and returns, per filter, the
	// bindings it matched.
	DeleteACLs(ctx context.Context, filters []acl.Filter) ([][]acl.Binding, error)
}

// ACLSet is v's ACLs, never nil-dereferenced (a nil Set has no bindings).
func (v *View) ACLSet() *acl.Set {
	if v == nil {
		return nil
	}
	return v.ACLs
}

// CheckACLChange validates a change before it is applied: every binding valid, every
// filter valid, and at most acl.MaxBindings in all afterwards (total).
func CheckACLChange(add []acl.Binding, filters []acl.Filter, total int) error {
	for _, b := range add {
		if err := b.Validate(); err != nil {
			return errors.Join(ErrACLRejected, err)
		}
	}
	for _, f := range filters {
		if err := f.Validate(); err != nil {
			return errors.Join(ErrACLRejected, err)
		}
	}
	if total > acl.MaxBindings {
		return errors.Join(ErrACLRejected, errors.New("acl: more than 100000 bindings"))
	}
	return nil
}
