package metadata

import (
	"context"

	"github.com/weir-io/weir/security/acl"
)

var _ ACLStore = (*LocalStore)(nil)

// CreateACLs implements ACLStore for the single broker.
func (s *LocalStore) CreateACLs(ctx context.Context, bindings []acl.Binding) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	all, added := acl.Add(s.state.ACLs, bindings)
	if err := CheckACLChange(bindings, nil, len(all)); err != nil {
		return err
	}
	if added == 0 {
		return nil
	}
	prev := s.snapshotState()
	s.state.ACLs = all
	return s.commit(prev)
}

// DeleteACLs implements ACLStore for the single broker.
func (s *LocalStore) DeleteACLs(ctx context.Context, filters []acl.Filter) ([][]acl.Binding, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := CheckACLChange(nil, filters, 0); err != nil {
		return nil, err
	}
	kept, matched := acl.Remove(s.state.ACLs, filters)
	if len(kept) == len(s.state.ACLs) {
		return matched, nil
	}
	prev := s.snapshotState()
	s.state.ACLs = kept
	return matched, s.commit(prev)
}
