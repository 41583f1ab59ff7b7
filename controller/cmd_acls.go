package controller

import (
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/security/acl"
)

// ACL commands. The bindings are State.ACLs, sorted and without duplicates; a command
// stores a new slice (Views and snapshots share the old one). Validation happens in
// apply, so every replica refuses a bad binding alike whatever proposed it.

// createACLsCmd adds bindings; those already present are kept (a retry changes nothing).
type createACLsCmd struct {
	Bindings []acl.Binding `json:"bindings"`
}

func (*createACLsCmd) kind() cmdType { return cmdCreateACLs }

func (c *createACLsCmd) apply(m *machine) (any, bool, error) {
	all, added := acl.Add(m.st.ACLs, c.Bindings)
	if err := metadata.CheckACLChange(c.Bindings, nil, len(all)); err != nil {
		return nil, false, err
	}
	if added == 0 {
		return 0, false, nil
	}
	m.st.ACLs = all
	return added, true, nil
}

// deleteACLsCmd removes the bindings any filter matches; the value is, per filter, the
// bindings it matched.
type deleteACLsCmd struct {
	Filters []acl.Filter `json:"filters"`
}

func (*deleteACLsCmd) kind() cmdType { return cmdDeleteACLs }

func (c *deleteACLsCmd) apply(m *machine) (any, bool, error) {
	if err := metadata.CheckACLChange(nil, c.Filters, 0); err != nil {
		return nil, false, err
	}
	kept, matched := acl.Remove(m.st.ACLs, c.Filters)
	if len(kept) == len(m.st.ACLs) {
		return matched, false, nil
	}
	m.st.ACLs = kept
	return matched, true, nil
}
