package controller

import "github.com/weir-io/weir/metadata"

// alterScramCmd applies SCRAM credential alterations with Kafka's rules
// (metadata.ApplyScram, shared with LocalStore). It carries the derived keys, never a
// password or salted password, so the Raft log and snapshots hold nothing more secret
// than the View. The value is the per-user results ([]metadata.ScramResult); refusals
// are results, not an error, and the valid alterations of the request apply together.
type alterScramCmd struct {
	Alterations []metadata.ScramAlteration `json:"alterations"`
}

func (*alterScramCmd) kind() cmdType { return cmdAlterScramCredentials }

func (c *alterScramCmd) apply(m *machine) (any, bool, error) {
	next, results := metadata.ApplyScram(m.st.Scram, c.Alterations)
	changed := false
	for _, r := range results {
		changed = changed || r.Err == nil
	}
	if changed {
		m.st.Scram = next
	}
	return results, changed, nil
}
