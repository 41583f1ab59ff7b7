package metadata

import (
	"context"
	"fmt"
)

var _ ScramStore = (*LocalStore)(nil)

// AlterScram implements ScramStore: the standalone broker's credentials live in its
// metadata file with the rest of its state. The file holds no passwords, but its keys
// are secrets: the data directory must not be readable by others.
func (s *LocalStore) AlterScram(_ context.Context, alterations []ScramAlteration) ([]ScramResult, error) {
	if len(alterations) > MaxScramAlterations {
		return nil, fmt.Errorf("%w: %d alterations in one request (at most %d)", ErrScramCredential, len(alterations), MaxScramAlterations)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	next, results := ApplyScram(s.state.Scram, alterations)
	changed := false
	for _, r := range results {
		changed = changed || r.Err == nil
	}
	if !changed {
		return results, nil
	}
	prev := s.snapshotState()
	s.state.Scram = next
	if err := s.commit(prev); err != nil {
		return nil, err
	}
	return results, nil
}
